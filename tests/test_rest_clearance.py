"""The cube the twin tests place is clear of the arm at rest, however far the arm has sagged.

The twin powers up with the arm at the profile's rest pose and torque off, so the arm sags under
gravity until LeRobot's connect switches the torque on: a few degrees at the elbow and the wrist
within a second. How far it has sagged by then depends on how fast the twin's physics ran, that
is on the machine's load. A cube placed where the gripper is at some point of that sag starts the
episode inside the gripper and MuJoCo throws it out: the held-grasp test's mark (0.16, 0) was
4 mm inside the gripper at the rest pose and 8 mm at the pose the arm held in the failing run
(its wire log: elbow 3088 ticks at torque-on, 3116 in every passing run); the cube was pushed
1.7 cm and turned 16 degrees, the jaws landed on it and it slipped at the lift: no squeeze, no
overload trip. Simulated time only (the twin's servos and MuJoCo, stepped here)."""

from __future__ import annotations

import numpy as np
import yaml

from orchestrator.design.protocol import Cube, Mark
from support.campaign_files import SHIPPED_TWIN_RIG, TWIN_GRASP_MARK_XY

TWIN_GRASP_MARK = Mark(id="M01", x=TWIN_GRASP_MARK_XY[0], y=TWIN_GRASP_MARK_XY[1])
SAG_S = 1.5        # the arm's whole sag from the rest pose, torque off (it settles within ~1 s)
SAMPLE_S = 0.05


def cube_contacts(sim, pose: np.ndarray, mark: Mark) -> list[float]:
    """Depths (mm, negative: inside) of the contacts between the cube on `mark` and the arm at
    `pose` (rig units), the arm put there at rest."""
    import mujoco

    sim.place_cube(mark, Cube())
    sim._set_arm(pose)
    m, d = sim._model, sim._data
    mujoco.mj_forward(m, d)
    names = [(m.body(m.geom_bodyid[c.geom1]).name, m.body(m.geom_bodyid[c.geom2]).name) for c in d.contact[:d.ncon]]
    return [float(c.dist) * 1000 for c, pair in zip(d.contact[:d.ncon], names, strict=True)
            if "cube" in pair and not {"table", "world"} & set(pair)]


def sagging_poses() -> list[np.ndarray]:
    """The arm's poses (rig units) from the shipped twin profile's rest pose, torque off, every
    `SAMPLE_S` of the twin's physics for `SAG_S` (the twin's own servo model, `TwinArm`)."""
    from orchestrator.rigs.profile import RigProfile
    from orchestrator.rigs.sim import SimRig
    from orchestrator.rigs.twin.arm import TwinArm

    rest = yaml.safe_load(SHIPPED_TWIN_RIG.read_text())["rest_pose"]
    sim = SimRig(RigProfile.model_validate({"robot": {"type": "sim_so101"}, "cameras": {}, "rest_pose": rest}), fps=30)
    sim.place_cube(Mark(id="away", x=0.75, y=0.60), Cube())
    sim.go_to_rest()
    arm = TwinArm(sim)
    poses = [np.array(sim.joint_positions(), dtype=float)]
    for _ in range(int(round(SAG_S / SAMPLE_S))):
        for _ in range(int(round(SAMPLE_S / arm.dt))):
            arm.step()
        poses.append(np.array(sim.joint_positions(), dtype=float))
    return poses


def test_the_held_grasp_tests_cube_is_clear_of_the_arm_all_through_its_sag():
    from orchestrator.rigs.profile import RigProfile
    from orchestrator.rigs.sim import SimRig

    poses = sagging_poses()
    sagged = max(abs(poses[-1] - poses[0]))
    assert sagged > 3.0, (poses[0], poses[-1])        # the arm did sag (degrees): the poses differ
    sim = SimRig(RigProfile.model_validate({"robot": {"type": "sim_so101"}, "cameras": {}}), fps=30)
    inside = [(i * SAMPLE_S, min(depths)) for i, pose in enumerate(poses)
              if (depths := cube_contacts(sim, pose, TWIN_GRASP_MARK))]
    assert len(poses) == int(round(SAG_S / SAMPLE_S)) + 1
    assert inside == [], inside
    # positive control: the contact test sees the old mark inside the gripper at the rest pose
    old = cube_contacts(sim, poses[0], Mark(id="M01", x=0.16, y=0.0))
    assert old and min(old) < -1.0, old
