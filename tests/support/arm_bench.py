"""The fake-bytes arm bench shared by the arm tests: a fake SO-101 (LeRobot's SOFollower,
FeetechMotorsBus and scservo_sdk above `fakes/feetech.py`), its rig profile with video cameras,
and a two-mark protocol with scripted policies A and B."""

from __future__ import annotations

import builtins
from pathlib import Path

import pytest
import yaml

from fakes.rigs import camera_rate_as_configured, plug_in_arm, write_rig, write_videos


def arm_bench(tmp_path: Path, monkeypatch, fps: int, protocol_extra: dict | None = None):
    """(tmp_path, arm, rig profile path, protocol path); `protocol_extra` adds top-level keys."""
    from orchestrator.rigs.so101.rig import LeRobotRig

    monkeypatch.setattr(builtins, "input", lambda *a: pytest.fail("input() called"))
    monkeypatch.setitem(LeRobotRig.__init__.__kwdefaults__, "rest_speed_deg_s", 600.0)
    camera_rate_as_configured(monkeypatch)
    arm, port, cal = plug_in_arm(tmp_path, monkeypatch)
    rig = write_rig(tmp_path / "rig.yaml", port, cal, write_videos(tmp_path), fps=fps, max_relative_target=5.0)
    (tmp_path / "layout.yaml").write_text(yaml.safe_dump({
        "name": "two", "marks": [{"id": "M01", "x": 0.16, "y": -0.05}, {"id": "M02", "x": 0.20, "y": 0.05}]}))
    protocol = tmp_path / "protocol.yaml"
    protocol.write_text(yaml.safe_dump({
        "name": "safety", "task": "Pick up the cube", "layout": "layout.yaml", "seed": 3,
        "policies": {"A": {"type": "scripted"}, "B": {"type": "scripted", "aim_noise_mm": 5}},
        "episode": {"fps": 10, "duration_s": 0.5}, **(protocol_extra or {})}, sort_keys=False))
    return tmp_path, arm, rig, protocol
