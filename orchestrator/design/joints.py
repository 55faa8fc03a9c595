"""The SO-101's joints, the one list of them: the motor names and the keys of the arm's
observations and actions, in the order every recorded time series keeps its columns."""

from __future__ import annotations

JOINTS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
"""SO-101 motor names; observation/action keys are `<joint>.pos` (degrees, gripper 0-100)."""
STATE_KEYS = tuple(f"{j}.pos" for j in JOINTS)
