"""A real arm through LeRobot: the robot and its cameras built from the rig profile.

`LeRobotRig(loaded_rig)` builds the robot with LeRobot's own config classes and factory (the configs:
`rigs/so101/config.py`): `RobotConfig.get_choice_class(profile.robot.type)` (so101_follower by default,
any registered LeRobot robot type or `lerobot_robot_*` plugin), filled with the profile's `port`, `id`,
`max_relative_target`, cameras and any other field of that config class written in the profile
(`disable_torque_on_disconnect`, `calibration_dir`, `use_degrees`, ...), then `make_robot_from_config`.
Cameras: `type: opencv` -> `OpenCVCameraConfig`, `type: video` -> the video-file camera
(`rigs/so101/videocam.py`), both through LeRobot's camera registry.

Safety on a real arm (docs/design.md section 12):
- `connect()` never lets LeRobot ask for calibration on stdin, and checks the motors' calibration on a
  bare bus connection (port opened, motors pinged and read, nothing written) before LeRobot's
  `connect(calibrate=False)` runs `configure()`, which enables torque: an arm holding another
  calibration is refused with torque never switched on.
- The rest pose is the profile's `rest_pose`, else the pose captured at connect (as lerobot-rollout's
  `initial_position`); `rest_pose_problems()` refuses a rest pose outside the calibrated range
  (doctor; `hardware_checks.profile_refusals` also one near a limit).
- `act()` clips every target to the calibrated range minus `RANGE_MARGIN` (`range_clipped:<joint>`
  events) and refuses a non-finite one as the policy's fault; LeRobot's `max_relative_target` then
  clips it to the present pose (`target_clipped:<joint>`).
- `observe()` reads the servos' alarms and torque every `CHECK_EVERY_STEPS` steps
  (`servo_alarms.check_servos`): an alarm or a servo reset aborts the trial with that cause.
- `go_to_rest(check)` and `move_along(path, fps, check)` (the cube reset's motions) are the one guarded
  motion (`rigs/guarded_motion.py`): goals bounded by the present pose, the stop key (`check`) before
  each step, the servos read every 5 steps, `RestBlocked` when a joint does not follow.
- `safe_stop()` holds the present position, or releases torque (`torque.torque_off`) when the profile
  says `on_stop: release`; it never moves the arm anywhere else and never raises.
- `disconnect()` turns torque off whenever the bus is connected, even when a camera is dead or a servo
  is in alarm (`torque.torque_off`: broadcast, per motor, read back; what is still on is kept in
  `torque_problems`), then releases the cameras. Joint reads use LeRobot's retries.
Faults mid-episode (serial bus, camera) surface as `faults.DeviceFault` with a one-line cause and what
to check. Imports LeRobot (and so torch) lazily: constructing the rig is the first import.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from orchestrator.core.errors import BadInput
from orchestrator.design.protocol import Cube, Mark
from orchestrator.rigs.base import Action, Check, EmergencyStop, EpisodeFacts, Observation, Rig, register_rig
from orchestrator.rigs.device_fault import DeviceFault, RestBlocked, one_line
from orchestrator.rigs.frame_age import frame_facts, stale_at_end
from orchestrator.rigs.guarded_motion import follow_path
from orchestrator.rigs.profile import LoadedRig, RigProfile
from orchestrator.rigs.so101.calibrated_range import action_limits, calibrated_range, rest_pose_ranges, within_range
from orchestrator.rigs.so101.clamp_log import quiet_clamp_warnings
from orchestrator.rigs.so101.config import build_robot_config, make_robot
from orchestrator.rigs.so101.connection import calibrated_on_bare_bus, retrying, silent_servos
from orchestrator.rigs.so101.hardware_checks import check_calibration, check_port, other_calibration, rig_checks
from orchestrator.rigs.so101.reply_lengths import check_reply_lengths
from orchestrator.rigs.so101.rest_move import move_to_rest, route
from orchestrator.rigs.so101.robot_faults import device_fault_of
from orchestrator.rigs.so101.servo_alarms import (
    CHECK_EVERY_STEPS,
    AlarmWatch,
    agreed_read,
    check_servos,
    drop_stale_replies,
    servo_alarms,
    torque_lost,
)
from orchestrator.rigs.so101.torque import close_robot, torque_enabled, torque_off

logger = logging.getLogger(__name__)

RANGE_MARGIN = 2.0       # degrees (gripper: 0-100 units) kept clear of each calibrated limit
STILL_SETTLE_S = 0.5     # > a USB camera's 50-150 ms exposure-to-array latency, and a hand leaving the view


@register_rig("lerobot")
class LeRobotRig(Rig):
    """A LeRobot robot (real arm) implementing the `Rig` interface. See the module docstring.

    `loaded` is a `LoadedRig` (relative video paths resolve from the profile's folder) or a
    bare `RigProfile`. `rest_speed_deg_s` / `rest_fps` pace `go_to_rest`, which then holds the
    rest target for up to `settle_s` until every joint is within `rest_tolerance_deg`.
    """

    realtime = True

    def __init__(self, loaded: LoadedRig | RigProfile, *, rest_speed_deg_s: float = 45.0,
                 rest_fps: int = 50, settle_s: float = 1.0, rest_tolerance_deg: float = 2.0):
        if isinstance(loaded, LoadedRig):
            self.loaded: LoadedRig | None = loaded
            self.profile = loaded.profile
            self.base_dir = loaded.path.parent.resolve()
            self.name = str(loaded.path)
        else:
            self.loaded = None
            self.profile = loaded
            self.base_dir = Path.cwd()
            self.name = "rig"
        if self.profile.simulated:
            raise BadInput(f"{self.name}: robot type sim_so101 is the simulated rig, not a LeRobot robot")
        self.camera_names: tuple[str, ...] = tuple(self.profile.cameras)
        self.rest_speed_deg_s = rest_speed_deg_s
        self.rest_fps = rest_fps
        self.settle_s = settle_s
        self.rest_tolerance_deg = rest_tolerance_deg
        self.config = build_robot_config(self.profile, self.base_dir)
        self._robot = None
        self._connected = False
        self._clipped: dict[str, int] = {}
        self._range_clipped: dict[str, int] = {}
        self._limits: dict[str, tuple[float, float]] = {}
        self._torque_problems: list[str] = []   # `torque_problems`
        self._steps = 0
        self.connect_pose: dict[str, float] = {}
        self._released = False
        self._alarms = AlarmWatch()   # servo alarms; a gripper trip while gripping is an event
        self.last_frames: dict[str, tuple[float, bool]] = {}   # camera -> (age ms, repeated): frame_age.py
        self._frame_stamps: dict[str, float] = {}

    # ------------------------------------------------------------ LeRobot objects
    @property
    def robot(self):
        """The LeRobot `Robot` (built on first use, not connected)."""
        if self._robot is None:
            self._robot = make_robot(self.config, self.profile, self.name)
            check_reply_lengths(self._robot)   # a read takes only an answer of its own length
        return self._robot

    @property
    def robot_type(self) -> str:
        """What LeRobot's rollout passes as `robot_type` to the policy (`robot.robot_type`)."""
        return self.robot.robot_type

    @property
    def observation_features(self) -> dict[str, Any]:
        return dict(self.robot.observation_features)

    @property
    def action_features(self) -> dict[str, Any]:
        return dict(self.robot.action_features)

    @property
    def calibration_path(self) -> Path:
        return Path(self.robot.calibration_fpath)

    @property
    def joint_units(self) -> str:
        return "degrees" if getattr(self.config, "use_degrees", True) else "-100..100"

    @property
    def torque_problems(self) -> list[str]:
        """What the last torque off read back still torqued (`torque.torque_off`)."""
        return list(self._torque_problems)

    @property
    def needs_calibration(self) -> bool:
        """Motor-bus robots (SO-10x, Koch, ...) need a calibration file before connecting."""
        return getattr(self.robot, "bus", None) is not None

    @property
    def port(self) -> str | None:
        return self.profile.robot.port

    def _arm_name(self) -> str:
        return f"arm {self.port}" if self.port else f"arm {self.profile.robot.type}"

    # ------------------------------------------------------------ Rig protocol
    def checks(self, camera_seconds: float | None = None) -> list[Check]:
        """The rig's own checks: port, calibration, cameras at fps (`rigs/so101/hardware_checks.py`)."""
        return rig_checks(self, camera_seconds)

    def preflight(self) -> list[str]:
        return [c.line for c in self.checks() if not c.ok]

    def camera_poses(self) -> dict[str, dict]:
        """Poses of the cameras whose profile entry gives one (judge zoom and guide)."""
        from orchestrator.rigs.profile import profile_camera_poses

        return profile_camera_poses(self.profile)

    def connect(self) -> None:
        if self._connected:
            return
        robot = self.robot
        # The cheap preflight checks first: a missing port or calibration file is bad input
        # (exit 2, with what to run), never a hang on LeRobot's calibration prompt.
        checks = [check_calibration(self)]
        if "port" in getattr(self.config, "__dataclass_fields__", {}):
            checks.insert(0, check_port(self.port))
        problems = [f"{self.name}: {c.line}" for c in checks if not c.ok]
        if problems:
            raise BadInput(problems)
        calibrated = self._retrying(self._calibrated_on_bare_bus)
        if calibrated is False:
            raise other_calibration(self)
        self._retrying(self._connect_robot)
        if calibrated is None:  # no motor bus to check beforehand: LeRobot's own check
            try:
                calibrated = robot.is_calibrated
            except Exception as exc:  # noqa: BLE001
                self._disconnect_quietly()
                raise self._fault(exc) from exc
            if not calibrated:
                self._disconnect_quietly()
                raise other_calibration(self)
        self._connected = True
        self._limits = self._action_limits()
        try:
            self.connect_pose = self._joint_positions()
        except Exception as exc:  # noqa: BLE001
            self.disconnect()
            raise self._fault(exc) from exc

    def _connect_robot(self) -> None:
        try:
            self.robot.connect(calibrate=False)
        except Exception as exc:  # noqa: BLE001 - classified into a DeviceFault
            self._disconnect_quietly()
            raise self._fault(exc) from exc

    def _retrying(self, step: Callable[[], Any]) -> Any:
        """`step()`, tried again when a status packet was lost (`connection.retrying`; servos that
        answer no ping of their own named even when this process stood still meanwhile)."""
        return retrying(step, self._arm_name(), silent=lambda: silent_servos(self.robot))

    def _calibrated_on_bare_bus(self) -> bool | None:
        """The motors' calibration against the file, on a bare bus (`connection.calibrated_on_bare_bus`);
        None when the robot has no motor bus."""
        try:
            return calibrated_on_bare_bus(self.robot)
        except Exception as exc:  # noqa: BLE001
            self._disconnect_quietly()
            raise self._fault(exc) from exc

    def prepare_layout(self, mark: Mark, cube: Cube, seed: int) -> None:
        """Nothing to do on hardware: the operator console asks the human to place the cube."""
        return None

    def camera_still(self, camera: str) -> Any:
        """A connected rig reads its own open camera, `STILL_SETTLE_S` after it is asked: frames
        already on their way show the table before the cube was placed. Otherwise the camera is
        opened alone (the base class)."""
        cameras = getattr(self.robot, "cameras", {}) if self.robot.is_connected else {}
        if camera not in cameras:
            return super().camera_still(camera)
        time.sleep(STILL_SETTLE_S)
        try:
            return cameras[camera].async_read(timeout_ms=3000)
        except Exception as exc:  # noqa: BLE001
            raise self._fault(exc) from exc

    def observe(self, with_images: bool = True) -> Observation:
        try:
            drop_stale_replies(self.robot)
            obs = self.robot.get_observation()
            self.last_frames = frame_facts(getattr(self.robot, "cameras", {}) or {}, time.perf_counter(),
                                           self._frame_stamps)
            self._observed = getattr(self, "_observed", 0) + 1
            if self._observed % CHECK_EVERY_STEPS == 0:
                self._alarms.check(self.robot, expect_torque=not self._released)
        except Exception as exc:  # noqa: BLE001
            raise self._fault(exc) from exc
        if not with_images:
            for name in self.camera_names:
                obs.pop(name, None)
        return obs

    @quiet_clamp_warnings()  # LeRobot's per-step warning: counted below as target_clipped events
    def act(self, action: Action) -> Action:
        """Send a target: each joint first clipped to its calibrated range minus `RANGE_MARGIN`
        (recorded as `range_clipped:<joint>`), then LeRobot's `max_relative_target`."""
        action = self._within_range(action)
        try:
            drop_stale_replies(self.robot)
            sent = self.robot.send_action(action)
        except Exception as exc:  # noqa: BLE001
            raise self._fault(exc) from exc
        self._steps += 1
        for key, value in sent.items():
            wanted = action.get(key)
            if wanted is not None and abs(float(wanted) - float(value)) > 1e-3:
                self._clipped[key] = self._clipped.get(key, 0) + 1
        return sent

    def _within_range(self, action: Action) -> Action:
        return within_range(action, self._limits, self._range_clipped)

    def end_episode(self) -> EpisodeFacts:
        """No physics on hardware; `max_relative_target` clipping is a safety event per joint
        (`target_clipped:<joint>`), and so is a target outside the calibrated range
        (`range_clipped:<joint>`), with the numbers of clipped steps in `extra`; so is the
        gripper's overload protection tripping while it grips (`servo_alarms.AlarmWatch`).
        A camera that sends fewer than two new frames in the half second after the loop
        (`frame_age.stale_at_end`) fails the episode as a frozen camera: its video would end on a still picture."""
        events = [f"target_clipped:{key.removesuffix('.pos')}" for key in self._clipped]
        events += [f"range_clipped:{key.removesuffix('.pos')}" for key in self._range_clipped]
        events += self._alarms.take_events()
        facts = EpisodeFacts(safety_events=events,
                             extra={"steps": self._steps, "clipped_steps": dict(self._clipped),
                                    "range_clipped_steps": dict(self._range_clipped),
                                    "max_relative_target": self.profile.robot.max_relative_target})
        self._clipped, self._range_clipped, self._steps = {}, {}, 0
        stale = stale_at_end(getattr(self.robot, "cameras", {}) or {})
        if stale is not None:
            name, age_ms = stale
            raise DeviceFault.camera(name, TimeoutError(f"latest frame is too old: {age_ms:.0f} ms"))
        return facts

    @property
    def rest_target(self) -> dict[str, float]:
        """The profile's `rest_pose`, else the pose captured at connect."""
        return dict(self.profile.rest_pose) or dict(self.connect_pose)

    def go_to_rest(self, check: Callable[[], None] | None = None) -> None:
        """To the rest pose (`rest_move.route`: off the table, the shoulder up, the arm, the gripper),
        guarded (`_guarded`); torque comes back first after a release: call it once confirmed."""
        rest = self.rest_target
        if rest and self._connected:
            read, write = self._joint_positions, self._write_goal

            def moves(guard: dict) -> None:
                for target in route(rest, read()):
                    move_to_rest(read, write, target, speed_deg_s=self.rest_speed_deg_s, **guard)

            self._guarded(check, "did not reach rest", moves)

    def move_along(self, path: Sequence[Action], path_fps: int, check: Callable[[], None] | None = None) -> None:
        """The arm along `path` (the cube reset's pick, carry and place), guarded as the move to
        rest is (`rigs/guarded_motion.py`, see `_guarded`)."""
        if path and self._connected:
            self._guarded(check, "stopped the motion", lambda guard: follow_path(
                self._joint_positions, self._write_goal, path, path_fps=path_fps, **guard))

    def _guarded(self, check: Callable[[], None] | None, outcome: str, moves: Callable[[dict], Any]) -> None:
        """`check()` (the stop key), torque back where the arm is after a release, then `moves(guard)`
        (`rigs/guarded_motion.py`: the servos read every 5 steps, `RestBlocked` with `outcome` when
        a joint does not follow, the arm held). A bus failure becomes a `DeviceFault`."""
        check = check or (lambda: None)
        guard = {"fps": self.rest_fps, "settle_s": self.settle_s, "tolerance_deg": self.rest_tolerance_deg,
                 "check": check, "watch": lambda: check_servos(self.robot),
                 "blocked": lambda joints: RestBlocked(self._arm_name(), joints, outcome)}
        try:
            check()
            if self._released:
                self._resume_torque()
            moves(guard)
        except (EmergencyStop, RestBlocked):
            raise  # the operator's stop key, or a joint held back: the caller holds the arm
        except Exception as exc:  # noqa: BLE001
            raise self._fault(exc) from exc

    def servo_problems(self) -> list[str]:
        """The servos' alarms, and their torque unless released, each as two settled reads agree
        (`servo_alarms.agreed_read`: a late reply taken for the answer is not reported as the
        servos' state); the hold watcher of `run/motion.py`; never raises."""
        if self._robot is None or not self._connected:
            return []
        try:
            lines = agreed_read(self.robot, servo_alarms)
            if not self._released and self.profile.on_stop != "release":
                lost = agreed_read(self.robot, torque_lost)
                lines += [f"{m}: torque off by itself (a reset or a brown-out)" for m in lost]
            return lines
        except Exception as exc:  # noqa: BLE001 - a read that fails is itself what to tell
            return [f"the servos do not answer ({one_line(exc)})"]

    def _write_goal(self, goal: dict[str, float]) -> None:
        """Goal_Position straight to the bus (the goal is already bounded by the present pose)."""
        bus = getattr(self.robot, "bus", None)
        if bus is None or not hasattr(bus, "sync_write"):
            self.robot.send_action(goal)
            return
        drop_stale_replies(self.robot)
        bus.sync_write("Goal_Position", {k.removesuffix(".pos"): v for k, v in goal.items()})

    def safe_stop(self) -> None:
        """Hold the present position (or release torque if the profile says `on_stop: release`);
        never moves the arm elsewhere, never raises (logs what failed). A release is a broadcast
        torque off with a read-back (`rigs/so101/torque.py`); servos still torqued are kept in
        `torque_problems` for the operator."""
        robot = self._robot
        if robot is None or not self._connected:
            return
        try:
            if self.profile.on_stop == "release" and getattr(robot, "bus", None) is not None:
                self._released = True
                self._torque_problems = torque_off(robot.bus, self._retries)
                return
            self._write_goal(self._joint_positions())
        except Exception as exc:  # noqa: BLE001
            logger.warning("safe_stop: cannot %s: %s", "release torque" if self.profile.on_stop == "release"
                           else "hold position", exc)

    @property
    def hand_guidable(self) -> bool:
        """A Feetech bus can drop torque on every servo (`release_torque`)."""
        return getattr(self._robot, "bus", None) is not None

    def release_torque(self) -> list[str]:
        """Broadcast torque off with a read-back (`rigs/so101/torque.py`), as `on_stop: release` does;
        the next `go_to_rest` restores torque where the arm is then (`_resume_torque`)."""
        robot = self._robot
        if robot is None or not self._connected or getattr(robot, "bus", None) is None:
            return []
        self._released = True
        try:
            self._torque_problems = torque_off(robot.bus, self._retries)
        except Exception as exc:  # noqa: BLE001 - the operator is told; the arm holds or is limp
            self._torque_problems = [f"torque off failed: {one_line(exc)}"]
        return list(self._torque_problems)

    def torque_enabled(self) -> dict[str, bool | None]:
        """Each servo's Torque_Enable now (`torque.torque_enabled`); {} when not connected."""
        bus = getattr(self._robot, "bus", None)
        return torque_enabled(bus, self._retries) if bus is not None and self._connected else {}

    def restore_torque(self) -> None:
        """After `release_torque`: goal := present, then torque on (nothing moves)."""
        try:
            self._resume_torque()
        except Exception as exc:  # noqa: BLE001
            raise self._fault(exc) from exc

    def disconnect(self) -> None:
        """Torque off (LeRobot's `disable_torque_on_disconnect`) whenever the bus is connected,
        even if a camera is not, then release the cameras; never raises."""
        if self._robot is None:
            return
        self._disconnect_quietly()
        self._connected = False

    def rest_pose_problems(self) -> list[str]:
        """The profile's rest pose against the calibrated range of each joint (LeRobot's own
        normalisation of the calibration file's range_min/range_max)."""
        return [f"rest_pose {key}: {value:g} is outside the calibrated range [{lo:.1f}, {hi:.1f}] "
                f"({self.calibration_path}); choose a pose inside it"
                for key, value, lo, hi in self.rest_pose_ranges() if not lo - 1e-6 <= value <= hi + 1e-6]

    def rest_pose_ranges(self) -> list[tuple[str, float, float, float]]:
        """(key, rest value, lo, hi) for each joint of the profile's rest pose that the bus has a
        calibration for: its calibrated range (`calibrated_range`), low end first."""
        return rest_pose_ranges(getattr(self.robot, "bus", None), dict(self.profile.rest_pose))

    def _action_limits(self) -> dict[str, tuple[float, float]]:
        """`<joint>.pos: (lo, hi)`: the calibrated range minus `RANGE_MARGIN` on each side."""
        return action_limits(getattr(self.robot, "bus", None), RANGE_MARGIN)

    def calibrated_range(self, motor: str) -> tuple[float, float]:
        """(range_min, range_max) of `motor` in LeRobot's units (degrees, gripper 0-100)."""
        return calibrated_range(self.robot.bus, motor)

    # ------------------------------------------------------------ helpers
    def _joint_positions(self) -> dict[str, float]:
        """Present joint positions, from the motor bus directly when there is one (a frozen
        camera must not stop the arm from going to rest)."""
        robot = self.robot
        bus = getattr(robot, "bus", None)
        if bus is not None and hasattr(bus, "sync_read"):
            drop_stale_replies(robot)
            values = bus.sync_read("Present_Position", num_retry=self._retries)
            return {f"{m}.pos": float(v) for m, v in values.items()}
        obs = robot.get_observation()
        return {k: float(v) for k, v in obs.items() if k.endswith(".pos")}

    @property
    def _retries(self) -> int:
        """LeRobot's read retries for this robot (`num_read_retries`; Feetech packets get
        corrupted when several joints move)."""
        return int(getattr(self.config, "num_read_retries", 2) or 0)

    def _resume_torque(self) -> None:
        """After `on_stop: release`: goal := present position first, then torque on, so the arm
        does not jump to the last goal it was sent."""
        # Through `_joint_positions` and `_write_goal`: each first drops a late reply left in the
        # serial buffer (servo_alarms.drop_stale_replies). A bare sync_read here once took such a
        # reply for the positions on a loaded machine, and the goal it wrote was far from the arm.
        self._write_goal(self._joint_positions())
        self.robot.bus.enable_torque(num_retry=self._retries)
        self._released = False

    def _disconnect_quietly(self) -> None:
        if self._robot is not None:
            self._torque_problems = close_robot(
                self._robot, getattr(self.config, "disable_torque_on_disconnect", True), max(self._retries, 2))

    def _fault(self, exc: BaseException) -> DeviceFault:
        return device_fault_of(exc, self._arm_name(), self._robot)
