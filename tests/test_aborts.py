"""Aborted attempts are classified, pre-registered and counted.

On the tiny simulated campaign (3 marks x 2 scripted policies, seconds per campaign): a policy
that raises on some trials has those trials counted as its failures by default, and the report
says so; a USB fault is re-run; re-runs are bounded; the abort-rate test is checked against
scipy; nothing a judge is shown carries the cause.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scipy import stats as sps

from orchestrator.analysis.outcomes import outcomes_from_store
from orchestrator.analysis.report import build_report
from orchestrator.analysis.report.json import to_dict
from orchestrator.cli import main
from orchestrator.policies.scripted import ScriptedPickPolicy
from orchestrator.rigs.base import EmergencyStop
from orchestrator.rigs.device_fault import DeviceFault
from orchestrator.rigs.sim import SimRig
from orchestrator.rigs.so101.servo_alarms import ServoAlarm
from orchestrator.run.bookkeeping import abort_class
from orchestrator.run.operator_protocol import stop_cause
from orchestrator.store.sqlite import CampaignStore
from support.tiny import DATA, PROTOCOL, run_cli

FAILING_MARK = "M01"


def _raise_on(monkeypatch, mark: str, policy_noise: float) -> None:
    """Policy B (aim noise 25 mm in the tiny protocol) raises on `mark`, from its 3rd step."""
    real_reset, real_select = ScriptedPickPolicy.reset, ScriptedPickPolicy.select_action

    def reset(self, context):
        self._mark_id = context.mark.id
        return real_reset(self, context)

    def select(self, observation):
        if self.aim_noise_mm == policy_noise and self._mark_id == mark and self._k >= 2:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return real_select(self, observation)

    monkeypatch.setattr(ScriptedPickPolicy, "reset", reset)
    monkeypatch.setattr(ScriptedPickPolicy, "select_action", select)


def _protocol(tmp_path: Path, extra: str = "") -> Path:
    text = PROTOCOL.read_text().replace("layout: tiny_layout.yaml", f"layout: {DATA / 'tiny_layout.yaml'}")
    path = tmp_path / "protocol.yaml"
    path.write_text(text + extra)
    return path


@pytest.fixture(scope="module")
def raised(tmp_path_factory) -> tuple[Path, str]:
    """The tiny campaign where B raises on FAILING_MARK from its 3rd step, run to its end, and
    what the run printed. Built once for the file (about a second of CPU): its tests only read it."""
    import contextlib
    import io

    tmp_path, printed = tmp_path_factory.mktemp("raised"), io.StringIO()
    with pytest.MonkeyPatch.context() as monkeypatch, contextlib.redirect_stdout(printed):
        _raise_on(monkeypatch, FAILING_MARK, 25.0)
        assert run_cli(tmp_path / "c", "--workers", "1", protocol=_protocol(tmp_path)) == 0   # the session goes on
    return tmp_path / "c", printed.getvalue()


def test_a_policy_that_raises_is_counted_as_its_failure_and_the_report_says_so(raised, capsys):
    out, printed = raised
    assert "counted as a failure of the policy that ran" in printed
    with CampaignStore.open_readonly(out) as store:
        trials = store.trials()
        assert all(t.state == "done" for t in trials) and store.campaign()["stop_reason"] == "complete"
        failed = [t for t in trials if t.policy == "B" and t.mark_id == FAILING_MARK]
        assert len(failed) == 1 and failed[0].episode_id is None
        aborted = [a for a in store.attempts() if a["status"] == "aborted"]
        assert [(a["slot"], a["abort_class"], a["settles"]) for a in aborted] == [(failed[0].slot, "policy", "failure")]
        data = outcomes_from_store(store)
    (b_fail,) = [o for o in data.outcomes if o.policy == "B" and o.layout == FAILING_MARK]
    assert b_fail.success is False and b_fail.failure_mode == "aborted (policy)"
    report = build_report(data)
    assert report.comparisons[0].table.n == 3            # the failed trial is in the pairs
    doc = to_dict(report)
    assert doc["aborts"]["per_policy"]["B"]["scored_failures"] == 1
    assert doc["aborts"]["per_policy"]["A"]["scored_failures"] == 0
    assert doc["aborts"]["rules"]["policy"] == "failure"
    assert any("counts as B's failure" in w for w in doc["warnings"])
    assert main(["report", str(out), "--format", "text"]) == 0
    text = capsys.readouterr().out
    assert "pre-registered: policy, operator_unsafe, operator_unanswered count as a failure of the policy that ran" in text
    assert "policy: exception 1" in text.split("Aborted attempts")[1]
    assert doc["aborts"]["per_policy"]["B"]["aborted_attempts_by_cause"] == {"policy": {"exception": 1}}


@pytest.mark.slow   # a tiny simulated campaign or two, over a second of CPU: the full run; the fast lane keeps this file's other campaigns
def test_rerun_rule_and_the_old_behaviour_are_preregistrable(tmp_path, monkeypatch):
    """With `aborts: {policy: rerun, max_reruns: 1}` the same failing trial is re-run once, then
    left out and listed, never retried forever."""
    _raise_on(monkeypatch, FAILING_MARK, 25.0)
    out = tmp_path / "c"
    protocol = _protocol(tmp_path, "aborts: {policy: rerun, max_reruns: 1}\n")
    runs = [run_cli(out, "--workers", "1", protocol=protocol) for _ in range(3)]
    assert runs[0] == 1 and runs[-1] == 0                  # a re-run cause stops the session, as before
    with CampaignStore.open_readonly(out) as store:
        aborted = [(a["abort_class"], a["settles"]) for a in store.attempts() if a["status"] == "aborted"]
        assert aborted == [("policy", None), ("policy", "excluded")]
        data = outcomes_from_store(store)
    report = build_report(data)
    assert report.comparisons[0].table.n == 2
    (why,) = [w for lay, _, w in report.unpaired if lay == FAILING_MARK]
    assert "re-run limit" in why and "2 aborts: policy" in why
    assert any("reached the re-run limit (aborts.max_reruns = 1, max_interruptions = 10)" in w for w in report.warnings)


def test_a_usb_fault_is_rerun_and_the_trial_then_counts_normally(tmp_path, monkeypatch):
    real_act = SimRig.act
    calls = {"n": 0}

    def act(self, action):
        calls["n"] += 1
        if calls["n"] == 7:
            raise DeviceFault.arm("arm /dev/ttyACM0", OSError(5, "Input/output error"))
        return real_act(self, action)

    monkeypatch.setattr(SimRig, "act", act)
    out = tmp_path / "c"
    protocol = _protocol(tmp_path)
    assert run_cli(out, "--workers", "1", protocol=protocol) == 1     # a rig fault stops the session
    assert run_cli(out, "--workers", "1", protocol=protocol) == 0
    with CampaignStore.open_readonly(out) as store:
        aborted = [a for a in store.attempts() if a["status"] == "aborted"]
        assert [(a["abort_class"], a["settles"]) for a in aborted] == [("rig", None)]
        assert all(t.state == "done" and t.episode_id for t in store.trials())
        data = outcomes_from_store(store)
    doc = to_dict(build_report(data))
    rows = doc["aborts"]["per_policy"]
    assert sum(r["aborted_attempts_by_class"].get("rig", 0) for r in rows.values()) == 1
    assert [r["aborted_attempts_by_cause"] for r in rows.values() if r["aborted_attempts_by_cause"]] == \
        [{"rig": {"arm bus": 1}}]
    assert sum(r["scored_failures"] for r in rows.values()) == 0
    assert not any("counts as" in w for w in doc["warnings"])


@pytest.mark.parametrize("cause, expected", [
    (DeviceFault.policy(RuntimeError("boom")), "policy"),
    (DeviceFault.arm("arm", OSError("USB unplugged")), "rig"),
    (DeviceFault.camera("front", OSError("no frame")), "rig"),
    (EmergencyStop("stop", cause="unsafe"), "operator_unsafe"),
    (EmergencyStop("stop", cause="misplaced"), "operator_misplaced"),
    (EmergencyStop("stop"), "operator_other"),
    (KeyboardInterrupt(), "interrupted"),
    (ValueError("something else"), "rig"),
])
def test_abort_classes(cause, expected):
    assert abort_class(cause) == expected


def test_a_servo_overload_under_the_policy_is_the_policy_s_a_voltage_alarm_the_rig_s():
    def wrapped(message: str) -> DeviceFault:
        try:
            try:
                raise ServoAlarm(message)
            except ServoAlarm as alarm:
                raise DeviceFault.arm("arm", alarm) from alarm
        except DeviceFault as fault:
            return fault

    assert abort_class(wrapped("servo alarm: elbow_flex (id 3): overload")) == "policy"
    assert abort_class(wrapped("servo alarm: gripper (id 6): supply voltage out of range")) == "rig"


def test_operator_stop_cause_from_the_prompt_answer():
    answers = {"1 it swung at the camera": ("unsafe", "unsafe motion: it swung at the camera"),
               "2": ("misplaced", "cube misplaced"), "3 phone rang": ("other", "other: phone rang"),
               "elbow": ("other", "elbow"), "": ("unanswered", ""), "  ": ("unanswered", "")}
    for answer, expected in answers.items():
        assert stop_cause(answer) == expected
    assert len(answers) == 6


def test_device_faults_survive_pickling():
    """A simulated episode's fault crosses from a worker process to the runner."""
    import pickle

    fault = pickle.loads(pickle.dumps(DeviceFault.policy(RuntimeError("x"))))
    assert fault.kind == "policy" and abort_class(fault) == "policy"


