"""The simulated SO-101 rig (MuJoCo, Menagerie `robotstudio_so101`), `robot.type: sim_so101`.

Implements `rigs.base.Rig` with LeRobot's SO-101 follower units: observation and action keys
`shoulder_pan.pos` ... `gripper.pos`, degrees for the arm joints, 0-100 for the gripper (mapped
linearly onto the gripper joint's range), plus one HxWx3 uint8 RGB image per camera of the
profile (`front`, `wrist`).

Timing. `realtime` is False: each `act` sets the position targets and advances the physics by
exactly one control period, 1/fps of the protocol. The physics step is chosen so that a period
is a whole number of steps (fps 30 -> 7 steps of 1/210 s). Give the rig the protocol's fps and
success test either at construction (`SimRig(profile, fps=30, success=Success(...))`) or later
with `configure(fps, success)`; `rigs.factory.make_rig(rig, protocol)` does it for you.

Rendering happens only in `observe(with_images=True)`, so the runner decides the video rate
(the cameras' fps in the profile); one `mujoco.Renderer` per camera resolution is created on
first use and kept for the rig's life. Visual cost knobs (never physics) come from the
profile's `robot:` mapping, e.g. `robot: {type: sim_so101, mesh_cell_mm: 4, key_light: false}`
(see `render_settings`).

What an episode records (`end_episode()` -> `EpisodeFacts`) is watched every physics step by
`sim_monitor.EpisodeMonitor`: the physical success test, the maximum lift of the cube's bottom,
the time of success, and safety events: `table_collision` (a robot geom pressing on the table
with more than `sim_monitor.TABLE_FORCE_N`) and `joint_limit:<joint>` (an action target outside
the joint range, clipped before it was sent).

Process pools: construct the rig inside the worker (`SimRig(profile, ...)` holds only plain
data until `connect()`); a rig also pickles (the MuJoCo objects are dropped and rebuilt lazily).
"""

from __future__ import annotations

import atexit
import math
from typing import Any

import numpy as np

from orchestrator.design.joints import JOINTS
from orchestrator.design.protocol import Cube, LoadedProtocol, Mark, Success
from orchestrator.rigs.base import Action, EpisodeFacts, Observation, Rig, register_rig
from orchestrator.rigs.placement import SimulatedHand
from orchestrator.rigs.profile import STATE_KEYS, LoadedRig, RigProfile
from orchestrator.rigs.sim_monitor import EpisodeMonitor

# A target outside the joint range by more than this (rig units) is a joint-limit event.
JOINT_LIMIT_TOL = 0.01
# A rest pose whose collision geometry goes deeper into the table than this is refused by
# preflight (a folded SO-101 resting its gripper on the table reaches ~6 mm with the model's
# boxy collision geometry, and is accepted: the physics lifts it out without moving the cube).
REST_DEPTH_LIMIT_M = 0.015
# Settling time after placing the cube and the arm, before the episode's time zero.
SETTLE_S = 0.2
# Nominal MuJoCo step of the Menagerie model; the rig uses the largest step <= this that
# divides the control period.
NOMINAL_TIMESTEP = 0.005
# Rest pose used for joints the profile does not list (rig units).
DEFAULT_REST = {"shoulder_pan.pos": 0.0, "shoulder_lift.pos": -100.0, "elbow_flex.pos": 90.0,
                "wrist_flex.pos": 0.0, "wrist_roll.pos": 0.0, "gripper.pos": 0.0}


def substeps_for(fps: int, nominal: float = NOMINAL_TIMESTEP) -> tuple[int, float]:
    """(physics steps per control period, physics timestep) for a control rate."""
    period = 1.0 / fps
    n = max(1, math.ceil(period / nominal - 1e-9))
    return n, period / n


