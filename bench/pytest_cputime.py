"""CPU seconds per test file, for measuring the test lanes on a shared machine (not a test).

Wall times (`--durations`) swing with the other work on a shared machine; the CPU time a test
takes in the pytest process (`time.process_time`: every thread of the process, no child
process) swings far less. Loaded as a pytest plugin, this prints the files' CPU times at the
end of the run, largest first, and writes every test's and file's figure as JSON when
CPUTIME_OUT names a file (compare two runs with `python bench/pytest_cputime.py A.json B.json`).

Run: PYTHONPATH=bench uv run --all-extras pytest -m fast -q -p pytest_cputime
"""

from __future__ import annotations

import collections
import json
import os
import sys
import time

import pytest

_seconds: collections.defaultdict[str, float] = collections.defaultdict(float)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    start = time.process_time()
    try:
        return (yield)
    finally:
        _seconds[item.nodeid] += time.process_time() - start


def _per_file(tests: dict[str, float]) -> dict[str, float]:
    files: collections.defaultdict[str, float] = collections.defaultdict(float)
    for nodeid, seconds in tests.items():
        files[nodeid.split("::")[0]] += seconds
    return files


def pytest_terminal_summary(terminalreporter):
    files = _per_file(_seconds)
    for name, seconds in sorted(files.items(), key=lambda item: -item[1])[:15]:
        terminalreporter.write_line(f"{seconds:6.2f} s CPU  {name}")
    terminalreporter.write_line(f"CPU in tests {sum(_seconds.values()):.1f} s, "
                                f"whole pytest process {time.process_time():.1f} s")
    if os.environ.get("CPUTIME_OUT"):
        with open(os.environ["CPUTIME_OUT"], "w") as out:
            json.dump({"tests": dict(_seconds), "files": dict(files)}, out, indent=0)


def compare(before: str, after: str, rows: int = 30) -> None:
    """Print the files of two runs side by side, largest (after) first."""
    a, b = (json.load(open(path))["files"] for path in (before, after))
    names = sorted(set(a) | set(b), key=lambda name: -b.get(name, 0.0))
    print(f"{'before':>7} {'after':>7}  file (CPU seconds)")
    for name in names[:rows]:
        print(f"{a.get(name, 0.0):7.2f} {b.get(name, 0.0):7.2f}  {name}")
    print(f"{sum(a.values()):7.1f} {sum(b.values()):7.1f}  all files")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1].startswith("-"):
        sys.exit("usage: python bench/pytest_cputime.py BEFORE.json AFTER.json (as a plugin: see the docstring)")
    compare(sys.argv[1], sys.argv[2])
