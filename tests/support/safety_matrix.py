"""A fault at every point: short twin campaigns with one event injected at the N-th bus transaction.

SQLite is trusted because it crashes itself at every write and checks the database after each.
This does the same for the arm. One run = one twin (LeRobot's SOFollower / FeetechMotorsBus /
scservo_sdk on the twin's pseudo-terminal), a campaign of two 1 s trials at 30 Hz (scripted
policies), an operator who presses the stop key once in the first episode and confirms every
move after 0.2 s (so every run has a stop, a hold and a move to rest), and one event fired just
before the N-th instruction packet the orchestrator writes (counted at scservo_sdk's
`PortHandler.writePort`). The phase of every packet is known from a run without the event
(`phases()`): connect (the bare-bus calibration check, the handshake), configure (LeRobot's
`configure()`), move_to_start, episode, stop (`ArmMotion.stop`), hold (the operator deciding; no
packets, so events there fire inside `confirm_move`), move_to_rest, the reset's pick, carry and place
(reset_pick, reset_carry, reset_place: the arm's guarded motion putting the cube on the next mark,
`ArmMotion.follow` with `reset: auto`, split by how far along its path the motion is), the first
motion of the next session after one that ended by SIGTERM, SIGHUP or kill -9 (after_sigterm,
after_sighup, after_kill9: see `_unclean_session`), teardown (`disconnect`). A reset-phase run's
campaign has `start_check: enforce` and `reset: auto` (the start check reads a 320x240 front
camera); its phases are measured from a reset run without the event (`phases(reset=True)`), and
an after_* phase's from a run whose first session ended so (`phases(after=...)`).

Events: operator_stop (the stop key), ctrl_c (SIGINT), sigterm, policy_exception, nan_action
(at the next inference), camera_failure, usb_unplug, alarm:<joint> (an overload on that servo),
servo_reset (when the twin has that fault), corrupt_burst (the next 8 reads corrupted),
hand:<joint> (a person's hand holds that arm joint where it is: the twin's `hold` op, only while
the arm moves by itself; it lets go when the operator next confirms). `on_stop` is hold or release.

Invariants (`check()`), on what the wire carried (every instruction packet, its time) and the
twin's own record (the exit line of its wire log, `rigs/twin/wire_log.py`: its registers when it
stopped):
- torque: all six Torque_Enable 0 on the twin at exit (after a USB unplug nothing can reach the
  servos: the operator must then have been told that torque may still be on);
- still: no Goal_Position and no Torque_Enable 1 on the wire after a stop until the operator's
  confirmation (the stop's own hold write excepted);
- bounded: no goal further from the last present position than max_relative_target (episode)
  or, outside an episode, the guarded motion's 5 degrees, plus 1 degree;
- stall: outside an episode, no joint whose goal is 3 degrees or more from where it is and that
  has not moved 1 degree toward it for more than 0.3 s (the blocked rule) + 0.1 s with no stop
  (the gripper closing on the cube is a grasp); a hand's time to the hold is this rule;
- twin stall: the same bound on the twin's own record (its wire log's `stall` lines,
  `rigs/twin/stalls.py`: torque on, at least 95 % of the limit, the joint slower than 5 deg/s):
  outside an episode no arm joint at stall for longer than 0.3 s + 0.1 s unless a stop began
  within that time;
- latency: stop key / Ctrl-C / SIGTERM to the hold (or release) write under 100 ms (a key
  pressed as a move ends, with no goal sent after it, is not a latency: the arm was still);
- fault-to-hold: an alarm or a servo reset while the arm moves to the hold (or release) write
  within 200 ms (a fault with no goal sent after it before the stop: the arm was still);
- unasked: after a session that ended by SIGTERM, SIGHUP or kill -9, no goal more than 1 degree
  from the present position before the operator's first confirmation in the next session;
- resumable: no attempt left running, every abort has a cause naming what failed.

With `Case.policy` "rtc" both policies are the tiny SmolVLA under LeRobot's RTC engine and two more
invariants hold (stale, joined: `support/safety_matrix_rtc.py`).
"""

from __future__ import annotations

import os
import random
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

JOINTS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
HANDS = tuple(f"hand:{j}" for j in JOINTS[:5])   # the twin's `hold` op takes the arm joints
EVENTS = ("operator_stop", "ctrl_c", "sigterm", "policy_exception", "nan_action", "camera_failure",
          "usb_unplug", "alarm:shoulder_pan", "alarm:shoulder_lift", "alarm:elbow_flex", "alarm:wrist_flex",
          "alarm:wrist_roll", "alarm:gripper", "servo_reset", "corrupt_burst") + HANDS
RESET_PHASES = ("reset_pick", "reset_carry", "reset_place")
# the first motion of a session after the last one ended this way (the session before: see `run_case`)
AFTER_PHASES = {"after_sigterm": "sigterm", "after_sighup": "sighup", "after_kill9": "kill9"}
PHASES = ("connect", "configure", "move_to_start", "episode", "stop", "hold", "move_to_rest", *RESET_PHASES,
          *AFTER_PHASES, "teardown")