def test_abort_rate_test_against_scipy():
    """The section's Fisher p-values equal scipy's, Holm-adjusted (checked by hand for 3 policies)."""
    from orchestrator.analysis.outcomes import OutcomeSet, TrialOutcome
    from orchestrator.analysis.report.aborts import build_aborts

    aborted = {"A": 0, "B": 9, "C": 3}
    outcomes = []
    for p, k in aborted.items():
        for i in range(20):
            classes = ("policy",) if i < k else ()
            outcomes.append(TrialOutcome(layout=f"M{i}", repeat=0, policy=p, success=i >= k, slot=i,
                                         abort_classes=classes, settled="failure" if classes else None))
    data = OutcomeSet(outcomes=tuple(outcomes), policies=("A", "B", "C"), source="x", label_source="x",
                      abort_rules={"policy": "failure", "max_reruns": 3})
    section = build_aborts(data)
    raw = {(t.a, t.b): sps.fisher_exact([[aborted[t.a], 20 - aborted[t.a]], [aborted[t.b], 20 - aborted[t.b]]]).pvalue
           for t in section.tests}
    assert len(section.tests) == 3
    for t in section.tests:
        assert t.fisher_p == pytest.approx(raw[(t.a, t.b)], rel=1e-12)
    order = sorted(raw.values())
    holm = [min(1.0, max((3 - j) * order[j] for j in range(i + 1))) for i in range(3)]
    assert sorted(t.holm_p for t in section.tests) == pytest.approx(holm, rel=1e-12)
    assert [t for t in section.tests if (t.a, t.b) == ("A", "B")][0].holm_p <= 0.05
    warned = [w for w in section.warnings if "abort rates differ" in w]
    assert len(warned) == 1 and "between A and B: 0/20 vs 9/20" in warned[0]   # not A-C, not B-C


