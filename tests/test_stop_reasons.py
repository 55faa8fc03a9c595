"""Stop reasons are never lost, and a servo alarm leads somewhere, on the fake-bytes SO-101 with
LeRobot's SOFollower, FeetechMotorsBus and scservo_sdk above it.

- The stop key, then a signal (SIGTERM, SIGHUP, Ctrl-C) at the question why: the stop is
  `operator_unanswered`, counted by the protocol's rule for it (default: the policy's failure),
  and the next session's first prompt asks why before the arm is written to at all.
- Ctrl-C during a real arm's episode is the same class (cause `interrupt`); in a simulation it
  stays `interrupted`, re-run (the positive control).
- After a servo overload: no "move it to rest" (no confirmation is asked, no goal is written
  after the hold), the operator's word on what it pushed against is recorded, the run ends
  saying to power-cycle the arm; the next run reads Status on a bare bus and names the servo
  before anything is written; after a power-cycle it runs. `aborts.overload: rig` makes the same
  alarm the rig's (re-run) instead of the policy's.
"""

from __future__ import annotations

import signal
import time

import pytest

from fakes import feetech
from orchestrator.analysis.outcomes import outcomes_from_store
from orchestrator.analysis.report import build_report
from orchestrator.analysis.report.aborts import describe_answers
from orchestrator.core.errors import BadInput, Interrupted, RuntimeFailure
from orchestrator.rigs.base import EmergencyStop
from orchestrator.rigs.device_fault import DeviceFault
from orchestrator.rigs.so101.servo_alarms import CHECK_EVERY_STEPS
from orchestrator.run.console.prompt import PromptOperator
from orchestrator.run.operator_protocol import ESTOP_PENDING
from orchestrator.store.sqlite import CampaignStore
from support.arm_bench import arm_bench
from support.arm_doubles import Failing, Watching, campaign


class Script:
    """A stdin that is not a terminal: each `readline` takes the next step (a line, or a callable
    whose return is the line), and `asked` keeps when each was read."""

    def __init__(self, *steps):
        self.steps, self.asked = list(steps), []

    def readline(self) -> str:
        self.asked.append(time.perf_counter())
        if not self.steps:
            return ""
        step = self.steps.pop(0)
        return step() if callable(step) else step

    def fileno(self) -> int:
        raise OSError("not a terminal")


class StopKeyAt(PromptOperator):
    """The plain prompt, with the stop key pressed at poll `at` of the first episode."""

    def __init__(self, stdin: Script, at: int = 3):
        self.said: list[str] = []
        super().__init__(countdown_s=0, stdin=stdin, out=self.said.append)
        self.at, self.polls = at, 0

    def poll(self, elapsed_s):
        self.polls += 1
        if self.polls == self.at:
            self._stop = EmergencyStop(ESTOP_PENDING)
        super().poll(elapsed_s)


class SignalLandedOutside(AssertionError):
    """A signal this file sends to its own process arrived where the campaign had no handler."""


