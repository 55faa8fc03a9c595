"""A fault at every point, sampled: a seeded handful of the matrix that
bench/safety_matrix.py runs whole (events x phases x on_stop, one event at the N-th bus
transaction of a short twin campaign; the invariants: tests/support/safety_matrix.py), and one
case of the arm's own reset: an overload on shoulder_lift during the carry. (A hand on the elbow
during the pick was a second case, 61 s of real time: its stop, its words, its goals' lead and
its stall are asserted in simulated time by tests/test_guarded_motion.py, no goal while held and
the resume by tests/test_twin_reset.py, torque off at exit after a reset's stop by the overload
case here; the bench runs it with every other hand.) A canary run (torque-off disabled) and planted wire records (a joint pushed
without a stop, a fault held late) show the checks can fail. One run has the tiny SmolVLA under LeRobot's
RTC engine (tests/support/safety_matrix_rtc.py), with the two invariants of
asynchronous inference on top; planted records and a run of a policy that only pauses LeRobot's
engine show those checks can fail."""

from __future__ import annotations

from pathlib import Path

import pytest

from support import safety_matrix as sm
from support import safety_matrix_rtc as smr

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

# Three of the seeded sample (its first three: `random.Random(SEED).sample` draws in order) and one
# RTC run; every run is checked for every invariant, the bench runs the whole matrix.
SAMPLE, SEED = 3, 22


