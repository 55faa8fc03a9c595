"""`run` and `doctor` (the verbs that import LeRobot and torch on an arm) have Python freeze its
objects as the process exits (`orchestrator/core/exit_freeze.py`), so that the last garbage
collections do not walk them: 0.75 s of CPU a process (docs/benchmarks.md). Fresh processes, each
refusing a file that is not there (exit 2): the freeze is registered before anything is read, so
a refusal exits frozen as a campaign does. Control: `report` leaves its objects to the
collections (the count is 0 where nothing froze them)."""

from __future__ import annotations

import subprocess
import sys

import pytest

AT_EXIT = """
import atexit, gc, sys
atexit.register(lambda: print("frozen", gc.get_freeze_count(), flush=True))   # runs after the verb's handlers
from orchestrator.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("argv, frozen", [(["run", "missing.yaml", "--rig", "missing_rig.yaml"], True),
                                          (["doctor", "--rig", "missing_rig.yaml"], True),
                                          (["report", "missing-campaign"], False)])
def test_run_and_doctor_freeze_their_objects_as_they_exit(tmp_path, argv, frozen):
    out = subprocess.run([sys.executable, "-c", AT_EXIT, *argv], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 2, out.stderr[-2000:]
    assert "missing" in out.stderr and "Traceback" not in out.stderr   # the refusal, one line
    count = int(out.stdout.split("frozen ")[1])
    assert (count > 0) is frozen, out.stdout
