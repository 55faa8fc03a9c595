"""The operator's later word on an abort (schema 6, `store/abort_answers.py`) and the limit on
interruptions, on the tiny simulated campaign (in-process, seconds).

An answer is kept beside its abort (chained, with an event), never changes how the abort
counted, is shown in the report per policy, and a judge never reads it (a planted canary; the
positive control: the report shows it). A store of schema 5 opens as schema 6 with its evidence
chain intact. A trial interrupted more often than `aborts.max_interruptions` is left out; one
interrupted exactly that often is re-run (the positive control)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from orchestrator.cli import main
from orchestrator.run.abort_questions import alarm_answer, of_station, question_line, stop_answer
from orchestrator.store import chain
from orchestrator.store.schema import SCHEMA_VERSION
from orchestrator.store.sqlite import CampaignStore, new_episode_id
from support.blind_canary import assert_judges_never_read
from support.tiny import DATA, PROTOCOL, run_cli

CANARY = "canary-answer-3d81f0"
UNANSWERED = "emergency stop by operator"
OVERLOAD = "DeviceFault: arm /dev/ttyACM0: ServoAlarm: servo alarm: elbow_flex (id 3): overload"


def _protocol(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "protocol.yaml"
    path.write_text(PROTOCOL.read_text().replace("layout: tiny_layout.yaml", f"layout: {DATA / 'tiny_layout.yaml'}")
                    + extra)
    return path


@pytest.fixture(scope="module")
def answered(tmp_path_factory) -> tuple[Path, dict]:
    """The tiny campaign, run to its end after two aborts planted on its first two trials: a stop
    left unanswered (the policy's failure by default) and a servo overload (also), the first
    answered with CANARY, the second left open. Returns the campaign and the two trials' policies.
    Built once for the file (two campaign runs, about a second of CPU): its tests only read it."""
    tmp_path = tmp_path_factory.mktemp("answered")
    out = tmp_path / "c"
    assert run_cli(out, "--workers", "1", "--stop-after", "0", protocol=_protocol(tmp_path)) == 0
    with CampaignStore.open_for_run(out) as store:
        first, second = store.trials()[:2]
        ids = [store.begin_attempt(t.slot, new_episode_id()) for t in (first, second)]
        store.abort_attempt(ids[0], UNANSWERED, "operator_unanswered", "failure")
        store.abort_attempt(ids[1], OVERLOAD, "policy", "failure")
        asked = store.questions()
        assert [(q["id"], q["abort_class"], q["abort_cause"]) for q in asked] == [
            (ids[0], "operator_unanswered", "emergency stop"), (ids[1], "policy", "overload")]
        store.answer_abort(ids[0], f"unsafe motion: {CANARY}")
        store.answer_abort(ids[0], "other: a second answer")          # the first answer stays
        assert [q["id"] for q in store.questions()] == [ids[1]]
    assert run_cli(out, "--workers", "1", protocol=_protocol(tmp_path)) == 0
    return out, {"unanswered": first.policy, "overload": second.policy}


def test_an_answer_is_kept_beside_its_abort_and_shown_per_policy_it_never_changes_how_it_counted(answered, capsys):
    out, policy = answered
    with CampaignStore.open_readonly(out) as store:
        assert store.evidence.intact
        rows = [a for a in store.attempts() if a["status"] == "aborted"]
        events = [e["message"] for e in store.events() if e["kind"] == "abort_answered"]
    assert [(a["settles"], a["operator_answer"]) for a in rows] == [("failure", f"unsafe motion: {CANARY}"),
                                                                   ("failure", None)]
    assert len(events) == 1 and CANARY in events[0]
    capsys.readouterr()
    assert main(["report", str(out), "--format", "json"]) == 0
    per_policy = json.loads(capsys.readouterr().out)["aborts"]["per_policy"]
    answers = {p: row["operator_answers"] for p, row in per_policy.items()}
    expected = {policy["unanswered"]: {"operator_unanswered: emergency stop": {"unsafe motion": 1}}}
    expected.setdefault(policy["overload"], {})["policy: overload"] = {"not answered yet": 1}
    assert {p: a for p, a in answers.items() if a} == expected
    assert sum(row["scored_failures"] for row in per_policy.values()) == 2
    assert main(["report", str(out)]) == 0
    assert "operator_unanswered: emergency stop: unsafe motion 1" in capsys.readouterr().out


def test_a_judge_never_reads_an_answer_the_report_does(answered, tmp_path):
    out, _ = answered
    values = assert_judges_never_read(out, "operator_answer", CANARY, tmp_path / "bundle")
    assert f"unsafe motion: {CANARY}" in values

def test_a_schema_5_store_opens_as_schema_6_with_its_chain_intact(tmp_path):
    out = tmp_path / "c"
    assert run_cli(out, "--workers", "1", "--stop-after", "1", protocol=_protocol(tmp_path)) == 0
    with CampaignStore.open_for_run(out) as store:
        trial = next(t for t in store.trials() if t.state == "pending")
        store.abort_attempt(store.begin_attempt(trial.slot, new_episode_id()), OVERLOAD, "policy", "failure")
        with store.transaction() as c:   # schema 5 kept no progress ladder: its labels had none (schema 8)
            for (label_id,) in c.execute("SELECT id FROM judgments").fetchall():
                with chain.change(c, "judgments", label_id):
                    c.execute("UPDATE judgments SET stage = NULL, stage_times = NULL WHERE id = ?", (label_id,))
    raw = sqlite3.connect(out / "campaign.db")   # the store as schema 5 left it (its DDL had no such columns)
    raw.execute("ALTER TABLE attempts DROP COLUMN operator_answer")
    raw.execute("ALTER TABLE attempts DROP COLUMN answered_at")
    raw.execute("DROP TABLE audit")   # schema 7
    raw.execute("ALTER TABLE judgments DROP COLUMN stage")
    raw.execute("ALTER TABLE judgments DROP COLUMN stage_times")
    raw.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")
    raw.execute("PRAGMA user_version = 5")
    raw.commit()
    raw.close()
    with CampaignStore.open_for_run(out) as store:
        assert store.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION   # 6, then 7 and 8 on
        (q,) = store.questions()
        store.answer_abort(q["id"], "the hardware (supply, cable, servo)")
        assert store.questions() == []
    with CampaignStore.open_readonly(out) as store:   # refused if the chain did not verify
        assert store.evidence.intact
        assert [a["operator_answer"] for a in store.attempts() if a["status"] == "aborted"] == [
            "the hardware (supply, cable, servo)"]


@pytest.mark.slow   # a tiny simulated campaign or two, over a second of CPU: the full run; the fast lane keeps this file's other campaigns
def test_interruptions_past_the_pre_registered_limit_leave_the_trial_out(tmp_path):
    protocol = _protocol(tmp_path, "aborts: {max_interruptions: 2}\n")
    out = tmp_path / "c"
    assert run_cli(out, "--workers", "1", "--stop-after", "0", protocol=protocol) == 0
    with CampaignStore.open_for_run(out) as store:
        past, at = store.trials()[:2]
        for trial, times in ((past, 3), (at, 2)):
            for _ in range(times):
                store.abort_attempt(store.begin_attempt(trial.slot, new_episode_id()),
                                    "interrupted by the user (Ctrl-C)", "interrupted")
    assert run_cli(out, "--workers", "1", protocol=protocol) == 0
    with CampaignStore.open_readonly(out) as store:
        trials = {t.slot: t for t in store.trials()}
        settles = [a["settles"] for a in store.attempts() if a["slot"] == past.slot]
    assert trials[past.slot].state == "done" and trials[past.slot].episode_id is None
    assert settles == [None, None, "excluded"]
    assert trials[at.slot].state == "done" and trials[at.slot].episode_id   # the positive control: re-run


def test_answers_read_as_at_the_stop_s_prompt_and_the_questions_name_no_policy():
    assert stop_answer("1 it swung") == "unsafe motion: it swung" and stop_answer("  ") is None
    assert alarm_answer("h the cable") == "the hardware (supply, cable, servo): the cable"
    assert alarm_answer("?") == "not known" and alarm_answer("x") is None and alarm_answer("") is None
    q = {"slot": 4, "mark_id": "M07", "ended_at": None, "abort_class": "operator_unanswered",
         "abort_cause": "interrupt"}
    line, _ = question_line(q)
    assert line.startswith("BEFORE ANYTHING MOVES: trial 5 (mark M07)") and "policy" not in line
    line, read = question_line({**q, "abort_class": "policy", "abort_cause": "overload"})
    assert "servo overload" in line and read is alarm_answer


def test_a_station_owns_the_aborts_of_its_ended_sessions_and_of_its_last_process_s_killed_one():
    """Sessions as the store keeps them: `first` ended one (labelled), then was killed in
    another (no end, no outcome: only its host and pid); `second` ended one, and a killed
    session of another process is nobody's in particular (a plain `run` asks about it)."""
    sessions = [
        {"started_at": 10.0, "ended_at": 20.0, "outcome": "ended (station first)", "host": "a", "pid": 1},
        {"started_at": 30.0, "ended_at": 40.0, "outcome": "interrupted (station second)", "host": "b", "pid": 2},
        {"started_at": 50.0, "ended_at": None, "outcome": None, "host": "a", "pid": 3},     # first, killed
        {"started_at": 55.0, "ended_at": None, "outcome": None, "host": "b", "pid": 4},     # another process
    ]
    at = {"first ended": 15.0, "second ended": 35.0, "first killed": 52.0, "between": 25.0}
    first = of_station(sessions, "first", ("a", 3))
    second = of_station(sessions, "second", ("b", 2))
    owned = {name: [k for k, t in at.items() if asks({"ended_at": t})] for name, asks in
             (("first", first), ("second", second), ("first, no process", of_station(sessions, "first")))}
    assert owned == {"first": ["first ended", "first killed"], "second": ["second ended"],
                     "first, no process": ["first ended"]}, owned
    assert not first({"ended_at": None})
