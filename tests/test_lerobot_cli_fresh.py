"""LeRobot policies from the command line, in fresh processes.

A tiny random-init ACT checkpoint is saved by one Python process; `orchestrator run` and
`orchestrator doctor` then load it in other processes. A checkpoint built in the test's own
interpreter would hide a missing import: building it registers LeRobot's `act` config type,
which a fresh `orchestrator` process must do on its own before reading `config.json`.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from support.campaign_files import two_mark_protocol
from support.cli import run_main, run_module
from support.repo import REPO

SIM_RIG = REPO / "hardware" / "sim.yaml"


@pytest.fixture(scope="module")
def act_protocol(tmp_path_factory, saved_acts) -> Path:
    folder = tmp_path_factory.mktemp("fresh_act")
    shutil.copytree(saved_acts["sim"], folder / "act_b")   # saved by another interpreter (conftest)
    return two_mark_protocol(folder, "{type: lerobot, path: ./act_b}")


def _env() -> dict[str, str]:
    return {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl"), "HF_HUB_OFFLINE": "1"}


def test_run_loads_a_checkpoint_saved_by_another_process(act_protocol, tmp_path, capsys):
    """`run` in a fresh process loads the checkpoint; its report read in this process (`report`
    from a fresh process is tests/test_start_check_run.py's, among others)."""
    out = tmp_path / "campaign"
    result = run_module("run", act_protocol, "--rig", SIM_RIG, "--out", out, "--workers", "1",
                        env=_env(), timeout=600)
    assert result.code == 0, result.err
    assert "not registered" not in result.err
    assert "4/4 trials done, 0 aborted" in result.out, result.out + result.err
    report = run_main(capsys, "report", out, "--format", "json")
    assert report.code == 0, report.err
    data = json.loads(report.out)
    assert data["campaign"]["complete"] is True and data["campaign"]["aborted"] == 0
    assert data["policies"]["B"]["trials"] == 2


def test_doctor_loads_a_checkpoint_saved_by_another_process(act_protocol):
    result = run_module("doctor", "--rig", SIM_RIG, "--protocol", act_protocol, env=_env(), timeout=300)
    assert result.code == 0, result.err
    assert "policy B: ./act_b loads (act on cpu, cameras front, wrist, 6 actions)" in result.out