@register_rig("sim")
class SimRig(Rig):
    """Simulated SO-101 with a table, a cube and cameras (see the module docstring)."""

    @classmethod
    def from_profile(cls, rig: LoadedRig | RigProfile, protocol: LoadedProtocol | None = None,
                     **options: Any) -> SimRig:
        profile = rig.profile if isinstance(rig, LoadedRig) else rig
        kwargs: dict[str, Any] = {}
        if protocol is not None:
            kwargs = {"fps": protocol.protocol.episode.fps, "success": protocol.protocol.success}
        return cls(profile, **kwargs, **options)

    realtime = False

    def __init__(self, profile: RigProfile, *, fps: int = 30, success: Success | None = None,
                 render: Any = None) -> None:
        self.profile = profile
        self.camera_names: tuple[str, ...] = tuple(profile.cameras)
        self.fps = int(fps)
        self.success = success or Success()
        self._render_settings = render   # orchestrator.sim.scene.RenderSettings or None
        self._seed: int | None = None
        self._mark: Mark | None = None
        self.hand = SimulatedHand(profile.placement)   # where a placed cube lands (rigs/placement.py)
        self._reset_runtime()

    # ------------------------------------------------------------ plumbing

    def _reset_runtime(self) -> None:
        # MuJoCo's model and data (mujoco ships no type stubs: Any), None until `_build`
        self._model: Any = None
        self._data: Any = None
        self._renderers: dict[tuple[int, int], Any] = {}
        self._cube: Cube | None = None
        self._connected = False

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        for key in ("_model", "_data", "_renderers", "_watch", "_ids", "_mj", "_atexit"):
            state.pop(key, None)
        state["_connected"] = False
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._model = None
        self._data = None
        self._renderers = {}
        self._cube = None

    def configure(self, fps: int, success: Success | None = None) -> None:
        """Set the control rate (Hz) and the success test of the protocol about to run."""
        if int(fps) != self.fps:
            self.fps = int(fps)
            self._close_renderers()
            self._cube = None   # rebuild with the new physics step on next prepare_layout
            self._model = None
        if success is not None:
            self.success = success

    def render_settings(self):
        """The constructor's render settings, else the profile's `robot:` extras
        (`sim.scene.RenderSettings.from_extras`)."""
        from orchestrator.sim.scene import RenderSettings

        return self._render_settings or RenderSettings.from_extras(self.profile.robot.model_extra or {})

    def _build(self, cube: Cube) -> None:
        from orchestrator.sim.kinematics import joint_units_of
        from orchestrator.sim.scene import ARM_JOINTS, build_scene, mujoco, scene_ids

        self._close_renderers()
        n, dt = substeps_for(self.fps)
        sizes = [(c.width, c.height) for c in self.profile.cameras.values()]
        off = (max([640] + [w for w, _ in sizes]), max([480] + [h for _, h in sizes]))
        model = build_scene(cube.size_m, cube.mass_kg, render=self.render_settings(), timestep=dt,
                            offscreen_size=off)
        data = mujoco.MjData(model)
        self._mj = mujoco
        self._model, self._data, self._cube = model, data, cube
        self._substeps = n
        self.units = joint_units_of(model)
        lim = self.units.limits_rig
        # Action limits: the joint range intersected with the actuator's control range.
        lo, hi = [], []
        for j, name in enumerate(ARM_JOINTS):
            a = model.actuator(name)
            clo, chi = self.units.to_rig(np.full(6, a.ctrlrange[0]))[j], self.units.to_rig(np.full(6, a.ctrlrange[1]))[j]
            lo.append(max(lim[j][0], clo))
            hi.append(min(lim[j][1], chi))
        self._lo, self._hi = np.array(lo), np.array(hi)
        self._ids = scene_ids(model)
        self._target: np.ndarray = np.zeros(6)
        self._new_record()

    def _new_record(self) -> None:
        """A new episode's record (`sim_monitor.EpisodeMonitor`), from this step on."""
        assert self._cube is not None
        self._watch = EpisodeMonitor(self._mj, self._model, self._ids, self._cube.size_m, self.success)

    def _close_renderers(self) -> None:
        for r in self._renderers.values():
            try:
                r.close()
            except Exception:
                pass
        self._renderers = {}

    def _require(self) -> None:
        if self._model is None:
            self._build(self._cube or Cube())

    # ------------------------------------------------------------ Rig protocol

    def connect(self) -> None:
        self._require()
        self._connected = True

    def preflight(self) -> list[str]:
        from orchestrator.sim.scene import KNOWN_CAMERAS

        problems = [f"camera {name!r}: the simulated SO-101 has cameras {', '.join(KNOWN_CAMERAS)}"
                    for name in self.camera_names if name not in KNOWN_CAMERAS]
        problems += [f"rest_pose: unknown joint {key!r}" for key in self.profile.rest_pose if key not in STATE_KEYS]
        try:
            self._require()
            depth = self.rest_pose_table_depth()
            if depth > REST_DEPTH_LIMIT_M:
                problems.append(f"rest_pose puts the arm {depth * 1000:.0f} mm into the table in "
                                "simulation: check shoulder_lift/elbow_flex/wrist_flex (a folded arm "
                                "is shoulder_lift.pos -100, elbow_flex.pos 90-97)")
        except Exception as exc:  # a broken install must stop the campaign, not crash it
            problems.append(f"simulation could not start: {type(exc).__name__}: {exc}")
        return problems

    def rest_pose_rig(self) -> np.ndarray:
        """The profile's rest pose in rig units (profile values, defaults for missing joints)."""
        values = {**DEFAULT_REST, **self.profile.rest_pose}
        return np.array([float(values[k]) for k in STATE_KEYS])

    def _set_arm(self, rig_values: np.ndarray) -> None:
        self._require()
        clipped = np.clip(rig_values, self._lo, self._hi)
        q = self.units.from_rig(clipped)
        d = self._data
        d.qpos[self._ids["qpos"]] = q
        d.qvel[self._ids["qvel"]] = 0.0
        d.ctrl[self._ids["act"]] = q
        self._target = clipped.copy()

    def rest_pose_table_depth(self) -> float:
        """How deep (m) the robot's collision geoms go into the table at the rest pose."""
        from orchestrator.sim.scene import robot_table_depth

        self._require()
        saved = self._data.qpos.copy()
        self._set_arm(self.rest_pose_rig())
        depth = robot_table_depth(self._model, self._data, self._ids)
        self._data.qpos[:] = saved
        self._mj.mj_forward(self._model, self._data)
        return depth

    def go_to_rest(self, check=None) -> None:
        """Simulation: put the arm at the rest pose at once (targets too), velocities zero. A cube
        the gripper held is left in the air by that jump: it falls to the table (`SETTLE_S` of
        physics), where the next trial's reset finds it."""
        self._set_arm(self.rest_pose_rig())
        m, d = self._model, self._data
        self._mj.mj_forward(m, d)
        if self._cube is not None and d.qpos[self._ids["cube_qpos"] + 2] > self._cube.size_m / 2 + 0.001:
            for _ in range(int(round(SETTLE_S / m.opt.timestep))):
                self._mj.mj_step(m, d)

    def prepare_layout(self, mark: Mark, cube: Cube, seed: int) -> None:
        """Reset the world, put the arm at rest and the cube on `mark`, settle, time zero.

        The cube rests flat where the simulated hand puts it (`placement`: on the mark, or off it
        by the profile's placement error), centre at (x, y) and its yaw. Physics
        is deterministic, so `seed` is not needed; it is kept for the episode's facts.
        """
        from orchestrator.sim.scene import yaw_quat

        if self._model is None or self._cube != cube:
            self._build(cube)
        m, d, mj = self._model, self._data, self._mj
        mj.mj_resetData(m, d)
        self._set_arm(self.rest_pose_rig())
        adr = self._ids["cube_qpos"]
        landed = self.hand.place(mark)
        d.qpos[adr:adr + 3] = [landed.x, landed.y, cube.size_m / 2.0]
        d.qpos[adr + 3:adr + 7] = yaw_quat(landed.yaw_deg)
        mj.mj_forward(m, d)
        for _ in range(int(round(SETTLE_S / m.opt.timestep))):
            mj.mj_step(m, d)
        d.time = 0.0
        self._mark, self._seed = mark, seed
        self._new_record()

    # ------------------------------------------------------------ the wire-level twin's hooks

    @property
    def model(self):
        self._require()
        return self._model

    @property
    def data(self):
        self._require()
        return self._data

    def step_physics(self, steps: int = 1) -> None:
        """Advance `steps` physics steps with the present actuator targets (`data.ctrl`),
        feeding the success test and the table-collision watch (the twin drives the actuators
        itself, as its servos' firmware)."""
        for _ in range(steps):
            self._mj.mj_step(self._model, self._data)
            self._watch.step(self._data)

    def place_cube(self, mark: Mark, cube: Cube) -> None:
        """Put the cube on `mark` at rest, leaving the arm where it is, and start a new episode's
        success test and events (the twin's `prepare_layout`: a hand placing the cube)."""
        from orchestrator.sim.scene import yaw_quat

        if self._model is None or self._cube != cube:
            self._build(cube)
            self.go_to_rest()
        d = self._data
        adr, vadr = self._ids["cube_qpos"], self._model.joint("cube").dofadr[0]
        d.qpos[adr:adr + 3] = [mark.x, mark.y, cube.size_m / 2.0]
        d.qpos[adr + 3:adr + 7] = yaw_quat(mark.yaw_deg)
        d.qvel[vadr:vadr + 6] = 0.0
        self._mj.mj_forward(self._model, d)
        self._mark = mark
        self.restart_episode_clock()

    def start_here(self, mark: Mark, seed: int) -> None:
        """The autonomous reset placed the cube: the world stays, the episode's clock restarts."""
        self._require()
        self._mark, self._seed = mark, seed
        self.restart_episode_clock()

    def restart_episode_clock(self) -> None:
        """Time zero of an episode: simulation time 0, a fresh success test and event log."""
        self._data.time = 0.0
        self._new_record()

    def cube_pose(self) -> tuple[float, float, float, float]:
        """Measured cube pose: centre x, y, z (m) and yaw (degrees)."""
        from orchestrator.sim.scene import quat_yaw_deg

        self._require()
        adr = self._ids["cube_qpos"]
        q = self._data.qpos
        return float(q[adr]), float(q[adr + 1]), float(q[adr + 2]), quat_yaw_deg(q[adr + 3:adr + 7])

    def joint_positions(self) -> np.ndarray:
        """Current joint positions in rig units, STATE_KEYS order."""
        return self.units.to_rig(self._data.qpos[self._ids["qpos"]])

    def observe(self, with_images: bool | tuple[str, ...] | list[str] = True) -> Observation:
        """Joint positions (rig units) and, when asked, one RGB frame per camera.

        `with_images` is True (every camera), False (none), or a collection of camera names
        (only those: a recorder with cameras at different fps renders only what is due).
        """
        self._require()
        obs: Observation = {k: float(v) for k, v in zip(STATE_KEYS, self.joint_positions(), strict=True)}
        if with_images is True:
            names = self.camera_names
        elif not with_images:
            names = ()
        else:
            names = tuple(n for n in self.camera_names if n in set(with_images))
        for name in names:
            obs[name] = self.render(name)
        return obs

    def camera_poses(self) -> dict[str, dict]:
        """Pose of each fixed camera (`judging.overlay.posed_camera`'s record): the front camera's
        look-at placement from `sim.scene`, at the profile's resolution. The wrist camera
        moves with the gripper and has none."""
        from orchestrator.rigs.profile import profile_camera_poses
        from orchestrator.sim.front_camera import front_camera_pose

        spec = self.profile.cameras.get("front")
        if spec is None:
            return profile_camera_poses(self.profile)
        return {**profile_camera_poses(self.profile), "front": front_camera_pose(spec.width, spec.height)}

    places_the_cube = True   # the simulated hand (`rigs/placement.py`)
    posed_by_a_scripted_hand = True   # `camera calibrate-wrist`'s views (`sim/calibration_poses.py`)

    def pose_by_hand(self, joints) -> None:
        """The arm put at `joints` (the five arm joints, rig units) at once, the gripper closed,
        velocities zero, the cube left where it is."""
        values = self.joint_positions()
        values[:5] = np.asarray(joints, float)[:5]
        values[5] = 0.0
        self._set_arm(values)
        self._mj.mj_forward(self._model, self._data)

    def camera_still(self, camera: str) -> np.ndarray:
        from orchestrator.rigs.frames import no_such_camera

        no_such_camera(self, camera)
        return self.render(camera)

    def render(self, camera: str) -> np.ndarray:
        """One HxWx3 uint8 RGB frame of `camera` at the profile's resolution."""
        spec = self.profile.cameras[camera]
        key = (spec.width, spec.height)
        renderer = self._renderers.get(key)
        if renderer is None:
            renderer = self._mj.Renderer(self._model, height=spec.height, width=spec.width)
            self._renderers[key] = renderer
            if not getattr(self, "_atexit", False):
                # Free GL contexts before mujoco's own exit handler terminates EGL (registered
                # when the first context is made, so ours, registered after, runs first).
                atexit.register(self._close_renderers)
                self._atexit = True
        renderer.update_scene(self._data, camera=camera)
        return renderer.render()

    def act(self, action: Action) -> Action:
        self._require()
        target = self._target.copy()
        for i, key in enumerate(STATE_KEYS):
            if key in action:
                value = float(action[key])
                if not math.isfinite(value):
                    raise ValueError(f"action {key} is not a finite number: {value}")
                target[i] = value
        clipped = np.clip(target, self._lo, self._hi)
        over = np.abs(clipped - target) > JOINT_LIMIT_TOL
        for i in np.flatnonzero(over):
            self._watch.count(f"joint_limit:{JOINTS[i]}")
        self._target = clipped
        self._data.ctrl[self._ids["act"]] = self.units.from_rig(clipped)
        for _ in range(self._substeps):
            self._mj.mj_step(self._model, self._data)
            self._watch.step(self._data)
        self._watch.control_steps += 1
        return {k: float(v) for k, v in zip(STATE_KEYS, clipped, strict=True)}

    def end_episode(self) -> EpisodeFacts:
        self._require()
        x, y, z, yaw = self.cube_pose()
        return self._watch.facts(self._data, self._substeps, {
            "cube_final": {"x": x, "y": y, "z": z, "yaw_deg": yaw},
            "mark": self._mark.id if self._mark else None,
            "seed": self._seed,
        })

    def safe_stop(self) -> None:
        """Hold the current position (targets = present positions). Never raises."""
        try:
            if self._data is not None:
                q = self._data.qpos[self._ids["qpos"]]
                self._data.ctrl[self._ids["act"]] = q
                self._target = self.units.to_rig(q)
        except Exception:
            pass

    def disconnect(self) -> None:
        self._close_renderers()
        self._connected = False
