"""The fake SO-101 as fixtures: the real LeRobot stack down to the serial bytes
(`fakes/feetech.py`), video files as its cameras (`fakes/rigs.py`).

- `fake_rig`: a `LeRobotRig` on the fake arm, fast rest moves; disconnected afterwards.
Both step the moves to rest at `arm_bench.REST_FPS` (250 Hz, the shipped 50 Hz unchanged): what
these tests assert is what the bus was told, not the pace (see arm_bench.py).
- `hardware`: the files of a fake-arm campaign (two tiny ACT checkpoints, the rig profile, a
  two-mark protocol) and `plug_in()`, which plugs a new fake arm into the same port.
"""

from __future__ import annotations

import builtins
from pathlib import Path

import pytest
import yaml

from fakes import feetech
from fakes.rigs import CAMERAS, camera_rate_as_configured, write_rig, write_videos
from orchestrator.rigs.profile import load_rig
from support.act import make_act_checkpoint
from support.arm_bench import REST_FPS


@pytest.fixture
def fake_rig(tmp_path, monkeypatch):
    monkeypatch.setattr(builtins, "input", lambda *a: pytest.fail("input() called"))
    port = str(tmp_path / "ttyACM0")
    open(port, "w").close()
    arm = feetech.FakeFeetechArm(port, calibration=feetech.default_calibration())
    feetech.install(monkeypatch, arm)
    feetech.write_calibration_file(tmp_path / "cal", "lab_arm")
    rig_path = write_rig(tmp_path / "rig.yaml", port, tmp_path / "cal", write_videos(tmp_path))
    from orchestrator.rigs.so101.rig import LeRobotRig

    rig = LeRobotRig(load_rig(rig_path), rest_speed_deg_s=600.0, rest_fps=REST_FPS)
    yield rig
    rig.disconnect()


def write_protocol(directory: Path, policies: dict, fps: int = 10, duration_s: float = 1.0) -> Path:
    (directory / "layout.yaml").write_text(yaml.safe_dump({
        "name": "two", "marks": [{"id": "M01", "x": 0.16, "y": -0.05}, {"id": "M02", "x": 0.20, "y": 0.05}]}))
    path = directory / "protocol.yaml"
    path.write_text(yaml.safe_dump({
        "name": "fake-arm-ab", "task": "Pick up the cube", "layout": "layout.yaml", "policies": policies,
        "seed": 7, "episode": {"fps": fps, "duration_s": duration_s}}, sort_keys=False))
    return path


@pytest.fixture
def hardware(tmp_path, monkeypatch):
    """Two ACT checkpoints, a fake SO-101 with video cameras, fast rest moves, camera rates as configured."""
    from orchestrator.rigs.so101.rig import LeRobotRig

    monkeypatch.setattr(builtins, "input", lambda *a: pytest.fail("input() called"))
    monkeypatch.setitem(LeRobotRig.__init__.__kwdefaults__, "rest_speed_deg_s", 600.0)
    monkeypatch.setitem(LeRobotRig.__init__.__kwdefaults__, "rest_fps", REST_FPS)
    camera_rate_as_configured(monkeypatch)
    port = str(tmp_path / "ttyACM0")
    open(port, "w").close()
    arms = []

    def plug_in() -> feetech.FakeFeetechArm:
        arm = feetech.FakeFeetechArm(port, calibration=feetech.default_calibration())
        feetech.install(monkeypatch, arm)
        arms.append(arm)
        return arm

    plug_in()
    feetech.write_calibration_file(tmp_path / "cal", "lab_arm")
    videos = write_videos(tmp_path)
    rig = write_rig(tmp_path / "rig.yaml", port, tmp_path / "cal", videos, fps=30, max_relative_target=5.0)
    make_act_checkpoint(tmp_path / "act_a", CAMERAS, chunk_size=5, seed=1)
    make_act_checkpoint(tmp_path / "act_b", CAMERAS, chunk_size=5, seed=2)
    protocol = write_protocol(tmp_path, {"A": {"type": "lerobot", "path": "./act_a"},
                                         "B": {"type": "lerobot", "path": "./act_b"}})
    return tmp_path, protocol, rig, arms, plug_in