OWN_MOTIONS = ("move_to_start", "move_to_rest", *RESET_PHASES, *AFTER_PHASES)   # the arm moving by itself
MOVING = ("episode", *OWN_MOTIONS)   # where a stop's latency and a fault's time to the hold are measured
STOPS = ("operator_stop", "ctrl_c", "sigterm")
FAULTS = ("servo_reset", *(f"alarm:{j}" for j in JOINTS))   # held within FAULT_TO_HOLD_S
LATENCY_LIMIT_S = 0.100
FAULT_TO_HOLD_S = 0.200
FOLLOW_DEG, PROGRESS_DEG, FOLLOW_S = 3.0, 1.0, 0.3   # rigs/guarded_motion.py: a joint that does not follow...
STALL_SLACK_S = 0.1          # ...is stopped within FOLLOW_S and a loop step or two (reads, the Status check)

HOLD_S = 0.2
FPS, DURATION_S = 30, 1.0
BASE_STOP_POLL = 20          # the operator's own stop, in the first episode
# The first-motion question's words (run/first_motion.py): its Enter is the operator's first
# confirmation of the next session; the session's approval of the resets is not one.
FIRST_MOTION_QUESTION = "not moved yet"
END_POLL = 12                # an after_* case: session 1 ends here, in its first episode
EPISODE_LEAD_DEG = 3.0       # hardware/so101_twin.yaml max_relative_target
MOVE_LEAD_DEG = 5.0          # rigs/guarded_motion.py MAX_LEAD_DEG: every motion outside an episode


@dataclass
class Case:
    event: str
    on_stop: str
    phase: str
    n: int              # the packet number the event fires before (1-based; hold: 0)
    policy: str = "sync"   # sync: scripted policies; rtc: the tiny SmolVLA under LeRobot's RTC engine
    k: int = 0          # RTC: fire before the k-th packet of `phase` instead (see `cases`)

    @property
    def name(self) -> str:
        where = f"#{self.k}" if self.k else f"@{self.n}"
        return f"{self.event}/{self.on_stop}/{self.phase}{where}" + ("/rtc" if self.policy == "rtc" else "")


@dataclass
class Outcome:
    case: Case
    violations: list[str] = field(default_factory=list)
    latency_s: float | None = None
    fault_to_hold_s: float | None = None
    seconds: float = 0.0
    note: str = ""


# ------------------------------------------------------------------ the tap
class Tap:
    """Every instruction packet written (time, bytes, phase), every goal against the last present
    position, the stops and confirmations; fires `event` before packet `n`."""

    def __init__(self) -> None:
        self.packets: list[tuple[float, bytes, str]] = []
        self.phase: list[str] = ["between"]   # between the phases below (e.g. the start still)
        self.stops: list[tuple[float, float]] = []     # (start, end) of ArmMotion.stop
        self.confirms: list[float] = []
        self.far_goals: list[str] = []
        self.fire_at: int | None = None
        self.fire_in: tuple[str, int] | None = None   # (phase, k): before that phase's k-th packet
        self.in_phase: dict[str, int] = {}
        self.fire = lambda: None
        self.fired_at: float | None = None
        self.fired_phase: str | None = None
        self.corrupt_left = 0
        self.present: dict[str, float] = {}
        self.in_move = False
        self.pushing: dict[str, tuple[float, float]] = {}   # motor -> (since, present then): the stall rule
        self.stalls: list[str] = []
        self.hand: str | None = None      # the joint a hand holds (the `hand:<joint>` event)
        self.session = 1                  # an after_* case: 1 ends unclean, 2 is the session checked
        self.after: str | None = None     # the phase name of session 2's first motion
        self.session_2_at = float("inf")  # when session 2 began
        self.unasked: list[str] = []      # goals of session 2 before the operator's first confirmation
        self.dead = False                 # kill -9 emulated: nothing reaches the bus any more
        self.messages: list[str] = []     # what the operator was told (the harness operator's list)

    def on_goal(self, motor: str, goal: float, now: float) -> None:
        """The stall rule on the wire, outside an episode: a joint whose goal is `FOLLOW_DEG` or
        more from where it was last read, and that has not moved `PROGRESS_DEG` toward it for
        longer than `FOLLOW_S` + `STALL_SLACK_S` with no stop since, is pushing against something
        unchecked (the gripper closing on the cube is a grasp: let through)."""
        here = self.present.get(motor)
        if here is None:
            return
        error = goal - here
        if abs(error) < FOLLOW_DEG or (motor == "gripper" and error < 0):
            self.pushing.pop(motor, None)
            return
        since, mark = self.pushing.get(motor, (now, here))
        if (here - mark) * (1.0 if error > 0 else -1.0) >= PROGRESS_DEG:
            since, mark = now, here
        self.pushing[motor] = (since, mark)
        if now - since > FOLLOW_S + STALL_SLACK_S and len(self.stalls) < 3:
            self.stalls.append(f"{motor} pushed {abs(error):.1f} degrees from its goal without following for "
                               f"{now - since:.2f} s, no stop ({self.phase[-1]})")
            self.pushing.pop(motor)

    def on_packet(self, data: bytes) -> None:
        phase = self.phase[-1]
        n_in_phase = self.in_phase.get(phase, 0) + 1
        due = (self.fire_in == (phase, n_in_phase) if self.fire_in is not None
               else self.fire_at is not None and len(self.packets) + 1 == self.fire_at)
        if due and self.fired_at is None:
            self.fired_at = time.perf_counter()
            self.fired_phase = phase   # a slow run (retries) may put packet N elsewhere
            self.fire()
        self.in_phase[phase] = n_in_phase
        self.packets.append((time.perf_counter(), bytes(data), phase))

    def count(self, phase: str) -> int:
        return sum(1 for _, _, p in self.packets if p == phase)


