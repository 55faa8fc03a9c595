"""Campaigns on the rehearsal twin, through the CLI in fresh processes.

A tiny ACT checkpoint saved by another process is policy B, the scripted pick is A; the real
LeRobot stack (SOFollower, FeetechMotorsBus, scservo_sdk, the `twin` camera type) drives the
twin's simulated SO-101 over a pseudo-terminal; `--unattended` lets the twin place the cube.
"""

from __future__ import annotations

import json
import shutil

import pytest

from support.campaign_files import SHIPPED_TWIN_RIG, env, twin_rig, two_mark_protocol
from support.cli import run_module


@pytest.fixture(scope="module")
def twin_protocol(tmp_path_factory, saved_acts):
    folder = tmp_path_factory.mktemp("twin_act")
    shutil.copytree(saved_acts["twin"], folder / "act_b")   # saved by another interpreter (conftest)
    twin_rig(folder)
    protocol = two_mark_protocol(folder, "{type: lerobot, path: ./act_b}", duration_s=8, fps=30)
    # one mark (M01, 7.5 cm right of centre: a wrong pan sign or scale misses it), so two trials
    # of 8 s: the scripted pick needs ~7 s to lift and hold through the real stack
    layout = folder / "layout2.yaml"
    layout.write_text("\n".join(l for l in layout.read_text().splitlines() if "id: M02" not in l) + "\n")
    return protocol


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_unattended_twin_campaign_scripted_vs_saved_act(twin_protocol, tmp_path):
    out = tmp_path / "campaign"
    result = run_module("run", twin_protocol, "--rig", twin_protocol.parent / "so101_twin.yaml", "--twin", "--unattended", "--out", out,
                        env=env(), timeout=900)
    assert result.code == 0, result.err[-3000:]
    assert "2/2 trials done, 0 aborted" in result.out, result.out + result.err[-3000:]
    report = run_module("report", out, "--format", "json", env=env())
    assert report.code == 0, report.err
    data = json.loads(report.out)
    assert data["campaign"]["complete"] is True and data["campaign"]["trials"] == 2
    assert data["campaign"]["simulated"] is True
    episodes = data["labels"]["episodes"] if "episodes" in data.get("labels", {}) else None
    assert {p: data["policies"][p]["trials"] for p in ("A", "B")} == {"A": 1, "B": 1}
    assert data["policies"]["A"]["unjudged"] == 0 and data["policies"]["B"]["unjudged"] == 0
    # the scripted pick succeeds through calibration, degrees and the bus; the random ACT does not
    assert data["policies"]["A"]["successes"] == 1, data["policies"]
    assert data["policies"]["B"]["successes"] == 0, data["policies"]
    del episodes
    # every step recorded each camera frame's age and repeats; the report summarises them per policy
    for label in ("A", "B"):
        loop = data["timing"][label]
        assert 0 <= loop["frame_age_p50_ms"] <= loop["frame_age_p95_ms"] < 500, loop
        assert 0 <= loop["frame_repeat_fraction"] < 1, loop
    text = run_module("report", out, env=env())
    assert "camera frame age p50" in text.out, text.out
    # judging works unchanged: a blinded bundle of the twin campaign
    bundle = run_module("bundle", out, "--out", tmp_path / "bundle", env=env())
    assert bundle.code == 0, bundle.err
    assert "2 episodes, 4 videos" in bundle.out


def test_doctor_on_the_twin_with_the_same_protocol(twin_protocol):
    result = run_module("doctor", "--rig", twin_protocol.parent / "so101_twin.yaml", "--twin", "--protocol", twin_protocol, env=env(), timeout=300)
    assert result.code == 0, result.err[-3000:]
    assert "policy B: ./act_b loads (act on cpu, cameras front, wrist, 6 actions)" in result.out
    assert "calibration" in result.out and "ready:" in result.out
    assert "cameras front, wrist" in result.out


@pytest.mark.off_clock
def test_unattended_needs_the_twin(twin_protocol, tmp_path):
    result = run_module("run", twin_protocol, "--rig", SHIPPED_TWIN_RIG, "--unattended", "--out", tmp_path / "c",
                        env=env())
    assert result.code == 2
    assert result.err.strip().splitlines()[-1].startswith("orchestrator: --unattended is only for --twin")
    assert not (tmp_path / "c").exists()
