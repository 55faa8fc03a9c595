"""The export's helper processes: the work that does not need LeRobot (reading the recordings'
packets, decoding them for the frame statistics, the report's statistics) runs beside the main
thread, which imports LeRobot and torch and then writes the dataset (docs/benchmarks.md, Export).

On two cores, threads would not do: the main thread's import holds Python's lock (the GIL) nearly
all the time, and the statistics' numpy work needs it too. So the helpers are processes, forked
at the start of the export, before the campaign store is opened and before LeRobot, torch or
any decoder thread exists (a forked child starts at once: nothing to import again). Where fork
is not available, or the process already runs other Python threads or has imported torch (a fork
would copy locks they may hold: torch's thread pools are not safe to fork, and Python 3.12+ warns
of the deadlock; an export called inside a process that already ran a policy, as a test's does),
the helpers are two threads instead: the same jobs, the same results.

The main thread's work is the export's critical path (the import, then the episodes in order),
so it keeps a core: there is one helper process per other core, at most two (`WORKERS`: one on
a two-core machine; helpers at a lower priority instead starved behind other programs on a
loaded machine). A helper process ignores Ctrl-C (the export decides) and ends by itself within
`WATCH_S` when the export's process is gone (SIGKILL, SIGTERM), so no helper outlives it. A helper
that dies makes the export fail with one line (`HELPER_DIED`), nothing published."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
import time
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor

# helper processes: one core for the main thread, the others (at most two) for the helpers
WORKERS = max(1, min(2, (os.cpu_count() or 2) - 1))
THREADS = 2       # helper threads where processes cannot be forked (decoding releases the GIL)
WATCH_S = 0.2     # how often a helper process checks that the export's process is still there


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(WATCH_S)
    os._exit(1)


def _helper_start(parent: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)      # Ctrl-C is the export's to handle
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True, name="watch-export").start()


def forks() -> bool:
    """Whether `helpers` forks processes here: fork exists, this process runs one Python thread,
    and it has not imported torch (whose thread pools a fork would copy mid-lock)."""
    return ("fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1
            and "torch" not in sys.modules)


def helpers() -> Executor:
    """`WORKERS` helper processes, forked now (see the module docstring); `THREADS` threads where
    `forks()` is False."""
    if not forks():
        return ThreadPoolExecutor(THREADS, thread_name_prefix="export-helper")
    pool = ProcessPoolExecutor(WORKERS, mp_context=multiprocessing.get_context("fork"),
                               initializer=_helper_start, initargs=(os.getpid(),))
    pool.submit(int).result()        # fork every helper now, while nothing else runs in this process
    return pool


HELPER_DIED = ("a helper process of the export died (out of memory? `dmesg` says; or killed); "
               "nothing was published: export again")