def _install(monkeypatch, tap: Tap, operator) -> None:
    """The hooks: packet counting, phase tags, goal bounds (all in this process)."""
    import scservo_sdk.port_handler as ph
    from lerobot.motors.feetech import FeetechMotorsBus
    from lerobot.robots.so_follower.so_follower import SOFollower

    from orchestrator.rigs import guarded_motion
    from orchestrator.rigs.so101.rig import LeRobotRig
    from orchestrator.run import control_loop, motion, sequential

    write_port, read_port = ph.PortHandler.writePort, ph.PortHandler.readPort

    def writePort(self, packet):
        if tap.dead:   # the process is gone (kill -9): nothing it does reaches the arm
            return len(packet)
        tap.on_packet(bytes(packet))
        return write_port(self, packet)

    def readPort(self, length):
        if tap.dead:
            return b""
        data = read_port(self, length)
        if tap.corrupt_left > 0 and data:
            tap.corrupt_left -= 1
            data = bytes(data[:-1]) + bytes([data[-1] ^ 0x5A])
        return data

    monkeypatch.setattr(ph.PortHandler, "writePort", writePort)
    monkeypatch.setattr(ph.PortHandler, "readPort", readPort)

    def phased(name, fn):
        def wrapper(*args, **kwargs):
            tap.phase.append(name)
            try:
                return fn(*args, **kwargs)
            finally:
                tap.phase.pop()
        return wrapper

    monkeypatch.setattr(SOFollower, "configure", phased("configure", SOFollower.configure))
    monkeypatch.setattr(LeRobotRig, "connect", phased("connect", LeRobotRig.connect))
    # the cameras' frame-rate preflight (1 s a camera) tests the machine's load, not the arm
    monkeypatch.setattr(LeRobotRig, "preflight", lambda self: [])
    monkeypatch.setattr(sequential, "run_episode", phased("episode", control_loop.run_episode))
    monkeypatch.setattr(LeRobotRig, "disconnect", phased("teardown", LeRobotRig.disconnect))
    # the reset's motions (the camera's look and the measure between them leave the arm still at
    # rest): the pick, the carry and the place, by how far along its path the guarded motion is
    monkeypatch.setattr(motion.ArmMotion, "follow", phased("reset_pick", motion.ArmMotion.follow))
    real_advance = guarded_motion.PathAim.advance

    def advance(self, here, dt):
        out = real_advance(self, here, dt)
        if tap.phase[-1] in RESET_PHASES:
            pick_end, carry_end = reset_parts_s()
            along = self.cursor / self.fps
            tap.phase[-1] = "reset_pick" if along < pick_end else "reset_carry" if along < carry_end else "reset_place"
        return out

    monkeypatch.setattr(guarded_motion.PathAim, "advance", advance)
    real_to_rest, real_stop = motion.ArmMotion.to_rest, motion.ArmMotion.stop
    moves = {"n": 0, "session": 1}

    def to_rest(self, what="to rest"):
        if moves["session"] != tap.session:
            moves.update(n=0, session=tap.session)
        moves["n"] += 1
        first = "move_to_start" if tap.session == 1 or tap.after is None else tap.after
        name = first if moves["n"] == 1 else "move_to_rest" if tap.phase[-1] != "teardown" else "teardown"
        return phased(name, real_to_rest)(self, what)

    def stop(self, interrupted=False):
        t0 = time.perf_counter()
        tap.pushing.clear()
        try:
            return phased("stop", real_stop)(self, interrupted)
        finally:
            tap.stops.append((t0, time.perf_counter()))

    monkeypatch.setattr(motion.ArmMotion, "to_rest", to_rest)
    monkeypatch.setattr(motion.ArmMotion, "stop", stop)
    real_leave = motion.ArmMotion.leave
    monkeypatch.setattr(motion.ArmMotion, "leave", lambda self: phased("teardown", real_leave)(self))

    sync_read, sync_write = FeetechMotorsBus.sync_read, FeetechMotorsBus.sync_write

    def read(self, data_name, *args, **kwargs):
        out = sync_read(self, data_name, *args, **kwargs)
        if data_name == "Present_Position" and kwargs.get("normalize", True):
            tap.present.update({m: float(v) for m, v in out.items()})
        return out

    def write(self, data_name, values, *args, **kwargs):
        if data_name == "Goal_Position" and kwargs.get("normalize", True) and tap.present and not tap.dead:
            episode = tap.phase[-1] == "episode"   # outside an episode: the guarded motion's lead
            lead = EPISODE_LEAD_DEG if episode else MOVE_LEAD_DEG
            now = time.perf_counter()
            for motor, goal in values.items():
                here = tap.present.get(motor)
                if here is not None and abs(float(goal) - here) > lead + 1.0:
                    tap.far_goals.append(f"{motor} goal {float(goal):.1f} vs present {here:.1f} ({tap.phase[-1]})")
                if not episode:
                    tap.on_goal(motor, float(goal), now)
                if (here is not None and now > tap.session_2_at and not any(c > tap.session_2_at for c in tap.confirms)
                        and abs(float(goal) - here) > 1.0 and len(tap.unasked) < 3):
                    tap.unasked.append(f"{motor} goal {float(goal):.1f} vs present {here:.1f} ({tap.phase[-1]})")
        return sync_write(self, data_name, values, *args, **kwargs)

    monkeypatch.setattr(FeetechMotorsBus, "sync_read", read)
    monkeypatch.setattr(FeetechMotorsBus, "sync_write", write)


