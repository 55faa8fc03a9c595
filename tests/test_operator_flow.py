"""The operator's flow around the arm's own motions, on the byte-level fake
SO-101 (LeRobot's SOFollower, FeetechMotorsBus and scservo_sdk unchanged; `fakes/feetech.py` logs
every Goal_Position and Torque_Enable write): each assertion is on what the servos were told, or
on the words the operator was shown next to what the servos' registers said at that moment."""

from __future__ import annotations

import io
import time

import pytest

from orchestrator.rigs.base import EmergencyStop
from orchestrator.run.console.prompt import PromptOperator
from orchestrator.run.operator_protocol import ESTOP_PENDING
from support.arm_bench import arm_bench, rig_with
from support.arm_doubles import campaign


@pytest.fixture
def bench(tmp_path, monkeypatch):
    return arm_bench(tmp_path, monkeypatch)


class TerminalAt(PromptOperator):
    """The terminal prompt (`--no-console`) with Enter for every question and the stop key at
    poll `stop_at`; every line it prints is kept with the servos' Torque_Enable as they read when
    it was printed (`lines`)."""

    def __init__(self, arm, stop_at: int | None = None, answers: str = "\n" * 40):
        self.lines: list[tuple[str, dict[int, int]]] = []
        super().__init__(None, countdown_s=0, stdin=io.StringIO(answers),
                         out=lambda text: self.lines.append((text, arm.torque_enabled())))
        self.stop_at, self.polls = stop_at, 0

    def poll(self, elapsed_s):
        self.polls += 1
        if self.polls == self.stop_at:
            self._stop = EmergencyStop(ESTOP_PENDING)   # what the space key sets
        super().poll(elapsed_s)

    def said(self, start: str) -> list[tuple[str, dict[int, int]]]:
        return [(line, torque) for line, torque in self.lines if line.startswith(start)]


# ------------------------------------------------------------------ item 5: words that match the servos
@pytest.mark.parametrize("on_stop", ["hold", "release"])
def test_the_words_after_a_stop_are_the_torque_registers(bench, on_stop):
    """After an emergency stop the reason prompt and the confirmation name the arm's state as its
    Torque_Enable registers read at that moment: limp after `on_stop: release` (it said "ARM
    STOPPED (holding)", hard-coded), holding after `on_stop: hold` (the positive control)."""
    from orchestrator.run.operator_protocol import ARM_HELD, ARM_RELEASED

    tmp_path, arm, rig, protocol = bench
    op = TerminalAt(arm, stop_at=3)
    campaign(protocol, rig_with(rig, on_stop=on_stop), tmp_path / "c", op)
    words, torque = (ARM_RELEASED, 0) if on_stop == "release" else (ARM_HELD, 1)
    (reason, at_reason), = op.said("EMERGENCY STOP")
    confirms = [(line, registers) for line, registers in op.said("ARM ")
                if ". Enter = move it" in line and "not moved yet" not in line]   # not the first motion's question
    assert len(confirms) == 1 and confirms[0][0].startswith(f"{words}. Enter = move it to rest"), confirms
    assert reason.startswith(f"EMERGENCY STOP: {words}, trial aborted")
    for _, registers in [(reason, at_reason), confirms[0]]:
        assert registers == {i: torque for i in arm.servos}, registers


# ------------------------------------------------------------------ item 3: a countdown before every policy episode
def episodes_without_countdown(seen: list[str]) -> list[int]:
    """The episodes (their index among `seen`'s "episode" entries) that the operator was not
    counted into: the last thing before them was not the cue (whose Enter counts down itself, in
    the console and the prompt) or a countdown, but the arm's own motion or a refused start."""
    out, last, n = [], None, 0
    for what in seen:
        if what == "episode":
            if last not in ("cue", "countdown"):
                out.append(n)
            n += 1
        last = what
    return out


def test_the_countdown_check_flags_an_episode_after_a_reset_or_a_refusal_positive_control():
    assert episodes_without_countdown(["cue", "episode", "moved", "episode", "cue", "refused", "episode"]) == [1, 2]
    assert episodes_without_countdown(["cue", "episode", "moved", "countdown", "episode"]) == []


