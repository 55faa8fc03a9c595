"""The simulated rig's profile (hardware/sim.yaml) with a rest pose of the test's choosing."""

from __future__ import annotations

from orchestrator.rigs.profile import load_rig
from support.repo import REPO

# A rest pose clear of the table (the folded arm with the wrist straight).
CLEAR_REST = {"shoulder_pan.pos": 0, "shoulder_lift.pos": -100, "elbow_flex.pos": 90,
              "wrist_flex.pos": 0, "wrist_roll.pos": 0, "gripper.pos": 0}


def sim_profile(rest=CLEAR_REST):
    profile = load_rig(REPO / "hardware" / "sim.yaml").profile
    return profile.model_copy(update={"rest_pose": dict(rest)})
