"""Every move the arm makes by itself, stoppable by the operator's stop key.

The runner moves the arm on its own to rest after connecting, to rest after each trial, to rest
before torque goes off at the end of a session, and (with `reset: auto`) along the cube reset's
scripted paths. Each is the one guarded motion (`rigs/guarded_motion.py`: goals at most 5 degrees
ahead of the present position, a joint that does not follow stops it, the servos read every 5
steps); `ArmMotion` announces it, keeps the stop key live, and is the one stop path (docs/design.md
section 12):

- before a move the operator is told the arm is about to move (`Operator.arm_moving`), and the
  stop key is live for its whole length (`Operator.check_stop`, called before every step);
- every stop (the stop key, a device or policy fault, a servo alarm, a joint that does not
  follow, Ctrl-C, SIGTERM; during an episode or a move) goes through `stop()`: it holds the arm,
  or releases torque if the rig profile says `on_stop: release` (`Rig.safe_stop`), and the arm
  does not move or get torque back until the operator confirms (`Operator.confirm_move`);
- Ctrl-C, SIGTERM and the operator ending the session at a confirmation are never followed by
  a move: torque goes off where the arm is (one prompt, no second "move it?").
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager

import numpy as np

from orchestrator.rigs.base import EmergencyStop, Rig
from orchestrator.rigs.device_fault import RestBlocked
from orchestrator.rigs.profile import STATE_KEYS
from orchestrator.rigs.so101.torque import torque_warning
from orchestrator.run.interrupts import deferred_interrupts
from orchestrator.run.operator_protocol import Operator, StopRequested, arm_words

logger = logging.getLogger(__name__)

MAX_BLOCKED_MOVES = 3   # a move to rest blocked this often (confirmed each time) is given up
HOLD_CHECK_S = 0.25     # servo alarms and torque read this often while the arm holds
HAND_GUIDE_AFTER_BLOCKED = 2   # after this many blocked moves, offer to guide the arm by hand
HAND_GUIDE_OFFER = ("the move to rest is blocked again: the arm may lie on the table or the cube. To lift it "
                    "by hand: hold the arm, then confirm: torque goes off on every joint (the arm goes limp)")
HAND_GUIDE_NOW = ("lift the arm clear of the table and the cube, toward its rest pose, and keep holding it. "
                  "Enter = torque on where you hold it (nothing moves)")
HAND_GUIDE_LET_GO = "let go, then Enter = move to rest"   # after torque came back where the operator holds it


JAWS_NEAR_TABLE_M = 0.05   # the arm's lowest point this close to the table while the jaws hold something:
OPEN_FIRST_S = 0.5         # the jaws open there first, over this long, before any other joint moves
OPEN_FIRST_FPS = 30


def holds_something(here: Mapping[str, float], cube_size_m: float) -> bool:
    """The jaws stand at a cube's width (neither shut nor open): something may be in them
    (`sim.holding.cube_sized_gap`, the first half of the auto rater's *closed on the cube*)."""
    from orchestrator.sim.holding import cube_sized_gap

    gripper = STATE_KEYS[5]
    return gripper in here and bool(cube_sized_gap(np.array([here[gripper]]), cube_size_m)[0])


def held_at_the_table(here: Mapping[str, float], cube_size_m: float) -> bool:
    """The jaws hold something (`holds_something`) with the arm's lowest point within
    `JAWS_NEAR_TABLE_M` of the table (forward kinematics of the SO-101 model): a move to rest
    that opens the jaws last would lift it and drop it on the way (on the twin: lifted to 14 cm,
    fallen 7 cm away); opened first, the cube stays where it is."""
    from orchestrator.sim.kinematics import arm_kinematics

    if not holds_something(here, cube_size_m) or any(k not in here for k in STATE_KEYS):
        return False
    kinematics = arm_kinematics()
    q = kinematics.units.from_rig(np.array([here[k] for k in STATE_KEYS], dtype=float))
    return kinematics.lowest_point_m(q) <= JAWS_NEAR_TABLE_M


class MotionStopped(Exception):
    """The operator's stop key stopped a scripted motion of the arm by itself (`ArmMotion.follow`:
    the cube reset): the arm holds (`held`) until the operator confirms the move to rest, then
    says what next (`Operator.after_reset_stop`). `what` names the motion."""

    def __init__(self, what: str):
        super().__init__(f"stopped by the operator while {what}")
        self.what = what


class ArmMotion:
    """`held`: stopped, nothing moves until the operator confirms; `ended`: the operator ended
    the session at a confirmation prompt; `interrupted`: Ctrl-C or SIGTERM. After `ended` or
    `interrupted` the arm never moves again in this session: torque goes off where it is."""

    def __init__(self, rig: Rig, operator: Operator, record: Callable[[str, str], None] | None = None,
                 cube_size_m: float | None = None):
        self.rig = rig
        self.operator = operator
        self.cube_size_m = cube_size_m   # the layout's cube: jaws at its width hold one (None: not looked for)
        self.record = record or (lambda kind, message: None)   # (kind, message) into the campaign's events
        self.held = False
        self.ended = False
        self.interrupted = False

    def stop(self, interrupted: bool = False) -> None:
        """The one stop path (stop key, fault, alarm, Ctrl-C, SIGTERM; during an episode or a
        move): hold or release (`Rig.safe_stop`); nothing moves until the operator confirms."""
        self.rig.safe_stop()
        self.held = True
        self.interrupted = self.interrupted or interrupted
        problems = list(self.rig.torque_problems)
        if problems:
            self.operator.message(torque_warning(problems))
        self.operator.arm_state(self.arm_words())

    def arm_words(self) -> str:
        """The arm's state as its servos' torque registers say now (`operator_protocol.arm_words`)."""
        return arm_words(self.rig.torque_enabled())

    def to_rest(self, what: str = "to rest") -> None:
        """Move to rest; after a stop, first wait for the operator's confirmation. Raises what
        `confirm_move` raises (StopRequested: the operator ends the session, arm held)."""
        blocked = 0
        open_first = True   # until the jaws could not open where they are (a jaw on the table)
        while True:
            if self.held:
                self._confirm(what)
                self.held = False
            opening = open_first
            try:
                with self._moving(f"moving {what}"):
                    if opening:
                        self._open_at_the_table()
                    opening = False
                    self.rig.go_to_rest(check=self.operator.check_stop)
            except EmergencyStop:
                self.operator.message(f"arm stopped on its way {what}: it holds until you confirm")
                continue
            except RestBlocked as fault:
                blocked += 1
                self.operator.message(f"{fault}; {fault.hint}")
                self.record("rest_blocked", str(fault))   # kept: the console's log is gone with it
                if opening:   # the jaws did not open where they are: once confirmed, the move to rest lifts first
                    open_first = False
                    self.operator.message("the jaws could not open where they are (a jaw against the table?): "
                                          "after you confirm, the move to rest lifts the gripper first and opens it last")
                if blocked >= MAX_BLOCKED_MOVES:
                    raise
                if blocked == HAND_GUIDE_AFTER_BLOCKED and self.rig.hand_guidable:
                    self._guide_by_hand()
                continue
            return

    @contextmanager
    def _moving(self, what: str) -> Iterator[None]:
        """The one exception ladder of every motion the arm makes by itself: `what` announced
        (`arm_moving`), and every way out of the motion through the one stop path (`stop`): the
        stop key, a blocked joint, a fault and Ctrl-C (marked `interrupted`) alike; the exception
        goes on to the caller, which words it; the announcement is cleared last."""
        self.operator.arm_moving(what)
        try:
            yield
        except KeyboardInterrupt:
            self.stop(interrupted=True)
            raise
        except BaseException:
            self.stop()
            raise
        finally:
            self.operator.arm_moving(None)

    def _open_at_the_table(self) -> None:
        """Before the move to rest: jaws that hold something at the table (`held_at_the_table`)
        open first, where the arm is, every other joint held (`Rig.move_along`, guarded); the
        move to rest then starts from open jaws."""
        gripper = STATE_KEYS[5]
        open_pct = self.rig.rest_target.get(gripper)
        if self.cube_size_m is None or open_pct is None:
            return
        observed = self.rig.observe(with_images=False)
        here = {k: float(observed[k]) for k in STATE_KEYS if k in observed}
        if not held_at_the_table(here, self.cube_size_m):
            return
        steps = max(2, round(OPEN_FIRST_S * OPEN_FIRST_FPS))
        path = [{**here, gripper: here[gripper] + (open_pct - here[gripper]) * i / steps} for i in range(1, steps + 1)]
        self.record("jaws_opened_first", f"the jaws opened at the table before the move to rest (gripper "
                                         f"{here[gripper]:.0f} -> {open_pct:.0f})")
        self.rig.move_along(path, OPEN_FIRST_FPS, check=self.operator.check_stop)

    def follow(self, targets: Iterable[dict[str, float]], what: str, fps: int) -> None:
        """A scripted motion of the arm by itself (the cube reset: pick, carry, place, the squeeze
        after an episode), announced to the operator (`arm_moving`) and guarded as the move to
        rest is (`Rig.move_along`, `rigs/guarded_motion.py`): each goal the present position plus
        at most 5 degrees toward the path (`fps` targets a second), the stop key read before every
        step, the servos' alarms and torque every 5 steps and before the first, a joint that does
        not follow for 0.3 s blocked. Any way out goes through the one stop path: the stop key or
        a blocked joint holds the arm and raises `MotionStopped` (an operator stops a reset
        because something is wrong: the caller asks what next, never resumes it); Ctrl-C and
        faults stop and raise."""
        if self.held:
            self._confirm(f"again ({what})")   # `what` names the motion: "... move it again (resetting the cube)"
            self.held = False
        try:
            with self._moving(what):
                self.rig.move_along(list(targets), fps, check=self.operator.check_stop)
        except (EmergencyStop, RestBlocked) as stopped:
            if isinstance(stopped, RestBlocked):
                self.operator.message(f"{stopped}; {stopped.hint}")
                self.record("motion_blocked", f"{what}: {stopped}")
            self.operator.message(f"arm stopped while {what}: it holds until you confirm")
            raise MotionStopped(what) from None

    def ask_to_move(self, line: str) -> None:
        """Wait until the operator allows what `line` says the arm will do (`Operator.approve`),
        the arm's state told and the arm watched meanwhile; the operator ending the session there
        sets `ended`: nothing moves again in this session."""
        self._asked(self.operator.approve, line)

    def _confirm(self, what: str) -> None:
        """Wait for the operator's go-ahead to move `what`, watching the held arm meanwhile."""
        self._asked(self.operator.confirm_move, what)

    def _asked(self, ask: Callable[[str], None], text: str) -> None:
        """`ask(text)` (a confirmation or an approval) with the arm's state just read from its
        torque registers told first (`Operator.arm_state`) and the held arm watched meanwhile;
        the operator ending the session there sets `ended`, an interrupt `interrupted`."""
        try:
            self.operator.arm_state(self.arm_words())
            with self._watching_the_hold():
                ask(text)
        except StopRequested:
            self.ended = True
            raise
        except KeyboardInterrupt:
            self.interrupted = True
            raise

    def _guide_by_hand(self) -> None:
        """The way out of a move to rest that is blocked again and again (the arm lies on the
        table or the cube after a sag with torque off), one Enter per step, each banner naming
        the arm's state as its torque registers say: on the operator's go-ahead torque goes off on
        every joint; the operator lifts the arm clear by hand, toward rest, and confirms while
        holding it: torque comes back where the arm then is (goal := present position first, so
        nothing jumps) and nothing moves; "let go, then Enter = move to rest": the move starts
        only after that Enter (a person lets go in seconds, not within 50 ms of torque-on: a move
        that started at once was held back by the hand and counted as blocked)."""
        self.operator.message(HAND_GUIDE_OFFER)
        self._confirm("by hand (torque goes off: hold the arm first)")
        problems = self.rig.release_torque()
        self.record("rest_hand_guided", "torque released for guiding the arm by hand"
                    + (f" (still torqued: {'; '.join(problems)})" if problems else ""))
        if problems:
            self.operator.message(torque_warning(problems))
        self._asked(self.operator.approve, f"{self.arm_words()}: {HAND_GUIDE_NOW}")
        self.rig.restore_torque()
        self._asked(self.operator.approve, f"{self.arm_words()}: {HAND_GUIDE_LET_GO}")
        self.held = False

    @contextmanager
    def _watching_the_hold(self) -> Iterator[None]:
        """While the operator decides, read the servos' alarms and torque every `HOLD_CHECK_S`
        (`Rig.servo_problems`; a rig without servos reads nothing) and tell the operator of each
        new one: an alarm while held means the arm pushes on something, or someone pushes on it.
        The bus is idle otherwise (the runner waits in `confirm_move`); the watcher is joined
        before the runner uses the bus again."""
        read = self.rig.servo_problems
        done = threading.Event()
        told: set[str] = set()

        def watch() -> None:
            while not done.wait(HOLD_CHECK_S):
                for line in read():
                    if line not in told:
                        told.add(line)
                        self.operator.message(f"while the arm is held: {line}; support the arm before you confirm")

        watcher = threading.Thread(target=watch, name="hold-watch", daemon=True)
        watcher.start()
        try:
            yield
        finally:
            done.set()
            watcher.join()

    def leave(self) -> None:
        """End of session: to rest (stoppable; after a stop only if the operator confirms; never
        after Ctrl-C, SIGTERM or the operator ending the session), then torque off through
        `disconnect` (no interrupt can cut it short); servos still torqued are named to the
        operator. Never raises."""
        try:
            if self.ended or self.interrupted:
                self.operator.message("the arm stays where it is; torque goes off now: support the arm")
            else:
                self.to_rest("to rest before torque goes off")
        except BaseException as exc:  # noqa: BLE001 - torque goes off whatever happened
            logger.warning("arm left where it is: %s", exc or type(exc).__name__)
            if not isinstance(exc, (StopRequested, KeyboardInterrupt)):
                self.operator.message(f"the arm stays where it is ({exc or type(exc).__name__}); torque goes "
                                      "off now: support the arm")
        finally:
            with deferred_interrupts():
                self.rig.disconnect()
                problems = list(self.rig.torque_problems)
                if problems:
                    self.operator.message(torque_warning(problems))