def test_every_policy_episode_starts_after_a_countdown_after_a_reset_and_a_refused_start(tmp_path):
    """`reset: auto` on the simulator, the simulated hand 10 mm off (every hand placement is
    refused; the operator overrides it): the first episode follows a refusal, the later ones the
    arm's own reset. Each starts after the operator's countdown (`Operator.countdown`, "ARM WILL
    MOVE (policy) in 3 s: space = stop"): before, only the cue's Enter counted down."""
    from orchestrator.run.operator_protocol import AutoOperator
    from support.campaign_files import two_mark_protocol
    from support.repo import REPO

    class Sequence(AutoOperator):
        def __init__(self):
            super().__init__(say=lambda text: None)
            self.seen: list[str] = []

        def before_trial(self, cue):
            self.seen.append("cue")

        def countdown(self, cue):
            self.seen.append("countdown")

        def arm_moving(self, doing):
            if doing is not None:
                self.seen.append("moved")

        def start_refused(self, cue, line, still):
            self.seen.append("refused")
            return "override"

        def episode_started(self, cue):
            self.seen.append("episode")

    protocol = two_mark_protocol(tmp_path, "{type: scripted, aim_noise_mm: 3}", duration_s=1.0, fps=15)
    protocol.write_text(protocol.read_text() + "start_check: {mode: enforce}\nreset: {mode: auto, max_tries: 1}\n")
    rig = tmp_path / "rig.yaml"
    rig.write_text((REPO / "hardware" / "sim.yaml").read_text() + "placement: {offset_mm: [10, 0]}\n")
    op = Sequence()
    summary, _ = campaign(protocol, rig, tmp_path / "c", op)
    assert summary.complete and op.seen.count("episode") == 4, op.seen   # count guard
    # both paths were taken: a refused start after the cue, and episodes right after the arm's reset
    assert op.seen[:3] == ["moved", "cue", "refused"] and op.seen.count("cue") == 1, op.seen
    after_reset = [i for i in range(2, len(op.seen)) if op.seen[i - 2:i + 1] == ["moved", "countdown", "episode"]]
    assert len(after_reset) >= 1, op.seen
    assert episodes_without_countdown(op.seen) == [], op.seen


# ------------------------------------------------------------------ item 4: a stop during a reset asks what next
@pytest.mark.parametrize("choice, phase", [("again", "pick"), ("place", "pick"), ("place", "carry")])
def test_a_stop_during_the_arms_reset_goes_to_rest_on_confirmation_then_asks_what_next(tmp_path, choice, phase):
    """`reset: auto` on the simulator: the stop key 1 s into the arm's first reset motion of the
    `phase`: the pick (after the move to rest), or the carry of a cube still in the jaws after
    an episode (the squeeze, then the carry). Nothing moves until the operator confirms; then the
    arm goes to rest and the operator is asked "reset again (Enter), place it yourself (p), end
    (q)" before anything else moves: again, the arm resets the cube; p, the trial's cue (the
    operator places it). Before: Enter moved the arm to rest and ran a whole second
    pick-and-place by itself. The stop is an intervention."""
    from orchestrator.analysis.start_records import intervention_counts
    from orchestrator.rigs.sim import SimRig
    from orchestrator.run.operator_protocol import AutoOperator
    from orchestrator.run.reset import RESETTING, CubeReset
    from orchestrator.store.sqlite import CampaignStore
    from support.campaign_files import two_mark_protocol
    from support.repo import REPO

    acts = [0]

    class StopsTheReset(AutoOperator):
        def __init__(self):
            super().__init__(say=lambda text: None)
            self.seen: list[str] = []
            self.steps = 0

        def arm_moving(self, doing):
            if doing is not None:
                self.seen.append(doing)

        def check_stop(self):
            # the pick follows the move to rest; the squeeze and the carry follow the episode
            if self.seen[-1] == RESETTING and self.seen[-2] == ("moving to rest" if phase == "pick" else RESETTING):
                self.steps += 1
                if self.steps == 15 and "stop" not in self.seen:   # 1 s at 15 fps
                    self.seen.append("stop")
                    self.acts_at_stop = acts[0]
                    raise EmergencyStop("arm stopped by the operator during a move")

        def confirm_move(self, what):
            self.seen.append(f"confirm {what}")
            self.acts_at_confirm = acts[0]

        def after_reset_stop(self):
            self.seen.append("what next")
            return choice

        def before_trial(self, cue):
            self.seen.append("cue")

        def episode_started(self, cue):
            self.seen.append("episode")

    protocol = two_mark_protocol(tmp_path, "{type: scripted, aim_noise_mm: 3}", duration_s=1.0, fps=15)
    protocol.write_text(protocol.read_text() + "start_check: {mode: enforce}\nreset: {mode: auto, max_tries: 1}\n")
    op = StopsTheReset()
    real_act = SimRig.act

    def counted(self, action):
        acts[0] += 1
        return real_act(self, action)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(SimRig, "act", counted)
        if phase == "pick":   # as on the twin and a real arm: a cube in the jaws goes to rest with the arm
            patch.setattr(CubeReset, "put_down_held", lambda self, mark: False)
        summary, _ = campaign(protocol, REPO / "hardware" / "sim.yaml", tmp_path / "c", op)
    assert summary.complete and op.seen.count("episode") == 4, op.seen   # count guard
    k = op.seen.index("stop")
    assert op.seen[k - 2:k] == (["moving to rest", RESETTING] if phase == "pick" else ["episode", RESETTING, RESETTING])[-2:]
    assert op.acts_at_confirm == op.acts_at_stop   # held: no target until Enter
    assert op.seen[k + 1:k + 4] == ["confirm to rest", "moving to rest", "what next"], op.seen
    then = next(what for what in op.seen[k + 4:] if what != "moving to rest")
    assert then == (RESETTING if choice == "again" else "cue"), op.seen
    with CampaignStore.open_readonly(tmp_path / "c") as store:
        events, attempts = store.events(), store.attempts()
    assert [e["kind"] for e in events].count("reset_stopped") == 1
    counts = intervention_counts(events, attempts)
    # the session's first cube by hand, and with p the stopped reset's cube as well
    assert counts["stop"] == 1 and counts["placement"] == (2 if choice == "place" else 1), counts