def reset_parts_s() -> tuple[float, float]:
    """Where the reset's pick ends and its carry ends, in seconds along its path
    (policies/pick_place.py): to above the cube, the hover (the session's first pick: the matrix's
    reset campaign has one), down, close, up; across and the swing let die; then the place (down,
    settle, open, up). A second try of the same session, which does not hover, is split 1 s late."""
    from orchestrator.policies import pick_place as pp

    pick = pp.TO_ABOVE_S + pp.HOVER_S + pp.DOWN_S + pp.CLOSE_S + pp.UP_S
    return pick, pick + pp.ACROSS_S + pp.SETTLE_S


# ------------------------------------------------------------------ the operator and the policy
def operator_class():
    from orchestrator.rigs.base import EmergencyStop
    from orchestrator.run.console.prompt import PromptOperator

    class HarnessOperator(PromptOperator):
        """The terminal operator's Ctrl-C handling (deferred while the arm is under control), keys
        pressed by the harness, every move confirmed after `HOLD_S`."""

        def __init__(self, tap: Tap):
            super().__init__(None, countdown_s=0, out=lambda s: None)
            self.tap, self.key, self.polls, self.messages, self.on_hold = tap, False, 0, [], None
            self.twin = None        # the twin: a hand on the arm lets go before the operator confirms
            self.end_session = None   # an after_* case: how session 1 ends, at its END_POLL-th poll

        def before_trial(self, cue):
            self._raise_pending_interrupt()

        def episode_started(self, cue):
            self._controlling = True

        def poll(self, elapsed_s):
            self._raise_pending_interrupt()
            self.polls += 1
            if self.tap.session == 1 and self.end_session is not None and self.polls == END_POLL:
                self.end_session()
            if self.key or self.polls == BASE_STOP_POLL:
                self.key = False
                raise EmergencyStop()

        def episode_ended(self, cue, aborted_reason):
            self._controlling = False
            return None

        def arm_moving(self, what):
            self._controlling = what is not None

        def check_stop(self):
            self._raise_pending_interrupt()
            if self.key:
                self.key = False
                raise EmergencyStop("arm stopped by the operator during a move")

        def approve(self, line):   # the session's approval of the arm's resets, or of its first motion
            self._raise_pending_interrupt()
            if FIRST_MOTION_QUESTION in line:   # the operator's Enter that allows the first motion
                self.tap.confirms.append(time.perf_counter())

        def after_reset_stop(self):   # after a stop in the reset, the arm at rest: reset again
            self._raise_pending_interrupt()
            return "again"

        def confirm_move(self, what):
            self._controlling = False
            self.tap.phase.append("hold")
            try:
                if self.on_hold is not None:
                    hook, self.on_hold = self.on_hold, None
                    self.tap.fired_at, self.tap.fired_phase = time.perf_counter(), "hold"
                    hook()
                if self.tap.hand is not None and self.twin is not None:   # the operator frees the joint
                    self.twin.request("hold", joints={})
                    self.tap.hand = None
                time.sleep(HOLD_S)   # the stimulus: the operator confirms after HOLD_S of hold
                self._raise_pending_interrupt()
            finally:
                self.tap.phase.pop()
            self.tap.confirms.append(time.perf_counter())

        def question(self, line):   # what an abort left to ask (a servo alarm's look): not known
            self.messages.append(line)
            return "?"

        def message(self, text):
            self.messages.append(text)

    return HarnessOperator


class Flags:
    policy_exception = False
    nan = False


def policy_wrapper(policy):
    class Faulty:
        needs_images = getattr(policy, "needs_images", False)

        def __getattr__(self, name):   # stop, asynchronous, inference_timing of an RTC policy
            return getattr(policy, name)

        def reset(self, context=None):
            return policy.reset(context)

        def select_action(self, obs):
            action = policy.select_action(obs)
            if Flags.policy_exception:
                Flags.policy_exception = False
                raise RuntimeError("policy blew up")
            if Flags.nan:
                Flags.nan = False
                action = {**action, "elbow_flex.pos": float("nan")}
            return action

        def close(self):
            return policy.close()

    return Faulty()


