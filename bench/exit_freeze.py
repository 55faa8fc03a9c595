"""The CPU a process spends in Python's finalization after it imported what `orchestrator run`
imports for an arm (LeRobot's SO-101 robot and cameras, torch through them, the runner, the
statistics, the MuJoCo scene), with and without `gc.freeze` at exit
(`orchestrator/core/exit_freeze.py`, which `run`, `doctor` and `export` register).

Each run is a fresh interpreter that imports those modules, registers the freeze (or not), and
prints its CPU so far as its last `atexit` handler; `/usr/bin/time`-style accounting of the whole
process (`resource.getrusage(RUSAGE_CHILDREN)`) gives the total, and the difference is what the
exit cost. Prints each run and the median of each mode, and the load average.

Usage: `MUJOCO_GL=egl uv run --all-extras python bench/exit_freeze.py [--runs 3]`
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys

CHILD = """
import atexit, gc, os, resource, sys
import lerobot.cameras.opencv, lerobot.robots.so_follower
import orchestrator.analysis.stats, orchestrator.commands.run, orchestrator.rigs.so101.rig, orchestrator.sim.scene
if os.environ.get("FREEZE") == "1":
    from orchestrator.core.exit_freeze import freeze_at_exit
    freeze_at_exit()
def cpu_so_far():
    r = resource.getrusage(resource.RUSAGE_SELF)
    print(r.ru_utime + r.ru_stime, flush=True)
atexit.register(cpu_so_far)   # registered last: runs first, before the freeze (LIFO)
"""


def exit_cpu(freeze: bool) -> float:
    """CPU seconds of one fresh process after its last atexit handler began (its finalization)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, check=True,
                         env={**os.environ, "FREEZE": "1" if freeze else "0"})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return total - float(out.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    seen: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(args.runs):
        for freeze in (False, True):
            seen[freeze].append(exit_cpu(freeze))
            print(f"freeze={freeze!s:5} exit CPU {seen[freeze][-1]:.2f} s", flush=True)
    for freeze, values in seen.items():
        print(f"freeze={freeze!s:5} median exit CPU {statistics.median(values):.2f} s over {len(values)} runs")
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