# ------------------------------------------------------------------ item 2: no motion after an unclean end without a person
def one_trial(protocol, rig, out, operator):
    """One `orchestrator run` session that stops after one trial done (in this process)."""
    from orchestrator.commands.referees import campaign_referees
    from orchestrator.run.campaign import open_campaign
    from orchestrator.run.sequential import run_campaign

    opened = open_campaign(protocol, rig, out)
    try:
        return run_campaign(opened, operator, say=lambda s: None, stop_after=1, referees=campaign_referees())
    finally:
        opened.store.close()


def test_the_reasons_to_ask_before_the_first_motion():
    from orchestrator.run.first_motion import reasons_to_ask

    rest = {"shoulder_lift.pos": -100.0, "elbow_flex.pos": 100.0, "gripper.pos": 30.0}
    now = {"started_at": 3.0, "ended_at": None, "outcome": None}
    clean = [{"ended_at": 2.0, "outcome": "ended"}, now]
    assert reasons_to_ask(clean, rest, rest, 0.03) == [] and reasons_to_ask([now], rest, rest, 0.03) == []
    for ended, why in ((None, "was killed"), ("interrupted", "was interrupted"),
                       ("interrupted (station s1)", "was interrupted"), ("failed: camera lost", "failed (camera lost)")):
        row = {"ended_at": None if ended is None else 2.0, "outcome": ended}
        (reason,) = reasons_to_ask([row, now], rest, rest, 0.03)
        assert why in reason, (ended, reason)
    (far,) = reasons_to_ask(clean, {**rest, "elbow_flex.pos": 88.0}, rest, 0.03)
    assert far == "the arm is 12 degrees from rest (elbow_flex)"
    assert reasons_to_ask(clean, {**rest, "elbow_flex.pos": 92.0}, rest, 0.03) == []   # within 10 degrees
    assert reasons_to_ask(clean, {**rest, "gripper.pos": 18.0}, rest, 0.03) == ["the jaws are closed on something"]
    assert reasons_to_ask(clean, {**rest, "gripper.pos": 2.0}, rest, 0.03) == []     # shut on nothing


@pytest.mark.parametrize("ended", ["clean", "interrupted", "killed"])
def test_after_an_unclean_end_nothing_moves_until_the_operator_allows_it(bench, ended):
    """Session 1 ends cleanly at rest, or is interrupted (Ctrl-C mid-episode: the arm left where
    it stopped, near rest), or is killed (its session row never ended, as after `kill -9`).
    Session 2 connects (LeRobot's configure toggles torque): after an unclean end no goal reaches
    the bus until the operator's Enter at a question that says why, where the arm is and what
    will move; then the move to rest. After a clean end at rest (the control) nothing is asked and
    the session moves on its own."""
    from orchestrator.core.errors import Interrupted
    from orchestrator.run.operator_protocol import ARM_HELD, AutoOperator
    from orchestrator.store.sqlite import CampaignStore
    from support.arm_doubles import Failing

    tmp_path, arm, rig, protocol = bench
    out = tmp_path / "c"
    one_trial(protocol, rig, out, AutoOperator(say=lambda s: None))   # the fake arm starts far from rest
    if ended == "interrupted":
        def ctrl_c():
            raise KeyboardInterrupt

        with pytest.raises(Interrupted):
            one_trial(protocol, rig, out, Failing(ctrl_c))
    elif ended == "killed":
        store = CampaignStore.open_for_run(out)
        try:
            store.begin_session()   # what a process killed mid-session leaves
        finally:
            store.close()

    class Asked(AutoOperator):
        def __init__(self):
            super().__init__(say=lambda s: None)
            self.asked: list[tuple[str, list, dict]] = []
            self.allowed_at = None

        def approve(self, line):
            time.sleep(0.3)   # the stimulus: the operator walks to the arm (nothing may move meanwhile)
            self.asked.append((line, arm.goal_writes(since=started), arm.torque_enabled()))
            self.allowed_at = time.perf_counter()

    op = Asked()
    started = time.perf_counter()
    one_trial(protocol, rig, out, op)
    if ended == "clean":
        assert op.asked == [] and arm.goal_writes(since=started)   # not asked, and it moved
        return
    ((line, goals_before, torque),) = op.asked
    assert goals_before == [] and torque == {i: 1 for i in arm.servos}   # torque on, not one goal
    assert line.startswith(f"{ARM_HELD}, not moved yet: the last session was {ended}")
    assert "The move to rest will move" in line and line.endswith("Enter = move it to rest")
    assert arm.goal_writes(since=op.allowed_at)   # then it moved
    with CampaignStore.open_readonly(out) as store:
        allowed = [e["message"] for e in store.events() if e["kind"] == "first_motion_allowed"]
    assert f"the last session was {ended}" in allowed[-1], allowed