# ------------------------------------------------------------------ one run
def write_inputs(folder: Path, on_stop: str, checkpoint: Path | None = None, reset: bool = False) -> tuple[Path, Path]:
    """The twin profile (small cameras, `on_stop`) and a one-mark, two-policy protocol: scripted,
    or with `checkpoint` the tiny SmolVLA under RTC (`support/safety_matrix_rtc.py`); with `reset`
    the arm's own reset between the trials (the shipped 320x240 cameras, for the start check)."""
    from support import safety_matrix_rtc

    folder.mkdir(parents=True, exist_ok=True)
    repo = Path(__file__).resolve().parents[2]
    cameras = ("width: 320, height: 240, fps: 30" if reset else
               "width: 64, height: 48, fps: 30" if checkpoint is None else safety_matrix_rtc.camera_line())
    text = (repo / "hardware" / "so101_twin.yaml").read_text().replace("width: 320, height: 240, fps: 30", cameras)
    rig = folder / f"twin_{on_stop}.yaml"
    rig.write_text(text + f"on_stop: {on_stop}\n")
    (folder / "layout.yaml").write_text(yaml.safe_dump({"name": "one", "marks": [{"id": "M01", "x": 0.2, "y": 0.0}]}))
    protocol = folder / "protocol.yaml"
    protocol.write_text(yaml.safe_dump({
        "name": "matrix", "task": "Pick up the cube", "layout": "layout.yaml", "seed": 1,
        "policies": ({"A": {"type": "scripted"}, "B": {"type": "scripted", "aim_noise_mm": 5}} if checkpoint is None
                     else safety_matrix_rtc.policies(checkpoint)),
        "episode": {"fps": FPS, "duration_s": DURATION_S},
        **({"start_check": {"mode": "enforce"}, "reset": {"mode": "auto"}} if reset else {})}, sort_keys=False))
    return rig, protocol


def run_case(case: Case | None, folder: Path, monkeypatch, on_stop: str = "hold", policy: str = "sync",
             checkpoint: Path | None = None, reset: bool = False,
             after: str | None = None) -> tuple[Tap, Any, Outcome | None]:
    """One campaign on a fresh twin with `case`'s event (None: no event; used by `phases`); an
    RTC case (`policy` rtc) runs the tiny SmolVLA saved at `checkpoint` (`safety_matrix_rtc`); a
    reset-phase case (or `reset`) the campaign with the arm's own reset; an after_* case (or
    `after`, the phase's name) first a session that ends that way (`_unclean_session`), then the
    campaign's next session on the same twin, whose first motion is the phase."""
    from orchestrator.core.errors import BadInput, Interrupted, RuntimeFailure
    from orchestrator.policies import factory
    from orchestrator.rigs.profile import load_rig
    from orchestrator.rigs.twin.client import start_twin
    from orchestrator.run.campaign import open_campaign
    from orchestrator.run.sequential import run_campaign
    from support import safety_matrix_rtc
    from support.wirelog import wait_for_exit

    on_stop, policy = (case.on_stop, case.policy) if case else (on_stop, policy)
    rtc = policy == "rtc"
    if rtc and checkpoint is None:
        raise ValueError("an RTC case needs the tiny SmolVLA's checkpoint (safety_matrix_rtc.checkpoint)")
    reset = reset or (case is not None and case.phase in RESET_PHASES)
    after = after or (case.phase if case is not None and case.phase in AFTER_PHASES else None)
    rig_path, protocol = write_inputs(folder, on_stop, checkpoint if rtc else None, reset=reset)
    tap = Tap()
    op = operator_class()(tap)
    tap.messages = op.messages
    _install(monkeypatch, tap, op)
    if rtc:
        safety_matrix_rtc.install(monkeypatch, tap)
    real_make = factory.make_policy
    monkeypatch.setattr(factory, "make_policy", lambda *a, **k: policy_wrapper(real_make(*a, **k)))
    Flags.policy_exception = Flags.nan = False
    t_start = time.perf_counter()
    perf_minus_epoch = t_start - time.time()   # the twin's stall lines are in epoch seconds
    outcome = Outcome(case) if case else None
    wire = folder / "wire.jsonl"
    with start_twin(load_rig(rig_path), wire_log=wire) as twin:
        op.twin = twin
        if case is not None:
            fire = _event(case, twin, op, tap)
            if case.phase == "hold":
                op.on_hold = fire
            else:
                tap.fire_at, tap.fire = case.n, fire
                tap.fire_in = (case.phase, case.k) if case.k else None
        restore = op.handle_sigint()
        error = None
        try:
            if after is not None:
                _unclean_session(after, protocol, twin.rig, op, tap, folder / "campaign")
            opened = open_campaign(protocol, twin.rig, folder / "campaign")
            try:
                run_campaign(opened, op, say=lambda s: None)
            finally:
                opened.store.close()
        except (BadInput, Interrupted, RuntimeFailure, KeyboardInterrupt) as exc:
            error = exc
        finally:
            restore()
        state = twin.request("state") if twin.proc.poll() is None else None
    log = wait_for_exit(wire)
    exit_line = log.exit   # the twin's own record: its registers when it stopped
    state = {**(state or {}), "torque": [bool(t) for t in exit_line["torque"]]}
    if outcome is not None:
        outcome.seconds = time.perf_counter() - t_start
        outcome.violations.extend(twin_stalls(log.stalls(), tap, perf_minus_epoch))
        check(outcome, tap, op, state, folder / "campaign", error)
        if rtc:
            safety_matrix_rtc.check(outcome, tap, STOPS)
    return tap, state, outcome


