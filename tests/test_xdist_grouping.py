"""The CI command's scheduling: under `pytest -n 2 --dist loadgroup` the real-time tests run on
one worker, one after another (tests/support/lanes.py, `REALTIME_GROUP` and `XdistGroupIds`).

A nested pytest runs the group's sample (tests/test_xdist_sample.py, in the group by name, tests of
milliseconds) and one pure file on two workers and its `-v` lines are read: every real-time test reports the group suffix and the same worker, and a test of a
real-time file marked `off_clock` carries none. The positive control
runs the same with the `XdistGroupIds` plugin blocked (`-p no:xdist-group-ids`): no test carries
the suffix, which is what pytest 9.2 with pytest-xdist 3.8 did before the plugin."""

from __future__ import annotations

import re
import subprocess
import sys

from support.repo import REPO

OFF_CLOCK = "tests/test_rtc.py::test_rtc_settings_for_a_sync_policy_are_refused_at_validate"
SAMPLE = "tests/test_xdist_sample.py"
FILES = (SAMPLE, "tests/test_validate.py", OFF_CLOCK)
LINE = re.compile(r"^\[(gw\d+)\] \[\s*\d+%\] PASSED (\S+)")


def _scheduled(*extra: str, workers: int = 2) -> list[tuple[str, str]]:
    """(worker, node id) of each test the nested run on `workers` workers passed."""
    command = [sys.executable, "-m", "pytest", "-n", str(workers), "--dist", "loadgroup", "-v", "-p",
               "no:cacheprovider", *extra, *FILES]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return [(m.group(1), m.group(2)) for m in map(LINE.match, done.stdout.splitlines()) if m]


def test_the_real_time_tests_run_on_one_worker_under_loadgroup():
    ran = _scheduled()
    realtime = [(worker, node) for worker, node in ran if node.startswith(SAMPLE)]
    pure = [(worker, node) for worker, node in ran if node.startswith("tests/test_validate.py")]
    assert len(realtime) >= 5 and len(pure) >= 20
    assert all(node.endswith("@realtime") for _, node in realtime)
    assert len({worker for worker, _ in realtime}) == 1
    assert not any("@" in node for _, node in pure)
    assert [node for _, node in ran if node.startswith(OFF_CLOCK)] == [OFF_CLOCK]
    # both workers did work: the group took one, the pure tests were not all queued behind it
    assert {worker for worker, _ in ran} == {"gw0", "gw1"}


def test_without_the_plugin_no_test_carries_the_group():
    """One worker is enough here (each collects the files, test_rtc.py's LeRobot imports
    included): pytest-xdist appends the suffix on the worker whatever their number."""
    ran = _scheduled("-p", "no:xdist-group-ids", workers=1)
    assert len(ran) >= 25
    assert not any(node.endswith("@realtime") for _, node in ran)