# ------------------------------------------------------------------ item 2: the jaws open at the table
@pytest.mark.parametrize("opens_first", [True, False])
def test_jaws_holding_the_cube_at_the_table_open_there_before_the_move_to_rest(tmp_path, monkeypatch, opens_first):
    """The twin's servos and scene in this process, in simulated time (`fakes/twin_bus.py`): the
    stop key 3.4 s into a reset pick, the cube closed in the jaws on the table. The move to rest
    (after the confirmation) first opens the jaws where they are, every other joint's goal held,
    and the cube stays on the table. The control (`opens_first=False`: the jaws not looked at, as
    before) lifts the cube with the arm and drops it on the way."""
    import numpy as np

    from fakes.twin_bus import twin_rig
    from orchestrator.policies.pick_place import pick_and_place_path
    from orchestrator.rigs.profile import STATE_KEYS
    from orchestrator.rigs.twin.arm import TICKS_PER_DEG
    from orchestrator.run.motion import ArmMotion, MotionStopped
    from orchestrator.run.operator_protocol import AutoOperator
    from orchestrator.run.reset import RESETTING

    rig, twin = twin_rig(tmp_path, monkeypatch, cube_xy=(0.20, 0.06))
    try:
        class StopAt(AutoOperator):
            pressed = False

            def check_stop(self):
                if twin.now >= 3.4 and not self.pressed:
                    self.pressed = True
                    raise EmergencyStop("arm stopped by the operator during a move")

        motion = ArmMotion(rig, StopAt(say=lambda s: None), cube_size_m=0.03 if opens_first else None)
        here = rig.observe(with_images=False)
        path = pick_and_place_path(np.array([here[k] for k in STATE_KEYS]), (0.20, 0.06, 0.0), (0.20, -0.06, 0.0),
                                   0.03, 30)
        with pytest.raises(MotionStopped):
            motion.follow([{k: float(v) for k, v in zip(STATE_KEYS, row, strict=True)} for row in path], RESETTING, 30)
        cube = twin.sim._ids["cube_qpos"]
        grasped = twin.sim.data.qpos[cube:cube + 3].copy()
        heights: list[float] = []
        advance = twin.advance

        def watched(seconds):
            advance(seconds)
            heights.append(float(twin.sim.data.qpos[cube + 2]))

        monkeypatch.setattr(twin, "advance", watched)
        confirmed = twin.now
        motion.to_rest()
        moved = [(goals, present) for t, goals, present in twin.goals if t > confirmed]
    finally:
        rig.disconnect()
    assert grasped[2] < 0.02 and len(heights) > 100, (grasped, len(heights))   # on the table, then a move
    if not opens_first:   # the control: carried up and dropped
        assert max(heights) > grasped[2] + 0.03, max(heights)
        return
    assert max(heights) < grasped[2] + 0.01, max(heights)   # never lifted
    assert np.hypot(*(twin.sim.data.qpos[cube:cube + 2] - grasped[:2])) < 0.02
    # the first goals open the jaws (servo 6) with every other joint held where it is
    opening = [(goals, present) for goals, present in moved[:10]]
    assert all(abs(g - p[i]) <= 1.0 * TICKS_PER_DEG for goals, p in opening for i, g in goals.items() if i != 6)
    assert len(opening) == 10 and abs(opening[-1][0][6] - opening[0][1][6]) > 2 * TICKS_PER_DEG, opening[-1]
