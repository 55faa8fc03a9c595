"""The fake-bytes arm bench of the arm-safety tests: a fake SO-101 on LeRobot's real stack
(`fakes/feetech.py`), video cameras, its rig profile, and a two-mark protocol with scripted
policies (tests/test_arm_safety.py, tests/test_operator_flow.py)."""

from __future__ import annotations

import builtins

import pytest
import yaml

from fakes.rigs import camera_rate_as_configured, plug_in_arm, write_rig, write_videos

FPS = 30
# The moves to rest (and the cube reset's) step at this rate here instead of the shipped 50 Hz: the
# fake servos follow a goal at 20000 ticks/s (1760 deg/s), and what these tests assert is what the
# bus was told and in which order, not the pace; each move still runs the whole guarded loop (the
# stop key every step, the servos' Status and torque every `CHECK_EVERY_STEPS` steps and at least
# every `CHECK_EVERY_S`, a joint blocked after `FOLLOW_S` of wall-clock time).
REST_FPS = 250


def arm_bench(tmp_path, monkeypatch, protocol_extra: dict | None = None):
    """(folder, fake arm, rig profile path, protocol path); LeRobot never asks on stdin.
    `protocol_extra`: top-level protocol keys to add (an `aborts:` rule, say)."""
    from orchestrator.rigs.so101.rig import LeRobotRig

    monkeypatch.setattr(builtins, "input", lambda *a: pytest.fail("input() called"))
    monkeypatch.setitem(LeRobotRig.__init__.__kwdefaults__, "rest_speed_deg_s", 600.0)
    monkeypatch.setitem(LeRobotRig.__init__.__kwdefaults__, "rest_fps", REST_FPS)
    camera_rate_as_configured(monkeypatch)
    arm, port, cal = plug_in_arm(tmp_path, monkeypatch)
    rig = write_rig(tmp_path / "rig.yaml", port, cal, write_videos(tmp_path), fps=FPS, max_relative_target=5.0)
    (tmp_path / "layout.yaml").write_text(yaml.safe_dump({
        "name": "two", "marks": [{"id": "M01", "x": 0.16, "y": -0.05}, {"id": "M02", "x": 0.20, "y": 0.05}]}))
    protocol = tmp_path / "protocol.yaml"
    protocol.write_text(yaml.safe_dump({
        "name": "safety", "task": "Pick up the cube", "layout": "layout.yaml", "seed": 3,
        "policies": {"A": {"type": "scripted"}, "B": {"type": "scripted", "aim_noise_mm": 5}},
        "episode": {"fps": 10, "duration_s": 0.5}, **(protocol_extra or {})}, sort_keys=False))
    return tmp_path, arm, rig, protocol


def rig_with(rig_path, **changes):
    """The profile at `rig_path` with top-level keys changed (written next to it)."""
    data = yaml.safe_load(rig_path.read_text())
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    out = rig_path.with_name(f"rig_{len(changes)}_{abs(hash(str(changes))) % 10**6}.yaml")
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    return out