def _unclean_session(after: str, protocol: Path, rig, op, tap: Tap, campaign: Path) -> None:
    """Session 1 of an after_* case: the campaign run until the END_POLL-th step of its first
    episode, then ended as `AFTER_PHASES[after]` says: SIGTERM; SIGHUP (a closed terminal: the
    console turns it into the same interrupt as SIGTERM, `run_with_console`; here the SIGTERM
    handler in place takes it); kill -9, emulated in this process: from that moment nothing the
    process writes reaches the bus and nothing is read back (`Tap.dead`), so the arm is left as
    a killed process leaves it (torque on, the last goal), whatever its stop path then tries. The
    next session (a new process on the arm: here the same process, its operator's interrupt state
    cleared) is the one checked; its first motion is phase `after`."""
    from orchestrator.core.errors import BadInput, Interrupted, RuntimeFailure
    from orchestrator.run.campaign import open_campaign
    from orchestrator.run.sequential import run_campaign

    how = AFTER_PHASES[after]
    previous = None
    if how == "sigterm":
        op.end_session = lambda: os.kill(os.getpid(), signal.SIGTERM)
    elif how == "sighup":
        previous = signal.signal(signal.SIGHUP, lambda signum, frame: signal.getsignal(signal.SIGTERM)(signum, frame))
        op.end_session = lambda: os.kill(os.getpid(), signal.SIGHUP)
    else:
        def kill() -> None:
            tap.dead = True
            raise SystemExit(137)
        op.end_session = kill
    try:
        opened = open_campaign(protocol, rig, campaign)
        try:
            run_campaign(opened, op, say=lambda s: None)
        finally:
            opened.store.close()
    except (BadInput, Interrupted, RuntimeFailure, KeyboardInterrupt, SystemExit):
        pass
    finally:
        if previous is not None:
            signal.signal(signal.SIGHUP, previous)
        op.end_session = None
    tap.dead = False
    tap.session, tap.after, tap.session_2_at = 2, after, time.perf_counter()
    op.interrupting = op.sigint_pending = op._controlling = False


def _event(case: Case, twin, op, tap: Tap):
    event = case.event
    if event.startswith("hand:"):   # a hand holds the joint where it is; it lets go at the next confirmation
        joint = event.split(":", 1)[1]
        return lambda: (twin.request("hold", joints={joint: None}), setattr(tap, "hand", joint))
    if event == "operator_stop":
        return lambda: setattr(op, "key", True)
    if event == "ctrl_c":
        return lambda: os.kill(os.getpid(), signal.SIGINT)
    if event == "sigterm":
        return lambda: os.kill(os.getpid(), signal.SIGTERM)
    if event == "policy_exception":
        return lambda: setattr(Flags, "policy_exception", True)
    if event == "nan_action":   # RTC: the next chunk LeRobot's thread merges into its queue
        return (lambda: setattr(tap.rtc, "nan_next_chunk", True)) if case.policy == "rtc" else (
            lambda: setattr(Flags, "nan", True))
    if event == "corrupt_burst":
        return lambda: setattr(tap, "corrupt_left", 8)
    fault = {"camera_failure": {"kind": "camera_disconnect", "camera": "front"},
             "usb_unplug": {"kind": "usb_unplug"}, "servo_reset": {"kind": "servo_reset", "servo": "elbow_flex"}}.get(event)
    if fault is None:
        fault = {"kind": "overload", "servo": event.split(":", 1)[1]}
    return lambda: twin.request("inject", fault=fault)


# ------------------------------------------------------------------ the invariants
def check(outcome: Outcome, tap: Tap, op, state: dict | None, campaign: Path, error) -> None:
    from orchestrator.rigs.twin.feetech import INST_SYNC_WRITE, INST_WRITE, REG

    case, bad = outcome.case, outcome.violations
    unplugged = case.event == "usb_unplug" and tap.fired_at is not None
    if unplugged:
        if not any("TORQUE MAY STILL BE ON" in m for m in op.messages) and not _all_off(state):
            bad.append("torque: the twin's servos may hold torque and the operator was not told")
    elif not _all_off(state):
        bad.append(f"torque: Torque_Enable at exit {state['torque']}")
    goal_addr, torque_addr = REG["Goal_Position"][0], REG["Torque_Enable"][0]
    for _start, end in tap.stops:   # (a stop of an after_* case's first session: until session 2, see `unasked`)
        until = min(next((c for c in tap.confirms if c > end), float("inf")),
                    tap.session_2_at if end < tap.session_2_at else float("inf"))
        for t, packet, phase in tap.packets:
            if not end < t < until or len(packet) < 7 or packet[4] not in (INST_WRITE, INST_SYNC_WRITE):
                continue
            addr = packet[5]
            if addr == goal_addr:
                bad.append(f"still: Goal_Position written {1000 * (t - end):.0f} ms after a stop, before a confirmation ({phase})")
                break
            if addr == torque_addr and _sets_torque_on(packet):
                bad.append(f"still: Torque_Enable 1 written {1000 * (t - end):.0f} ms after a stop, before a confirmation")
                break
    bad.extend(f"bounded: {line}" for line in tap.far_goals[:3])
    if case.event in STOPS and tap.fired_phase in MOVING:
        hold, moved = _to_hold(tap)
        if hold is None:
            bad.append("latency: the stop never reached the arm")
        elif not moved and hold - tap.fired_at > LATENCY_LIMIT_S:
            pass   # pressed as a move ended: the arm was still until the next check (no goal sent)
        else:
            outcome.latency_s = hold - tap.fired_at
            if outcome.latency_s > LATENCY_LIMIT_S:
                bad.append(f"latency: stop to hold {1000 * outcome.latency_s:.0f} ms")
    bad.extend(f"stall: {line}" for line in tap.stalls)
    bad.extend(f"unasked: after an unclean end, before the operator's Enter: {line}" for line in tap.unasked)
    if case.event in FAULTS and tap.fired_phase in MOVING:
        hold, moved = _to_hold(tap)
        if moved and hold is None:
            bad.append(f"fault-to-hold: {len(moved)} goals written after the fault and the arm never held")
        elif moved:   # (no goal after the fault before the hold: the arm was still until a check read it)
            outcome.fault_to_hold_s = hold - tap.fired_at
            if outcome.fault_to_hold_s > FAULT_TO_HOLD_S:
                bad.append(f"fault-to-hold: {1000 * outcome.fault_to_hold_s:.0f} ms, {len(moved)} goals written first")
    bad.extend(_store_problems(campaign, case, error, tap.fired_phase))
    outcome.note = (type(error).__name__ if error else "completed") + (
        ", never fired" if tap.fired_at is None else
        f", fired in {tap.fired_phase}" if tap.fired_phase != case.phase else "")
    if error is not None and tap.fired_at is None:   # the campaign ended some other way: say how
        outcome.note += ": " + " ".join(str(error).split())[:160]


