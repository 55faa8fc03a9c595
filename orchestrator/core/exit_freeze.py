"""Python's last garbage collections skipped at a process's exit.

At exit, CPython's finalization collects the garbage again and again while it tears its modules
down, walking every object still alive: after an import of LeRobot and torch (a `run` or `doctor`
on an arm, an `export`), hundreds of thousands of them, for nothing (the operating system takes
the memory back). `freeze_at_exit` has Python freeze them (`gc.freeze`) when the exit begins: they
are still freed by their reference counts, and every `atexit` handler registered before it (the
logging's flush among them) still runs, but the collections no longer walk them. Measured
(docs/benchmarks.md, bench/exit_freeze.py): the export's exit 1.3 s of CPU -> 0.25 s; a process
that imported what `run` imports for an arm, 1.01 s -> 0.22 s (medians of three runs).

What it gives up: an object in a reference cycle still alive at exit is not collected, so its
`__del__` does not run; nothing here relies on that (files, stores, videos and the arm's torque
are closed explicitly, and Python never promised to collect them at exit)."""

from __future__ import annotations

import atexit
import gc


def freeze_at_exit() -> None:
    """Register `gc.freeze` to run when the process exits (once, however often it is called)."""
    atexit.unregister(gc.freeze)
    atexit.register(gc.freeze)
