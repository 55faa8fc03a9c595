"""The Rig interface shared by the simulated SO-101 and real arms through LeRobot, and the
registry of rig kinds.

Units are LeRobot's (docs/design.md section 2): joint positions in degrees keyed `<joint>.pos`
(`shoulder_pan.pos` ... `gripper.pos`; the gripper 0-100), one HxWx3 uint8 RGB image per
camera keyed by the camera's name. A policy sees the same names in simulation and on the arm.

Rig kinds are registered by name, as LeRobot registers its robots and cameras
(`@register_rig("sim")`); `rigs.factory.make_rig` picks the kind a profile needs. LeRobot's own
registry then picks the robot class of a real arm (`robot.type`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from orchestrator.core.registry import Registry
from orchestrator.design.protocol import Cube, Mark
from orchestrator.rigs.profile import LoadedRig, RigProfile, profile_observation_features

if TYPE_CHECKING:
    from orchestrator.design.protocol import LoadedProtocol

Observation = dict[str, Any]   # "<joint>.pos": float, "<camera>": np.ndarray (H, W, 3) uint8
Action = dict[str, float]      # "<joint>.pos": float target position


class EmergencyStop(Exception):
    """The operator hit the emergency stop (a rig checks for it between bus transactions); `reason` is recorded."""

    def __init__(self, reason: str = "emergency stop by operator", cause: str | None = None):
        super().__init__(reason)
        self.reason = reason
        # what the operator chose at the prompt: unsafe (motion), misplaced (cube), other / None
        self.cause = cause


@dataclass
class EpisodeFacts:
    """What the rig itself knows about an episode when it ends.

    `physics_success` is the physical success test (simulation only; None on hardware).
    `safety_events` are short strings such as "table_collision" or "joint_limit:elbow_flex".
    """

    physics_success: bool | None = None
    max_lift_m: float | None = None
    time_to_success_s: float | None = None
    safety_events: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    ladder: dict[str, float | None] | None = None   # physics' progress ladder (`sim.success`), simulation only
    longest_hold_s: float | None = None   # physics' longest hold (`sim.success.LiftHoldTracker`), simulation only


@dataclass(frozen=True)
class Check:
    """One preflight check: `name` (what), `ok`, `detail` (the measurement, or the problem)."""

    name: str
    ok: bool
    detail: str

    @property
    def line(self) -> str:
        return f"{self.name}: {self.detail}"


class Rig(ABC):
    """An arm with cameras on which episodes run.

    `realtime` is True for hardware (the runner paces steps with the wall clock) and False for
    simulation (each `act` advances simulated time by one control period).

    Besides the abstract methods, the runner and the policies use the members below, each with a
    default that is right for a rig without servos, calibration or LeRobot robot (the simulation).
    A default never stands for "checked and fine" where a rig can check: a rig with servos
    overrides `torque_problems` and `servo_problems` (tests/test_rig_interface.py holds each
    registered kind to that).
    """

    realtime: bool
    camera_names: tuple[str, ...]
    profile: RigProfile        # the rig profile the rig was built from
    kind: str = ""             # set by `register_rig`

    # camera -> (age of the frame the last `observe` returned, in ms; whether it repeats the one
    # before): the recorder's frame-age columns. Empty: the rig measures no frame ages.
    last_frames: Mapping[str, tuple[float, bool]] = MappingProxyType({})

    @classmethod
    def from_profile(cls, rig: LoadedRig | RigProfile, protocol: LoadedProtocol | None = None,
                     **options: Any) -> Rig:
        """Build the rig for a loaded rig profile (`protocol`: the LoadedProtocol, or None)."""
        return cls(rig, **options)  # type: ignore[call-arg]  # a concrete rig's constructor takes the profile

    @abstractmethod
    def connect(self) -> None: ...

    @abstractmethod
    def preflight(self) -> list[str]:
        """Problems that must stop the campaign before the first trial (empty = ready)."""

    @abstractmethod
    def go_to_rest(self, check: Callable[[], None] | None = None) -> None:
        """Move to the rest pose; `check()` is called before each step and raises to stop."""

    def move_along(self, path: Sequence[Action], path_fps: int, check: Callable[[], None] | None = None) -> None:
        """The arm along `path` (one target per period of `path_fps`: the cube reset's motions),
        guarded (`rigs/guarded_motion.py`): each goal the present position plus at most
        `MAX_LEAD_DEG` toward the path, `check()` (the stop key) before every step, the servos
        (`servo_problems`) read every `CHECK_EVERY_STEPS` steps from the first, `RestBlocked`
        when a joint does not follow. The default drives `observe` and `act`; on a rig that is
        not `realtime` each `act` is one period of its time (`StepClock`)."""
        from orchestrator.rigs.device_fault import DeviceFault, RestBlocked
        from orchestrator.rigs.guarded_motion import StepClock, follow_path

        def read() -> dict[str, float]:
            return {k: float(v) for k, v in self.observe(with_images=False).items() if k.endswith(".pos")}

        def watch() -> None:
            problems = self.servo_problems()
            if problems:
                raise DeviceFault("arm", self.kind or "arm", "; ".join(problems), "the servos named: support the arm")

        clock = None if self.realtime else StepClock(path_fps)
        follow_path(read, clock.stepping(self.act) if clock else self.act, path, path_fps=path_fps, fps=path_fps,
                    settle_s=1.0, tolerance_deg=2.0, check=check or (lambda: None), watch=watch,
                    blocked=lambda joints: RestBlocked(self.kind or "arm", joints, "stopped the motion"), clock=clock)

    @abstractmethod
    def prepare_layout(self, mark: Mark, cube: Cube, seed: int) -> None:
        """Put the cube on `mark` (simulation) or ask the operator to (hardware)."""

    @abstractmethod
    def observe(self, with_images: bool = True) -> Observation: ...

    @abstractmethod
    def act(self, action: Action) -> Action:
        """Send a joint-position target; return the action actually sent (after clipping)."""

    @abstractmethod
    def end_episode(self) -> EpisodeFacts: ...

    @abstractmethod
    def safe_stop(self) -> None:
        """Hold the arm where it is (or release torque if the profile says so); never moves it
        elsewhere. Must not raise."""

    @abstractmethod
    def disconnect(self) -> None: ...

    @property
    def hand_guidable(self) -> bool:
        """Guiding the arm by hand: the way out of a move to rest that the world blocks (the arm
        lies on the table or the cube after a sag). A rig with servos that can go limp says so."""
        return False

    def release_torque(self) -> list[str]:
        """Torque off on every joint, so the operator can move the arm by hand; the next
        `go_to_rest` first restores torque where the arm then is (goal := present position,
        then torque on) and moves from there. Returns the servos still torqued (empty = all
        limp). Only for a `hand_guidable` rig; must not raise."""
        return []

    def restore_torque(self) -> None:
        """After `release_torque`: goal := present position, then torque on, so the arm holds
        where the operator holds it and nothing moves. Only for a `hand_guidable` rig."""
        return None

    # ------------------------------------------------------------ what the runner reads
    @property
    def torque_problems(self) -> Sequence[str]:
        """The servos the last torque off (`safe_stop` on release, `release_torque`,
        `disconnect`) left torqued, one line each, for the operator. Empty: none known; the
        default, for a rig without servos (nothing there holds torque)."""
        return ()

    def servo_problems(self) -> list[str]:
        """One read of the servos' alarms and torque while the arm holds (the hold watcher of
        `run/motion.py`), one line per problem; never raises (a read that fails is a problem).
        The default reads nothing and so reports nothing: a rig without servos."""
        return []

    @property
    def rest_target(self) -> Mapping[str, float]:
        """The pose `go_to_rest` goes to (`<joint>.pos` -> value). Empty: not known here (the
        simulation knows its own)."""
        return {}

    def torque_enabled(self) -> Mapping[str, bool | None]:
        """Each servo's Torque_Enable as read now: True (on), False (off), None (no answer): what
        the operator is told of the arm after a stop (`run.operator_protocol.arm_words`); never
        raises. Empty: a rig without servos, which holds its joints (the simulation)."""
        return {}

    def start_here(self, mark: Mark, seed: int) -> None:
        """The next episode starts from the world as it is (the arm itself put the cube on
        `mark`: the autonomous reset), instead of from `prepare_layout`. The default does
        nothing: on a real arm there is no episode clock to restart."""
        return None

    @property
    def places_the_cube(self) -> bool:
        """True when `prepare_layout` puts the cube on its mark itself (the simulated hand of the
        simulator and the twin, `rigs/placement.py`); False: a person places it."""
        return False

    @property
    def posed_by_a_scripted_hand(self) -> bool:
        """True when `pose_by_hand` stands in for a person guiding the arm with torque off (the
        simulator: `camera calibrate-wrist`'s views); False: a person moves it."""
        return False

    def pose_by_hand(self, joints: Sequence[float]) -> None:
        """The scripted hand puts the arm at `joints` (rig units, the five arm joints), as a
        person would with torque off. Only for a rig that is `posed_by_a_scripted_hand`."""
        raise NotImplementedError("this rig's arm is moved by a person")

    def camera_still(self, camera: str) -> Any:
        """One (H, W, 3) uint8 RGB still of `camera` as it is now (`camera check`, the start-state
        check). The default opens that camera alone (`rigs.frames.grab_frame`): the bus is never
        opened. `BadInput` when the profile has no such camera or it delivers nothing."""
        from orchestrator.rigs.frames import grab_frame

        return grab_frame(self, camera)

    def camera_poses(self) -> dict[str, dict] | None:
        """Pose and image size of each camera that has a fixed one (`profile_camera_poses`), for
        the judges' zoom and guide. None: the rig knows no camera pose."""
        return None

    @property
    def calibration_path(self) -> Path | None:
        """The calibration file the motors are checked against (its digest is recorded per
        station). None: the rig has no calibration file."""
        return None

    def calibrated_range(self, motor: str) -> tuple[float, float] | None:
        """`motor`'s calibrated (range_min, range_max) in LeRobot's units (degrees, gripper
        0-100). None: no calibration known for it, so nothing to compare a checkpoint with."""
        return None

    @property
    def joint_units(self) -> str:
        """The units of the joint positions, as the operator reads them: "degrees" (LeRobot's
        `use_degrees`, the simulation's) or "-100..100"."""
        return "degrees"

    # ------------------------------------------------------------ what a LeRobot policy matches
    @property
    def observation_features(self) -> dict[str, Any]:
        """LeRobot's `robot.observation_features`: `{"<joint>.pos": float, ..., "<camera>": (H, W,
        3)}`. The default is the profile's (`profile_observation_features`)."""
        return profile_observation_features(self.profile)

    @property
    def action_features(self) -> dict[str, Any] | None:
        """LeRobot's `robot.action_features`. None: not known (a checkpoint's actions are then
        checked against the state's joints)."""
        return None

    @property
    def robot_type(self) -> str | None:
        """What LeRobot's rollout passes as `robot_type` to a policy (`robot.robot_type`). None:
        not a LeRobot robot (a policy then takes the SO-101's)."""
        return None


RIG_KINDS: Registry[Rig] = Registry("rig kind", Rig, "kind")


def register_rig(kind: str):
    """Class decorator: `cls` is the rig of kind `kind` (see `rigs.factory`)."""
    return RIG_KINDS.register(kind)