def test_judges_never_see_the_cause(raised):
    """A judge's queue holds episodes only (a trial scored by an abort has none), and the judge's
    sealed connection refuses the abort's class, rule and reason (read before sealing: the
    positive control)."""
    import sqlite3

    from orchestrator.judging.blinding import CampaignSource

    out, _ = raised
    source = CampaignSource(out, "ann")
    try:
        shown = source.episodes()
        assert len(shown) == 5
        assert "illegal memory access" not in repr(shown)
        for column in ("abort_class", "settles", "reason"):
            with pytest.raises(sqlite3.DatabaseError):
                source.store.conn.execute(f"SELECT {column} FROM attempts").fetchall()
    finally:
        source.close()
    with CampaignStore.open_readonly(out) as store:   # unsealed: the same query reads the cause
        assert "policy" in [r[0] for r in store.conn.execute("SELECT abort_class FROM attempts")]


@pytest.mark.lerobot
@pytest.mark.subprocess
def test_a_lerobot_policy_with_non_finite_actions_fails_its_trials_in_the_parallel_runner(tmp_path, saved_acts,
                                                                                         capsys):
    """A real LeRobot ACT checkpoint whose weights were poisoned with NaN, run by `orchestrator run
    --workers 2` (the parallel runner: its workers are fresh processes, and the fault crosses from
    one): every one of its trials ends in a non-finite action, classed `policy` and counted as its
    failure; A's trials run; the campaign completes and the report, text and JSON, says so with the
    cause (`policy: non-finite action 2`), not only the class. `run` and `report` in this process
    (`main`): a fresh `run` imported LeRobot's policies a third time (7-10 s of CPU) beside its two
    workers; the command lines are run fresh by tests/test_lerobot_cli_fresh.py and test_report.py."""
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    from support.campaign_files import two_mark_protocol
    from support.cli import run_main
    from support.repo import REPO

    shutil.copytree(saved_acts["sim"], tmp_path / "act_b")
    weights = next((tmp_path / "act_b").rglob("model.safetensors"))
    tensors = load_file(weights)
    for name, value in tensors.items():
        if value.is_floating_point():
            tensors[name] = torch.full_like(value, float("nan"))
    save_file(tensors, weights)
    protocol = two_mark_protocol(tmp_path, "{type: lerobot, path: ./act_b}")
    out = tmp_path / "c"
    run = run_main(capsys, "run", protocol, "--rig", REPO / "hardware" / "sim.yaml", "--out", out, "--workers", "2")
    assert run.code == 0, run.err[-2000:]
    assert "non-finite action" in run.out and "counted as a failure of the policy that ran" in run.out
    with CampaignStore.open_readonly(out) as store:
        trials = store.trials()
        aborted = [a for a in store.attempts() if a["status"] == "aborted"]
    b_trials = [t for t in trials if t.policy == "B"]
    assert all(t.state == "done" and t.episode_id is None for t in b_trials) and len(b_trials) == 2
    assert all(t.episode_id for t in trials if t.policy == "A")
    assert sorted((a["abort_class"], a["settles"]) for a in aborted) == [("policy", "failure")] * 2
    assert sorted(a["abort_cause"] for a in aborted) == ["non-finite action"] * 2
    capsys.readouterr()
    assert main(["report", str(out), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["aborts"]["per_policy"]["B"]["scored_failures"] == 2
    assert doc["policies"]["B"]["successes"] == 0 and doc["policies"]["B"]["trials"] == 2
    assert doc["aborts"]["per_policy"]["B"]["aborted_attempts_by_cause"] == {"policy": {"non-finite action": 2}}
    assert doc["aborts"]["per_policy"]["A"]["aborted_attempts_by_cause"] == {}
    assert main(["report", str(out)]) == 0          # the cause, not only the class
    section = capsys.readouterr().out.split("Aborted attempts\n")[1].split("\n\n")[0]
    (row,) = [ln for ln in section.splitlines() if ln.startswith("B ")]
    assert row.split()[-5:] == ["policy:", "non-finite", "action", "2", "none"], row   # causes, then answers


def test_the_plain_prompt_records_the_operator_s_reason_class():
    """After an emergency stop the plain prompt asks why, with the three reasons; the answer's
    class goes on the stop (`cause`) and so into the abort's class."""
    import io

    from orchestrator.design.protocol import Mark
    from orchestrator.run.console.prompt import PromptOperator
    from orchestrator.run.operator_protocol import ESTOP_PENDING, TrialCue

    cue = TrialCue(index=1, total=2, done_before=0, campaign_total=2, mark=Mark(id="M1", x=0.2, y=0.0), duration_s=1)
    seen = {}
    for answer, cause in (("1 it swung at the camera\n", "operator_unsafe"), ("2\n", "operator_misplaced"),
                          ("phone rang\n", "operator_other")):
        said: list[str] = []
        operator = PromptOperator(stdin=io.StringIO(answer), out=said.append)
        operator._stop = EmergencyStop(ESTOP_PENDING)
        operator.episode_ended(cue, None)
        assert any("1 = unsafe motion, 2 = cube misplaced, 3 = other" in s for s in said)
        seen[answer] = abort_class(operator._stop)
        assert seen[answer] == cause, (answer, operator._stop.cause)
    assert len(seen) == 3
    assert operator._stop.reason == f"{ESTOP_PENDING}: phone rang"


@pytest.mark.slow   # a tiny simulated campaign or two, over a second of CPU: the full run; the fast lane keeps this file's other campaigns
def test_a_trial_stopped_three_times_in_a_session_is_left_to_the_next_run_and_told_so(tmp_path, monkeypatch,
                                                                                      capsys):
    """Within one session a trial is re-queued after an abort up to MAX_ATTEMPTS_PER_SESSION times;
    the operator is told which (later in this session, or by the next run), and the next run
    completes it. Both messages must appear: the count guard of the first."""
    from orchestrator.run.operator_protocol import AutoOperator
    from orchestrator.run.sequential import MAX_ATTEMPTS_PER_SESSION

    marks, stops = [], []
    real_before = AutoOperator.before_trial

    def before_trial(self, cue):
        marks.append(cue.mark.id)
        return real_before(self, cue)

    def poll(self, elapsed_s):
        if marks[-1] == FAILING_MARK and elapsed_s > 0.2 and stopping:
            stops.append(marks[-1])
            raise EmergencyStop("stop (test)")

    monkeypatch.setattr(AutoOperator, "before_trial", before_trial)
    monkeypatch.setattr(AutoOperator, "poll", poll)
    out, stopping = tmp_path / "c", True
    protocol = _protocol(tmp_path, "aborts: {max_reruns: 10}\n")
    assert run_cli(out, "--workers", "1", protocol=protocol) == 3     # trials left: stopped, resumable
    said = capsys.readouterr().out
    assert said.count("re-run later in this session") == 2 * (MAX_ATTEMPTS_PER_SESSION - 1)   # two trials on the mark
    assert said.count(f"by the next `orchestrator run` (aborted {MAX_ATTEMPTS_PER_SESSION} times in this one)") == 2
    assert len(stops) == 2 * MAX_ATTEMPTS_PER_SESSION
    stopping = False
    assert run_cli(out, "--workers", "1", protocol=protocol) == 0
    with CampaignStore.open_readonly(out) as store:
        assert all(t.state == "done" and t.episode_id for t in store.trials())


@pytest.mark.slow
def test_a_simulation_worker_killed_mid_campaign_is_named_and_its_trials_rerun_on_new_workers(tmp_path, capsys):
    """`run --workers 2`: a worker is SIGKILLed (as the out-of-memory killer does) while episodes
    run. The session names the cause in one line, records the trials it was running as
    interrupted with that cause, re-runs them on new workers, and completes: every trial done
    exactly once. Before, the session ended with exit 1 on "BrokenProcessPool: A process in the
    process pool was terminated abruptly"."""
    import multiprocessing
    import os
    import signal
    import sqlite3
    import threading
    import time

    out = tmp_path / "c"
    killed: list[int] = []

    def kill_a_worker():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not killed:
            running = 0
            if (out / "campaign.db").exists():
                try:
                    with sqlite3.connect(f"file:{out / 'campaign.db'}?mode=ro", uri=True) as conn:
                        running = conn.execute("SELECT count(*) FROM attempts WHERE status = 'running'").fetchone()[0]
                except sqlite3.Error:
                    running = 0
            children = multiprocessing.active_children()
            if running and children:
                time.sleep(0.5)   # the stimulus: the kill lands 0.5 s into a running episode
                os.kill(children[0].pid, signal.SIGKILL)
                killed.append(children[0].pid)
            time.sleep(0.05)

    killer = threading.Thread(target=kill_a_worker, daemon=True)
    killer.start()
    code = run_cli(out, "--workers", "2", protocol=_protocol(tmp_path))
    killer.join(timeout=5)
    said = capsys.readouterr().out
    assert killed, "no worker was found to kill"
    assert code == 0, said
    assert "a simulation worker was ended by SIGKILL" in said and "will be re-run on new workers" in said, said
    with CampaignStore.open_readonly(out) as store:
        trials, attempts = store.trials(), store.attempts()
    assert len(trials) == 6 and all(t.state == "done" for t in trials)
    interrupted = [a for a in attempts if a["status"] == "aborted"]
    assert interrupted and all("ended by SIGKILL" in (a["reason"] or "") for a in interrupted), interrupted
    done = [a for a in attempts if a["status"] == "done"]
    assert sorted(a["slot"] for a in done) == sorted(t.slot for t in trials)   # each exactly once
