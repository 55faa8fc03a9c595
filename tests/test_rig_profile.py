"""Rig profiles (`hardware/*.yaml`): the shipped ones load; bad ones give located errors."""

from __future__ import annotations

import pytest

from orchestrator.core.errors import BadInput
from orchestrator.rigs.profile import STATE_KEYS, load_rig, parse_rig_text
from support.repo import LOCATED, REPO, line_of

EXAMPLE = (REPO / "hardware" / "so101.example.yaml").read_text()


def test_sim_profile_loads():
    rig = load_rig(REPO / "hardware" / "sim.yaml")
    assert rig.profile.simulated and rig.profile.robot.type == "sim_so101"
    assert set(rig.profile.cameras) == {"front", "wrist"}
    assert all(c.fps > 0 and c.width > 0 and c.height > 0 for c in rig.profile.cameras.values())
    assert set(rig.profile.rest_pose) == set(STATE_KEYS)
    assert len(rig.sha256) == 64
    assert parse_rig_text(rig.text) == rig.profile


def test_so101_example_loads_with_lerobot_field_names():
    rig = load_rig(REPO / "hardware" / "so101.example.yaml")
    robot = rig.profile.robot
    assert not rig.profile.simulated
    assert (robot.type, robot.port, robot.id, robot.max_relative_target) == \
        ("so101_follower", "/dev/ttyACM0", "lab_arm", 3.0)
    front = rig.profile.cameras["front"]
    assert (front.type, front.index_or_path, front.width, front.height, front.fps) == ("opencv", 0, 640, 480, 30)
    # the same camera names and feature keys in simulation and on the arm
    assert set(rig.profile.cameras) == set(load_rig(REPO / "hardware" / "sim.yaml").profile.cameras)


def _edit(old: str, new: str) -> str:
    assert old in EXAMPLE, old
    return EXAMPLE.replace(old, new, 1)


CASES = {
    "unknown-top-key": (_edit("cameras:", "camera:"), "camera:", "did you mean 'cameras'"),
    "camera-no-width": (_edit("width: 640, ", ""), "front:", "missing required key 'cameras.front.width'"),
    "camera-fps-zero": (_edit("fps: 30}", "fps: 0}"), "front:", "cameras.front.fps"),
    "camera-height-string": (_edit("height: 480", "height: tall"), "front:", "cameras.front.height"),
    "unknown-joint": (_edit("elbow_flex.pos: 90", "elbow.pos: 90"), "rest_pose:", "unknown joint 'elbow.pos'"),
    "joint-not-a-number": (_edit("wrist_roll.pos: 0", "wrist_roll.pos: left"), "rest_pose:", "rest_pose.wrist_roll.pos"),
    "robot-without-type": (_edit("type: so101_follower, ", ""), "robot:", "missing required key 'robot.type'"),
    "robot-not-a-mapping": (_edit("robot: {type: so101_follower, port: /dev/ttyACM0, id: lab_arm, max_relative_target: 3.0, "
                                  "num_read_retries: 5}",
                                  "robot: so101_follower"), "robot:", "robot"),
    "cameras-list": (_edit("cameras:\n", "cameras: [front]\nold_cameras:\n"), "cameras:", "cameras"),
    "syntax": (_edit("rest_pose: {", "rest_pose: {{"), None, "YAML syntax error"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_rig_profiles_are_located(tmp_path, case):
    text, needle, message = CASES[case]
    path = tmp_path / "rig.yaml"
    path.write_text(text)
    with pytest.raises(BadInput) as info:
        load_rig(path)
    lines = info.value.problems
    assert lines and all(LOCATED.match(line) for line in lines), lines
    hits = [line for line in lines if message in line]
    assert hits, lines
    if needle:
        assert int(LOCATED.match(hits[0])["line"]) == line_of(text, needle), hits


@pytest.mark.parametrize("content, message", [
    (b"", "empty"), (b"- robot\n", "mapping"), (b"\xff\xfe", "not UTF-8"), (None, "not found")])
def test_unusable_rig_files(tmp_path, content, message):
    path = tmp_path / "rig.yaml"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(BadInput, match=message) as info:
        load_rig(path)
    assert LOCATED.match(info.value.problems[0])