def twin_stalls(lines: list[dict], tap: Tap, perf_minus_epoch: float) -> list[str]:
    """The stall invariant on the twin's own record: each `stall` line of an arm joint (the
    gripper squeezing the cube is at stall by design) that began outside an episode and lasted
    longer than `FOLLOW_S` + `STALL_SLACK_S` with no stop begun within that time of its start.
    A stall's phase is the phase of the last packet before its start (`perf_minus_epoch` turns
    its epoch time into the tap's clock)."""
    bound = FOLLOW_S + STALL_SLACK_S
    found = []
    for line in lines:
        if line["joint"] == "gripper" or line["s"] <= bound:
            continue
        start = line["t"] + perf_minus_epoch
        phase = next((p for t, _, p in reversed(tap.packets) if t <= start), "between")
        if phase == "episode" or any(start <= st[0] <= start + bound for st in tap.stops):
            continue
        found.append(f"twin stall: {line['joint']} at stall {line['s']:.2f} s ({line['load_pct']:.0f} % load), "
                     f"no stop ({phase})")
    return found[:3]


def _to_hold(tap: Tap) -> tuple[float | None, list[float]]:
    """After the event: the time of the stop's first write (a hold: Goal_Position, or a release:
    Torque_Enable) or None, and the times of the goals written between the event and the stop
    (all goals after the event when no stop came)."""
    from orchestrator.rigs.twin.feetech import INST_SYNC_WRITE, INST_WRITE, REG

    goal_addr, torque_addr = REG["Goal_Position"][0], REG["Torque_Enable"][0]
    writes = [(t, packet[5]) for t, packet, _ in tap.packets
              if t > tap.fired_at and len(packet) > 6 and packet[4] in (INST_WRITE, INST_SYNC_WRITE)]
    stop = next((st for st in tap.stops if st[0] >= tap.fired_at), None)
    until = stop[0] if stop else float("inf")
    hold = stop and next((t for t, addr in writes if t >= stop[0] and addr in (goal_addr, torque_addr)), None)
    return hold, [t for t, addr in writes if t < until and addr == goal_addr]


def _all_off(state: dict | None) -> bool:
    return state is not None and not any(state["torque"])


def _sets_torque_on(packet: bytes) -> bool:
    from orchestrator.rigs.twin.feetech import INST_SYNC_WRITE

    params = packet[5:-1]
    if packet[4] == INST_SYNC_WRITE:
        n, rest = params[1], params[2:]
        return any(rest[k + 1] for k in range(0, len(rest) - n, n + 1))
    return any(params[1:])


def _store_problems(campaign: Path, case: Case, error, fired_phase: str | None) -> list[str]:
    from orchestrator.store.sqlite import CampaignStore

    if not (campaign / "campaign.db").exists():
        return []
    with CampaignStore.open_readonly(campaign) as store:
        attempts = store.attempts()
    problems = [f"resumable: attempt {a['id'] if 'id' in a else '?'} left {a['status']}" for a in attempts
                if a["status"] not in ("done", "aborted")]
    problems += ["resumable: an aborted attempt without a cause" for a in attempts
                 if a["status"] == "aborted" and not (a.get("reason") or "").strip()]
    expected = {"policy_exception": "policy", "nan_action": "non-finite action", "camera_failure": "camera",
                "ctrl_c": "interrupt", "sigterm": "interrupt"}.get(case.event)
    if case.event.startswith("alarm:"):
        expected = f"{case.event.split(':')[1]} (id"
    reasons = [a["reason"] or "" for a in attempts if a["status"] == "aborted"] + [str(error or "")]
    if expected and error is not None and fired_phase == "episode" and not any(expected in r.lower() for r in reasons):
        problems.append(f"resumable: no abort names the cause ({expected!r} not in {reasons})")
    return problems