@pytest.fixture(autouse=True)
def signals_caught_by_the_test():
    """These tests send SIGTERM and SIGHUP to their own process (the pytest worker). The campaign
    installs its handlers over these while it runs (and restores them after); a signal that lands
    outside them (a test whose question is asked at another moment than it thinks) fails that
    test here instead of killing the worker, and every other test it was to run (seen once:
    "worker 'gw1' crashed" at 76be480). SIGINT is left as Python sets it (KeyboardInterrupt): the
    campaign keeps that handler, and the Ctrl-C tests rely on it."""
    def outside(signum, frame):
        raise SignalLandedOutside(f"{signal.Signals(signum).name} arrived where the campaign had no handler")

    sigs = (signal.SIGTERM, signal.SIGHUP)
    previous = {sig: signal.signal(sig, outside) for sig in sigs}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def test_a_signal_outside_the_campaign_fails_the_test_not_the_worker():
    """The guard above, positive control: with no campaign running, the signal reaches it."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        with pytest.raises(SignalLandedOutside, match=signal.Signals(sig).name):
            _signal(sig)()


def _signal(sig):
    def send():
        signal.raise_signal(sig)    # "1 the arm swung" typed, not sent: the terminal goes, or a kill
        # Python runs the handler before the next bytecode: it raises out of raise_signal, or not at all
        raise AssertionError(f"signal {sig} did not interrupt the question")
    return send


def _aborted(out):
    with CampaignStore.open_readonly(out) as store:
        return [a for a in store.attempts() if a["status"] == "aborted"], store.trials()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=["SIGTERM", "SIGHUP", "Ctrl-C"])
def test_a_stop_whose_question_a_signal_cuts_short_counts_and_is_asked_before_the_next_run_writes(
        tmp_path, monkeypatch, sig):
    tmp_path, arm, rig, protocol = arm_bench(tmp_path, monkeypatch)
    out = tmp_path / "c"
    first = StopKeyAt(Script("\n", "\n", _signal(sig)))   # the first motion allowed (the fake arm starts far from rest), the cue
    with pytest.raises(Interrupted, match="the next run asks why it was stopped"):
        campaign(protocol, rig, out, first)
    (attempt,), trials = _aborted(out)
    assert (attempt["abort_class"], attempt["abort_cause"], attempt["settles"]) == \
        ("operator_unanswered", "emergency stop", "failure")
    stopped = next(t for t in trials if t.slot == attempt["slot"])
    assert stopped.state == "done" and stopped.episode_id is None           # counted, not re-run
    assert arm.torque_enabled() == {i: 0 for i in arm.servos}

    session_2 = time.perf_counter()
    second = StopKeyAt(Script("1 the arm swung\n", *["\n"] * 12), at=10**6)
    campaign(protocol, rig, out, second)
    asked_at = second.stdin.asked[0]
    question = next(s for s in second.said if s.startswith("BEFORE ANYTHING MOVES"))
    assert f"trial {attempt['slot'] + 1} (mark {stopped.mark_id})" in question and "no reason was given" in question
    assert not [w for w in arm.writes if session_2 < w[0] < asked_at], "the arm was written to before the answer"
    assert arm.writes[-1][0] > asked_at                                     # the positive control: it did run on
    with CampaignStore.open_readonly(out) as store:
        again = next(a for a in store.attempts() if a["id"] == attempt["id"])
        kinds = [e["kind"] for e in store.events()]
        report = build_report(outcomes_from_store(store))
        reruns = [a for a in store.attempts() if a["slot"] == attempt["slot"]]
    assert again["operator_answer"] == "unsafe motion: the arm swung" and "abort_answered" in kinds
    assert len(reruns) == 1
    rows = {r.policy: r for r in report.aborts.rows}
    assert describe_answers(rows[stopped.policy]) == "operator_unanswered: emergency stop: unsafe motion 1"
    (other,) = set(rows) - {stopped.policy}
    assert describe_answers(rows[other]) == "none"


def test_ctrl_c_as_an_emergency_stop_on_a_real_arm_counts_as_unanswered_in_a_simulation_it_is_re_run(
        tmp_path, monkeypatch):
    from support.tiny import PROTOCOL, RIG

    tmp_path, arm, rig, protocol = arm_bench(tmp_path, monkeypatch)
    ctrl_c = Failing(lambda: signal.raise_signal(signal.SIGINT), at=3)
    with pytest.raises(Interrupted):
        campaign(protocol, rig, tmp_path / "arm", ctrl_c)
    (attempt,), _ = _aborted(tmp_path / "arm")
    assert (attempt["abort_class"], attempt["abort_cause"], attempt["settles"]) == \
        ("operator_unanswered", "interrupt", "failure")
    with pytest.raises(Interrupted):   # the positive control: nobody at a simulated arm
        campaign(PROTOCOL, RIG, tmp_path / "sim", Failing(lambda: signal.raise_signal(signal.SIGINT), at=3))
    (attempt,), trials = _aborted(tmp_path / "sim")
    assert (attempt["abort_class"], attempt["abort_cause"], attempt["settles"]) == \
        ("interrupted", "user interrupt", None)
    assert next(t for t in trials if t.slot == attempt["slot"]).state == "aborted"   # re-run


class AnsweringAlarm(Watching):
    """`Watching` that answers the alarm's question with `answer` and keeps each question."""

    def __init__(self, answer: str, **kwargs):
        super().__init__(**kwargs)
        self.answer, self.questions = answer, []

    def question(self, line):
        self.questions.append((time.perf_counter(), line))
        return self.answer


