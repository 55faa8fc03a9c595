"""SO-101 kinematics from the MuJoCo model of the arm alone (no table, no cube, no sim state).

Used by the scripted policy for inverse kinematics, so a scripted pick needs only the layout
coordinates and the arm's geometry: the same code drives a real arm as a rig check.

Rig units (LeRobot's SO-101 follower, docs/design.md section 2): `<joint>.pos` in degrees for the five
arm joints (MuJoCo radians -> degrees, same zero), and the gripper as 0-100 mapped linearly
onto the gripper joint's range (0 = range low = closed, 100 = range high = wide open).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from orchestrator.sim.scene import ARM_JOINTS, arm_spec, mujoco

ARM5 = ARM_JOINTS[:5]
FAR_BODIES = ("lower_arm", "wrist", "gripper", "moving_jaw_so101_v1")   # what can touch the table
_CORNERS = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=float)


@dataclass(frozen=True)
class JointUnits:
    """Conversion between MuJoCo joint radians and rig units (degrees; gripper 0-100)."""

    ranges_rad: tuple[tuple[float, float], ...]   # per joint in ARM_JOINTS order

    @property
    def limits_rig(self) -> tuple[tuple[float, float], ...]:
        """Joint limits in rig units (the gripper's are 0 and 100)."""
        out = [(math.degrees(lo), math.degrees(hi)) for lo, hi in self.ranges_rad[:5]]
        return (*out, (0.0, 100.0))

    def to_rig(self, q: np.ndarray) -> np.ndarray:
        q = np.asarray(q, dtype=float)
        out = np.degrees(q[:6]).copy()
        lo, hi = self.ranges_rad[5]
        out[5] = (q[5] - lo) / (hi - lo) * 100.0
        return out

    def from_rig(self, v: np.ndarray) -> np.ndarray:
        v = np.asarray(v, dtype=float)
        out = np.radians(v[:6]).copy()
        lo, hi = self.ranges_rad[5]
        out[5] = lo + v[5] / 100.0 * (hi - lo)
        return out

    def gripper_pct(self, q_rad: float) -> float:
        lo, hi = self.ranges_rad[5]
        return (q_rad - lo) / (hi - lo) * 100.0


def joint_units_of(model: mujoco.MjModel) -> JointUnits:
    return JointUnits(tuple((float(model.joint(j).range[0]), float(model.joint(j).range[1]))
                            for j in ARM_JOINTS))


def _strip_visuals(spec: mujoco.MjSpec) -> None:
    """Drop render-only geoms and meshes (kinematics does not need them; compiles faster)."""
    used = set()
    for geom in list(spec.geoms):
        if geom.contype == 0 and geom.conaffinity == 0 and geom.type == mujoco.mjtGeom.mjGEOM_MESH:
            spec.delete(geom)
    for geom in spec.geoms:
        if geom.type == mujoco.mjtGeom.mjGEOM_MESH:
            used.add(geom.meshname)
    for mesh in list(spec.meshes):
        if mesh.name not in used:
            spec.delete(mesh)


class ArmKinematics:
    """Forward and inverse kinematics of the `grasp` site (where a grasped cube's centre sits).

    `ik(pos, jaw_yaw)` puts the grasp site at `pos` (layout frame, metres) with the gripper
    pointing straight down and its jaw-closing axis at `jaw_yaw` (radians, about world z).
    """

    def __init__(self) -> None:
        spec = arm_spec(mesh_cell_mm=None)
        _strip_visuals(spec)
        self.model = spec.compile()
        self.data = mujoco.MjData(self.model)
        self.units = joint_units_of(self.model)
        self.site = self.model.site("grasp").id
        self.qadr = np.array([self.model.joint(j).qposadr[0] for j in ARM_JOINTS])
        self.dadr = np.array([self.model.joint(j).dofadr[0] for j in ARM5])
        self.lo = np.array([r[0] for r in self.units.ranges_rad[:5]])
        self.hi = np.array([r[1] for r in self.units.ranges_rad[:5]])
        tip = self.model.geom("fixed_jaw_sph_tip1")
        site_pos = self.model.site_pos[self.site]
        self._tip_from_site = np.asarray(tip.pos, dtype=float) - site_pos
        self._tip_radius = float(tip.size[0])
        # Height of the grasp site above the fixed jaw's lowest point when pointing down.
        self.site_above_tip = self.tip_drop(self.grasp_rotation(0.0))
        far = {self.model.body(name).id for name in FAR_BODIES}
        self._far_geoms = [g for g in range(self.model.ngeom) if self.model.geom_bodyid[g] in far]

    def jaw_opening(self, gripper_rad: float) -> tuple[float, float]:
        """(centre, gap) of the jaws' opening along the gripper's x axis, in metres, in the
        `gripper` body frame, measured between the inner faces of the two jaw tips."""
        q = np.zeros(6)
        q[5] = gripper_rad
        self.fk(q)
        g = self.model.body("gripper").id
        rot = self.data.xmat[g].reshape(3, 3)
        origin = self.data.xpos[g]
        xs = []
        for name in ("fixed_jaw_sph_tip1", "moving_jaw_sph_tip1"):
            gid = self.model.geom(name).id
            xs.append(float((rot.T @ (self.data.geom_xpos[gid] - origin))[0]))
        fixed_inner, moving_inner = xs[0] + self._tip_radius, xs[1] - self._tip_radius
        return (fixed_inner + moving_inner) / 2.0, moving_inner - fixed_inner

    def jaw_opening_pct(self, pct: float) -> tuple[float, float]:
        """`jaw_opening` for a gripper opening in rig units (0-100)."""
        return self.jaw_opening(self.units.from_rig(np.array([0, 0, 0, 0, 0, pct]))[5])

    def tip_drop(self, rotation: np.ndarray) -> float:
        """How far the fixed jaw's tip reaches below the grasp site for a gripper rotation."""
        return float(-(np.asarray(rotation) @ self._tip_from_site)[2] + self._tip_radius)

    def fk(self, q6: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Grasp-site position and rotation matrix for joint radians (ARM_JOINTS order)."""
        self.data.qpos[self.qadr] = q6
        mujoco.mj_kinematics(self.model, self.data)
        mujoco.mj_comPos(self.model, self.data)   # mj_jacSite needs cdof/subtree com
        return self.data.site_xpos[self.site].copy(), self.data.site_xmat[self.site].reshape(3, 3).copy()

    def lowest_point_m(self, q6: np.ndarray) -> float:
        """Height above the table (the plane the base stands on, z = 0) of the lowest point of
        the arm beyond the shoulder (forearm, wrist, gripper, moving jaw) for joint radians
        `q6`: mesh geoms by their vertices, the others by the corners of their bounding boxes
        (a bound from below)."""
        self.fk(q6)
        low = math.inf
        for g in self._far_geoms:
            rot, origin = self.data.geom_xmat[g].reshape(3, 3), self.data.geom_xpos[g]
            if self.model.geom_type[g] == mujoco.mjtGeom.mjGEOM_MESH:
                mesh = self.model.geom_dataid[g]
                start = self.model.mesh_vertadr[mesh]
                points = self.model.mesh_vert[start:start + self.model.mesh_vertnum[mesh]]
            else:
                centre, half = self.model.geom_aabb[g][:3], self.model.geom_aabb[g][3:]
                points = centre + half * _CORNERS
            low = min(low, float((points @ rot.T)[:, 2].min() + origin[2]))
        return low

    def lifted(self, q6: np.ndarray, metres: float) -> tuple[np.ndarray, float]:
        """Joint radians (6) with the grasp site `metres` straight above where `q6` puts it, the
        gripper's orientation and opening kept (`ik` warm-started at `q6`); and the position
        error of that solution (m)."""
        position, rotation = self.fk(q6)
        q5, _ = self.ik(position + np.array([0.0, 0.0, metres]), rotation, np.asarray(q6)[:5], gripper=q6[5])
        return np.append(q5, q6[5]), self.last_position_error

    @staticmethod
    def grasp_rotation(jaw_yaw: float, tilt: float = 0.0, radial: float = 0.0) -> np.ndarray:
        """Gripper-frame rotation for a pick: tips down, tilted by `tilt` (rad) outward along
        the horizontal direction `radial` (rad), jaw-closing axis (local x) as close to the
        horizontal direction `jaw_yaw` as the tilt allows (projected on the plane normal to
        the approach). A 5-joint arm reaches every such orientation (pitch in the arm plane +
        roll about the gripper axis)."""
        r = np.array([math.cos(radial), math.sin(radial), 0.0])
        approach = math.sin(tilt) * r - math.cos(tilt) * np.array([0.0, 0.0, 1.0])
        j = np.array([math.cos(jaw_yaw), math.sin(jaw_yaw), 0.0])
        x = j - (j @ approach) * approach
        x /= np.linalg.norm(x)
        z = -approach
        y = np.cross(z, x)
        return np.stack([x, y, z], axis=1)

    def down_rotation(self, jaw_yaw: float) -> np.ndarray:
        return self.grasp_rotation(jaw_yaw)

    def _errors(self, q: np.ndarray, target_p: np.ndarray, target_r: np.ndarray):
        p, r = self.fk(q)
        quat = np.zeros(4)
        mujoco.mju_mat2Quat(quat, (target_r @ r.T).reshape(-1))
        er = np.zeros(3)
        mujoco.mju_quat2Vel(er, quat, 1.0)
        return target_p - p, er

    def ik(self, pos, rotation: np.ndarray, q0: np.ndarray | None = None, *, gripper: float = 0.0,
           iters: int = 200, tol: float = 1e-7, weight: float = 0.02) -> tuple[np.ndarray, float]:
        """Damped least squares on position + orientation; returns (q5 radians, error).

        `rotation` is the target gripper-frame rotation matrix (see `grasp_rotation`);
        orientation counts `weight` metres per radian, so when the exact orientation is out of
        reach (5 joints) position wins. The returned error combines both; the parts of the
        final pose are in `last_position_error` (m) and `last_rotation_error` (rad). Joint
        limits are enforced.
        """
        target_p = np.asarray(pos, dtype=float)
        target_r = np.asarray(rotation, dtype=float)
        if q0 is None:   # elbow bent, wrist down, facing the target (pan is positive to the right)
            q0 = np.array([-math.atan2(target_p[1], target_p[0]), 0.0, 0.5, 1.2, 0.0])
        q = np.array(q0, dtype=float)
        if len(q) == 5:
            q = np.append(q, gripper)
        q[5] = gripper
        jacp = np.zeros((3, self.model.nv))
        jacr = np.zeros((3, self.model.nv))
        w = weight
        err_norm = float("inf")
        stalls = 0
        for _ in range(iters):
            ep, er = self._errors(q, target_p, target_r)
            err = np.concatenate([ep, w * er])
            previous, err_norm = err_norm, float(np.linalg.norm(err))
            if err_norm < tol:
                break
            # Converged to a compromise or stuck against a joint limit: stop early.
            stalls = stalls + 1 if err_norm > 0.995 * previous else 0
            if stalls >= 8:
                break
            mujoco.mj_jacSite(self.model, self.data, jacp, jacr, self.site)
            jac = np.vstack([jacp[:, self.dadr], w * jacr[:, self.dadr]])
            lam = 1e-6 + 1e-2 * err_norm * err_norm
            dq = jac.T @ np.linalg.solve(jac @ jac.T + lam * np.eye(6), err)
            q[:5] = np.clip(q[:5] + dq, self.lo, self.hi)
        ep, er = self._errors(q, target_p, target_r)
        self.last_position_error = float(np.linalg.norm(ep))
        self.last_rotation_error = float(np.linalg.norm(er))
        return q[:5].copy(), float(np.linalg.norm(np.concatenate([ep, w * er])))


@functools.lru_cache(maxsize=1)
def arm_kinematics() -> ArmKinematics:
    """One kinematics model per process (compiling it takes ~0.3 s)."""
    return ArmKinematics()