# ------------------------------------------------------------------ the matrix
def phases(folder: Path, monkeypatch, policy: str = "sync", checkpoint: Path | None = None,
           reset: bool = False, after: str | None = None) -> dict[str, list[int]]:
    """The packet numbers (1-based) of each phase in a run without an event (with `reset`: of the
    campaign with the arm's own reset; with `after`: of the session after one that ended so)."""
    tap, _, _ = run_case(None, folder, monkeypatch, policy=policy, checkpoint=checkpoint, reset=reset, after=after)
    spans: dict[str, list[int]] = {phase: [] for phase in PHASES}
    for n, (_, _, phase) in enumerate(tap.packets, 1):
        spans.setdefault(phase, []).append(n)
    spans["hold"] = [0]
    return spans


def twin_has(kind: str) -> bool:
    """Whether the twin knows fault `kind` (servo_reset comes with the twin's wire-log work)."""
    from orchestrator.rigs.twin.fault_plan import KINDS

    return kind in KINDS


def runnable_events(events=EVENTS) -> tuple[str, ...]:
    """`events` without those the twin cannot inject yet (servo_reset before the twin has it)."""
    return tuple(e for e in events if e != "servo_reset" or twin_has("servo_reset"))


def cases(spans: dict[str, list[int]], per_phase: int, events=EVENTS, on_stops=("hold", "release"),
          sample: int | None = None, seed: int = 0, phases_run=PHASES, policy: str = "sync") -> list[Case]:
    """`per_phase` packet numbers spread evenly over each phase's packets (its first and its last
    among them), for every event the twin can inject, every on_stop and each phase of `phases_run`,
    with `policy` (sync or rtc); a seeded `sample` of them when given. An RTC policy moves the arm
    differently in every run (its flow-matching noise), so the packet counts of its episodes and
    moves vary: an RTC case fires before the k-th packet of its phase (`Case.k`, counted as in the
    run without an event) rather than before the run's N-th packet. So does a reset case: the
    moves to rest before the reset vary in length with where the first episode's stop left the arm."""
    events = runnable_events(events)
    out = []
    for phase in (p for p in PHASES if p in phases_run):
        numbers = spans.get(phase) or []
        if not numbers:
            continue
        k = max(1, min(per_phase, len(numbers)))
        points = ([numbers[len(numbers) // 2]] if k == 1 else
                  sorted({numbers[round(i * (len(numbers) - 1) / (k - 1))] for i in range(k)}))
        # packet counts that vary from run to run; an after_* phase is counted in its own session
        by_phase = policy == "rtc" or phase in RESET_PHASES or phase in AFTER_PHASES
        out += [Case(e, s, phase, n, policy, numbers.index(n) + 1 if by_phase else 0)
                for e in events for s in on_stops for n in points if fits(e, phase)]
    if sample is not None and sample < len(out):
        out = random.Random(seed).sample(out, sample)
    return out


def fits(event: str, phase: str) -> bool:
    """A hand is put on the arm while it moves by itself (in an episode a policy drives it)."""
    return not event.startswith("hand:") or phase in OWN_MOTIONS


def table(outcomes: list[Outcome]) -> list[str]:
    """Events x phases: `ok` or the number of failed runs (`F2`), `-` when not run; then the
    summary line."""
    cell: dict[tuple[str, str], list[Outcome]] = {}
    for o in outcomes:
        cell.setdefault((o.case.event, o.case.phase), []).append(o)
    width = max(len(e) for e in EVENTS) + 2
    lines = ["event".ljust(width) + "".join(p[:12].rjust(13) for p in PHASES)]
    for event in EVENTS:
        row = event.ljust(width)
        for phase in PHASES:
            runs = cell.get((event, phase), [])
            failed = sum(1 for o in runs if o.violations)
            row += ("-" if not runs else "ok" if not failed else f"F{failed}").rjust(13)
        lines.append(row)
    lines.append(summary(outcomes))
    return lines


def summary(outcomes: list[Outcome]) -> str:
    latencies = [o.latency_s for o in outcomes if o.latency_s is not None]
    worst = f"{1000 * max(latencies):.0f} ms" if latencies else "n/a"
    holds = [o.fault_to_hold_s for o in outcomes if o.fault_to_hold_s is not None]
    worst_hold = f"{1000 * max(holds):.0f} ms" if holds else "n/a"
    violations = sum(len(o.violations) for o in outcomes)
    seconds = sum(o.seconds for o in outcomes)
    rtc = sum(1 for o in outcomes if o.case.policy == "rtc")
    label = "" if not rtc else " (RTC policy)" if rtc == len(outcomes) else f" ({rtc} with the RTC policy)"
    return (f"safety matrix{label}: {len(outcomes)} runs, {violations} violations, worst stop-to-hold latency {worst} "
            f"(limit {1000 * LATENCY_LIMIT_S:.0f} ms, {len(latencies)} stops measured), worst fault-to-hold "
            f"{worst_hold} (limit {1000 * FAULT_TO_HOLD_S:.0f} ms, {len(holds)} faults measured), {seconds:.0f} s of runs")