@pytest.mark.parametrize("overload, expected", [("policy", ("policy", "failure")), ("rig", ("rig", None))])
def test_after_an_overload_only_what_works_is_offered_and_the_next_run_names_the_servo_before_writing(
        tmp_path, monkeypatch, overload, expected):
    rules = None if overload == "policy" else {"aborts": {"overload": overload}}   # the default: the policy's
    tmp_path, arm, rig, protocol = arm_bench(tmp_path, monkeypatch, rules)
    out = tmp_path / "c"
    op = AnsweringAlarm("p it pushed into the table", fail=lambda: arm.alarm(3), fail_at=2, wait_s=0.0)
    with pytest.raises(RuntimeFailure, match=r"elbow_flex \(id 3\): overload.*switch the arm's power supply off and on"):
        campaign(protocol, rig, out, op)
    (asked_at, line), = op.questions
    assert line.startswith("SERVO ALARM: ") and "p = it pushed into something" in line and "Enter = move" not in line
    assert op.prompts == 0                          # never "Enter = move it to rest": it moved nothing
    # the control steps until the alarm is read, the hold; no move to rest after the question
    assert len(arm.goal_write_times(since=op.fault_at)) <= CHECK_EVERY_STEPS + 1
    assert not arm.goal_writes(since=asked_at)
    assert arm.torque_enabled() == {i: 0 for i in arm.servos}
    (attempt,), _ = _aborted(out)
    assert (attempt["abort_class"], attempt["settles"]) == expected and attempt["abort_cause"] == "overload"
    assert attempt["operator_answer"] == "pushed into something (the table, the cube, a joint stop): it pushed into the table"

    session_2 = time.perf_counter()
    with pytest.raises(BadInput, match=r"servo alarm: elbow_flex \(id 3\): overload, read before anything moved: "
                       r".*switch its power supply off and on"):
        campaign(protocol, rig, out, Watching())
    assert not [w for w in arm.writes if w[0] > session_2]      # nothing written: no torque, no goal
    servo = arm.servos[3]                                       # the operator power-cycles the arm
    servo.error, servo.regs[feetech.ADDR_STATUS] = 0, 0
    summary, _ = campaign(protocol, rig, out, Watching())       # the positive control: then it runs
    assert summary.complete and arm.writes[-1][0] > session_2


def test_an_overload_left_unanswered_at_the_alarm_is_asked_first_by_the_next_session(tmp_path, monkeypatch):
    tmp_path, arm, rig, protocol = arm_bench(tmp_path, monkeypatch)
    out = tmp_path / "c"
    with pytest.raises(RuntimeFailure):
        campaign(protocol, rig, out, AnsweringAlarm("", fail=lambda: arm.alarm(2), fail_at=2, wait_s=0.0))
    servo = arm.servos[2]
    servo.error, servo.regs[feetech.ADDR_STATUS] = 0, 0
    session_2 = time.perf_counter()
    op = AnsweringAlarm("h the cable was loose")
    campaign(protocol, rig, out, op)
    (asked_at, line), = op.questions
    assert line.startswith("BEFORE ANYTHING MOVES") and "servo overload" in line
    assert not [w for w in arm.writes if session_2 < w[0] < asked_at]
    (attempt,), _ = _aborted(out)
    assert attempt["operator_answer"] == "the hardware (supply, cable, servo): the cable was loose"


def test_an_alarm_during_the_move_to_rest_offers_no_move_either(tmp_path, monkeypatch):
    """The first move to rest of a session; an overload on the elbow at its second step. It used
    to hold and ask "Enter = move it to rest before torque goes off", which moved nothing."""
    tmp_path, arm, rig, protocol = arm_bench(tmp_path, monkeypatch)

    class AlarmInMove(AnsweringAlarm):
        def check_stop(self):
            self.checks += 1
            if self.checks == 2:
                arm.alarm(3)
                self.fault_at = time.perf_counter()

    op = AlarmInMove("")
    with pytest.raises(DeviceFault, match=r"elbow_flex \(id 3\): overload") as raised:
        campaign(protocol, rig, tmp_path / "c", op)
    assert "power off and on" in raised.value.line
    (asked_at, line), = op.questions
    assert line.startswith("SERVO ALARM: ") and line.endswith("Enter = torque off")
    assert op.prompts == 0 and not arm.goal_writes(since=asked_at)
    assert len(arm.goal_write_times(since=op.fault_at)) <= CHECK_EVERY_STEPS + 1
    assert arm.torque_enabled() == {i: 0 for i in arm.servos}