# Session scope: a worker that runs another module's tests between this one's would build a
# module fixture again. (It is still built once per worker that runs tests of this module:
# `--dist loadgroup` does not group with pytest 9.2, see tests/support/lanes.py.)
@pytest.fixture(scope="session")
def spans(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        return sm.phases(tmp_path_factory.mktemp("base"), mp)


def test_a_run_without_an_event_passes_through_every_phase(spans):
    """Every phase but the reset's and the after_* ones, which have campaigns of their own (the
    reset's two cases below; their rows run in bench/safety_matrix.py)."""
    own = (*sm.RESET_PHASES, *sm.AFTER_PHASES)
    assert all(spans[p] == [] for p in own) and all(spans[p] for p in sm.PHASES if p not in own), \
        {p: len(spans[p]) for p in sm.PHASES}


@pytest.mark.parametrize("index", range(SAMPLE))
def test_a_seeded_sample_of_the_matrix_keeps_every_invariant(spans, index, tmp_path, monkeypatch):
    todo = sm.cases(spans, 2, sample=SAMPLE, seed=SEED)
    case = todo[index]
    _, _, outcome = sm.run_case(case, tmp_path, monkeypatch)
    assert outcome.violations == [], f"{case.name}: {outcome.violations}"


def test_the_checks_catch_torque_left_on(spans, tmp_path, monkeypatch):
    """The canary: torque-off made a no-op (where the rig releases on a stop and where it closes
    the robot, `torque.close_robot`); the torque invariant must report it."""
    import orchestrator.rigs.so101.rig as lerobot_rig
    import orchestrator.rigs.so101.torque as torque

    for module in (lerobot_rig, torque):
        monkeypatch.setattr(module, "torque_off", lambda bus, retries=2: [])
    case = sm.Case("operator_stop", "hold", "episode", spans["episode"][len(spans["episode"]) // 2])
    _, state, outcome = sm.run_case(case, tmp_path, monkeypatch)
    assert state is not None and any(state["torque"])
    assert any(v.startswith("torque:") for v in outcome.violations), outcome.violations


# (event, on_stop, phase, k: before the phase's k-th packet). In a reset run without an event on the
# twin the pick was 764 packets (4.3 s), the carry 437, the place 578: the 300th of the carry is
# under way. (The hand's case, ("hand:elbow_flex", "hold", "reset_pick", 450): see the docstring.)
RESET_CASES = (("alarm:shoulder_lift", "release", "reset_carry", 300),)


@pytest.mark.parametrize("event,on_stop,phase,k", RESET_CASES)
def test_an_overload_during_the_arms_own_reset_keeps_every_invariant(event, on_stop, phase, k, tmp_path,
                                                                     monkeypatch):
    case = sm.Case(event, on_stop, phase, 0, "sync", k)
    tap, _, outcome = sm.run_case(case, tmp_path, monkeypatch)
    assert tap.fired_phase == phase, outcome.note
    assert outcome.violations == [], f"{case.name}: {outcome.violations}"
    stop = next((st for st in tap.stops if st[0] >= tap.fired_at), None)
    assert stop is not None, "the reset went on as if nothing happened"
    hold, moved = sm._to_hold(tap)   # held (here released) within the limit, goals written meanwhile or not
    assert hold is not None and hold - tap.fired_at <= sm.FAULT_TO_HOLD_S, (hold, tap.fired_at, len(moved))


@pytest.mark.off_clock
def test_the_checks_catch_a_joint_pushed_without_a_stop_and_a_fault_held_late():
    """Planted wire records: the stall rule flags a joint 4 degrees from its goal that has not
    moved for 0.5 s (not one that creeps toward it, not the gripper closing on the cube), and the
    fault-to-hold check a hold 300 ms after an overload with goals written meanwhile."""
    from orchestrator.rigs.twin.feetech import INST_SYNC_WRITE, INST_WRITE, REG

    tap = sm.Tap()
    tap.phase.append("reset_pick")
    tap.present = {"elbow_flex": 10.0, "wrist_flex": 10.0, "gripper": 30.0}
    for i in range(30):   # 0.6 s at 50 Hz
        t = i * 0.02
        tap.present["wrist_flex"] = 10.0 + 0.1 * i   # creeps toward its goal: 3 degrees in 0.6 s
        for motor, goal in (("elbow_flex", 14.0), ("wrist_flex", 10.0 + 0.1 * i + 4.0), ("gripper", 25.0)):
            tap.on_goal(motor, goal, t)
    assert [line.split()[0] for line in tap.stalls] == ["elbow_flex"], tap.stalls
    goal = bytes([0xFF, 0xFF, 0xFE, 9, INST_SYNC_WRITE, REG["Goal_Position"][0], 2, 1, 0, 8, 0])
    hold = bytes([0xFF, 0xFF, 0xFE, 4, INST_WRITE, REG["Torque_Enable"][0], 0, 0])
    tap.packets = [(10.0 + 0.02 * i, goal, "reset_carry") for i in range(15)] + [(10.3, hold, "stop")]
    tap.fired_at, tap.fired_phase, tap.stops = 10.0, "reset_carry", [(10.29, 10.31)]
    outcome = sm.Outcome(sm.Case("alarm:shoulder_lift", "release", "reset_carry", 0, "sync", 1))
    sm.check(outcome, tap, type("Op", (), {"messages": []})(), {"torque": [False] * 6}, Path("/nonexistent"), None)
    assert [v for v in outcome.violations if v.startswith("fault-to-hold")] == [
        "fault-to-hold: 300 ms, 14 goals written first"], outcome.violations
    assert any(v.startswith("stall: elbow_flex") for v in outcome.violations)


@pytest.mark.off_clock
def test_the_twin_stall_check_flags_an_arm_joint_at_stall_outside_an_episode_with_no_stop():
    """Planted lines of the twin's own stall record (epoch times; the tap's clock is 1000 s
    behind): the check flags the elbow at stall 0.6 s in a reset pick with no stop, and lets
    through a stall ended by a stop begun 0.2 s after it, a short one (0.3 s), the gripper's
    squeeze, and one in an episode."""
    packet = bytes(8)
    tap = sm.Tap()
    tap.packets = [(100.0, packet, "reset_pick"), (110.0, packet, "episode"), (120.0, packet, "move_to_rest")]
    tap.stops = [(121.2, 121.25)]

    def stall(joint, t, s):
        return {"event": "stall", "joint": joint, "t": t + 1000.0, "s": s, "load_pct": 90.0}

    lines = [stall("elbow_flex", 101.0, 0.6), stall("gripper", 102.0, 3.0), stall("wrist_flex", 103.0, 0.3),
             stall("shoulder_lift", 111.0, 2.0), stall("shoulder_pan", 121.0, 0.5)]
    found = sm.twin_stalls(lines, tap, perf_minus_epoch=-1000.0)
    assert found == ["twin stall: elbow_flex at stall 0.60 s (90 % load), no stop (reset_pick)"], found
    tap.stops = []   # positive control: without the stop the move to rest's stall is flagged too
    assert len(sm.twin_stalls(lines, tap, perf_minus_epoch=-1000.0)) == 2


@pytest.mark.off_clock
def test_every_event_of_the_issue_is_in_the_matrix():
    needed = {"operator_stop", "ctrl_c", "sigterm", "policy_exception", "nan_action", "camera_failure",
              "usb_unplug", "servo_reset", "corrupt_burst"} | {f"alarm:{j}" for j in sm.JOINTS} | {
              f"hand:{j}" for j in sm.JOINTS[:5]}
    assert set(sm.EVENTS) == needed and len(sm.PHASES) == 14
    assert {"reset_pick", "reset_carry", "reset_place", "after_sigterm", "after_sighup", "after_kill9"} <= set(sm.PHASES)
    hands = {c.phase for c in sm.cases({p: [1, 2] for p in sm.PHASES}, 1, events=("hand:elbow_flex",))}
    assert hands == set(sm.OWN_MOTIONS)   # a hand only while the arm moves by itself


# Session scope, as `spans` above.
@pytest.fixture(scope="session")
def vla(tmp_path_factory):
    return smr.checkpoint(tmp_path_factory.mktemp("vla"))


def test_an_rtc_campaign_keeps_every_invariant_and_joins_lerobots_thread(spans, vla, tmp_path, monkeypatch):
    """Ctrl-C in the second episode (the first ends at the operator's stop, a third of its way
    in: a quarter of the episodes' packets), with release."""
    episode = spans["episode"]
    k = len(episode) // 2
    case = sm.Case("ctrl_c", "release", "episode", episode[k - 1], "rtc", k)
    tap, _, outcome = sm.run_case(case, tmp_path, monkeypatch, checkpoint=vla)
    assert outcome.violations == [], f"{case.name}: {outcome.violations}"
    assert len(tap.stops) == 2 and tap.fired_phase == "episode", (tap.stops, outcome.note)
    first_end = tap.stops[0][1]
    acts = tap.rtc.acts
    before = [t for t, origin in acts if origin is not None and t < first_end]
    after = [t for t, origin in acts if origin is not None and t > first_end]
    # The count guard of the stale check: it had acts of a computed chunk to look up on both sides of the
    # first stop. One each is what the check needs; how many more depends on how fast the machine
    # computes the chunks (the engine's thread runs on the wall clock), so no more is asked.
    assert before and after, (len(before), len(after))
    assert smr.rtc_threads() == []


@pytest.mark.off_clock
def test_the_rtc_checks_catch_a_stale_action_and_a_thread_left_running():
    import threading

    outcome = sm.Outcome(sm.Case("operator_stop", "hold", "episode", 1, "rtc"))
    tap = sm.Tap()
    tap.stops = [(10.0, 10.05)]
    tap.rtc = smr.RtcRecord(acts=[(9.9, 9.5), (10.4, 10.3), (10.5, 9.8)], alive_at_moves=["ArmMotion.stop (episode)"])
    release = threading.Event()
    thread = threading.Thread(target=release.wait, name=smr.THREAD_NAME, daemon=True)
    thread.start()
    try:
        smr.check(outcome, tap, sm.STOPS)
    finally:
        release.set()
        thread.join()
    kinds = sorted(v.split(":")[0] for v in outcome.violations)
    assert kinds == ["joined", "joined", "stale"], outcome.violations
    assert "computed 200 ms before a stop was sent 500 ms after it (1 such actions)" in outcome.violations[0]


def test_the_rtc_checks_catch_a_policy_that_only_pauses_lerobots_engine(spans, vla, tmp_path, monkeypatch):
    """The canary of the RTC invariants on a real run: stop() only pauses LeRobot's engine and the
    next reset() resumes it with its queue (what a wrapper on `engine.pause()`/`engine.resume()`
    would do): its thread is alive when the arm is stopped, and the stopped episode's queued
    actions are sent in the policy's next episode."""
    from orchestrator.policies.rtc import EnginePolicy

    engines, real_reset = [], EnginePolicy.reset

    def resume_old(self, context=None):
        if self._engine is None:
            real_reset(self, context)
            engines.append(self._engine)
            return
        self._hold, self._cached_obs = None, None
        self._engine.resume()

    monkeypatch.setattr(EnginePolicy, "reset", resume_old)
    monkeypatch.setattr(EnginePolicy, "stop", lambda self: self._engine is not None and self._engine.pause())
    case = sm.Case("corrupt_burst", "hold", "move_to_start", spans["move_to_start"][0], "rtc", 1)
    try:
        _, _, outcome = sm.run_case(case, tmp_path, monkeypatch, checkpoint=vla)
    finally:
        for engine in engines:
            engine.stop()
    kinds = {v.split(":")[0] for v in outcome.violations}
    assert {"stale", "joined"} <= kinds, outcome.violations
    assert any("alive at ArmMotion.stop" in v for v in outcome.violations), outcome.violations
    assert smr.rtc_threads() == []
