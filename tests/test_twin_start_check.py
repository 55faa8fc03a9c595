"""The start-state check on the twin through LeRobot's stack (`run --twin --unattended`, in this
process: LeRobot is imported once, the twin is its own process; `run --twin` in a fresh process
is test_twin_campaign.py's): a cube the twin's simulated hand puts 10 mm off its mark is refused
before the trial starts (no torque on, no episode), the still shows the mark and the cube; with
the hand on the mark the trial runs. Both runs borrow one twin process (tests/support/shared_twin.py:
the hand's placement error is the orchestrator's, the twin the same for both)."""

from __future__ import annotations

import sqlite3

import cv2
import pytest

from orchestrator.design.protocol import load_protocol
from orchestrator.rigs.profile import load_rig
from orchestrator.rigs.twin.client import start_twin
from support.campaign_files import SHIPPED_TWIN_RIG, two_mark_protocol
from support.shared_twin import lend


def _files(tmp_path, placement: str | None):
    protocol = two_mark_protocol(tmp_path, "{type: scripted, aim_noise_mm: 12}", duration_s=2.0, fps=15)
    protocol.write_text(protocol.read_text() + "start_check: {mode: enforce}\n")
    rig = tmp_path / f"twin_{placement is not None}.yaml"
    text = SHIPPED_TWIN_RIG.read_text().replace("width: 320, height: 240, fps: 30", "width: 320, height: 240, fps: 15")
    rig.write_text(text + (f"placement: {placement}\n" if placement else ""))
    return protocol, rig


@pytest.mark.timeout(600)
def test_a_cube_10_mm_off_on_the_twin_is_refused_before_the_trial_and_on_its_mark_it_runs(tmp_path, cli):
    protocol, off = _files(tmp_path, "{offset_mm: [10, 0]}")
    _, on = _files(tmp_path, None)
    with start_twin(load_rig(on), load_protocol(protocol)) as twin, lend(twin) as loans:
        _refused_then_run(tmp_path, protocol, off, on, cli)
    assert len(loans) == 2   # both runs borrowed it


def _refused_then_run(tmp_path, protocol, off, on, cli) -> None:
    out = tmp_path / "refused"
    done = cli("run", protocol, "--rig", off, "--twin", "--unattended", "--out", out)
    assert done.code == 1, (done.out[-2000:], done.err[-2000:])
    assert "START CHECK FAILED at M0" in done.out + done.err
    assert done.err.strip().splitlines()[-1].startswith("orchestrator: start check failed 3 times at M0")
    with sqlite3.connect(out / "campaign.db") as db:
        assert db.execute("SELECT count(*) FROM attempts").fetchone()[0] == 0   # no episode began
    stills = sorted((out / "start_checks").glob("*.png"))
    assert len(stills) == 3
    still = cv2.imread(str(stills[0]))
    green = (still[:, :, 1] > 180) & (still[:, :, 0] < 60) & (still[:, :, 2] < 60)
    red = (still[:, :, 2] > 200) & (still[:, :, 1] < 40) & (still[:, :, 0] < 40)
    assert green.sum() > 10 and red.sum() > 10   # the mark's outline and the measured cube's
    ran = cli("run", protocol, "--rig", on, "--twin", "--unattended", "--out", tmp_path / "ran", "--stop-after", "1")
    assert ran.code == 0, ran.err[-2000:]
    assert "1/4 trials done" in ran.out, ran.out
