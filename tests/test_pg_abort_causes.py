"""Abort causes on the PostgreSQL server store: a judge's role cannot read an
abort's cause (a planted canary; the owner and the report can: the positive control), the
server's `invalid_start` records its cause, and a server store of schema 3 gets its aborts'
causes and the `invalid_start` that records one when it is upgraded."""

from __future__ import annotations

import psycopg
import pytest

from orchestrator.cli import main
from orchestrator.store.abort_causes import abort_cause
from orchestrator.store.sqlite import CampaignStore, EpisodeRecord, new_episode_id
from support.pg_campaign import drop_the_audit
from support.tiny import PROTOCOL, RIG

CANARY = "canary-pg-cause-51e0b2"
NAN = "DeviceFault: policy: ValueError: non-finite action for gripper.pos"

# `invalid_start` as schema 3 installed it (store/postgres_blind.py before abort_cause).
SCHEMA_3_INVALID_START = """
CREATE OR REPLACE FUNCTION invalid_start(episode TEXT, why TEXT) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = public AS $$
DECLARE s BIGINT; a BIGINT;
BEGIN
  SELECT slot, attempt_id INTO s, a FROM episodes WHERE id = episode;
  IF NOT FOUND THEN RAISE EXCEPTION 'episode % is not in this campaign', episode; END IF;
  DELETE FROM judgments WHERE episode_id = episode;
  DELETE FROM episodes WHERE id = episode;
  UPDATE attempts SET status = 'aborted', reason = why, abort_class = 'invalid_start' WHERE id = a;
  UPDATE trials SET state = 'aborted', episode_id = NULL, done_at = NULL WHERE slot = s;
  UPDATE campaign SET finished_at = NULL, stop_reason = NULL WHERE stop_reason = 'complete';
  INSERT INTO events (at, kind, slot, message)
    VALUES (extract(epoch FROM clock_timestamp()), 'invalid_start', s,
            'episode ' || episode || ': ' || why || '; trial will be re-run');
END $$"""


def _campaign(pg_cluster, tmp_path, monkeypatch=None):
    """A server campaign: the first 3 trials recorded, the next two aborted by the policy (a
    NaN, and an exception whose recorded cause is CANARY when `monkeypatch` is given)."""
    import orchestrator.store.sqlite as sqlite_store
    from orchestrator.run.campaign import open_campaign

    if monkeypatch is not None:
        monkeypatch.setattr(sqlite_store, "abort_cause",
                            lambda cls, reason: CANARY if "boom" in (reason or "") else abort_cause(cls, reason))
    url = pg_cluster.new_database()
    videos = tmp_path / "videos"
    store = open_campaign(PROTOCOL, RIG, videos, store_url=url).store
    trials = store.trials()
    for trial in trials[:3]:
        episode_id = new_episode_id()
        store.finish_attempt(store.begin_attempt(trial.slot, episode_id), EpisodeRecord(
            episode_id=episode_id, frames=50, duration_s=5.0, cameras=["front"],
            files={"front": f"episodes/{episode_id}/front.mp4"}, physics_success=True))
    for trial, reason in zip(trials[3:5], (NAN, "DeviceFault: policy: RuntimeError: boom"), strict=True):
        store.abort_attempt(store.begin_attempt(trial.slot, new_episode_id()), reason, "policy", "failure")
    store.close()
    return url, videos


def _as_judge(pg_cluster, url: str, judge: str) -> str:
    """The URL of a new judge's role (roles are cluster-wide: a name per test)."""
    assert main(["store", "add-judge", url, judge]) == 0
    return pg_cluster.url(url.split("@/")[1].split("?")[0], judge)


def test_a_judge_s_role_never_reads_a_cause_the_owner_and_the_report_do(pg_cluster, tmp_path, monkeypatch, capsys):
    from orchestrator.judging.blinding import CampaignSource
    from orchestrator.store.postgres import using_server

    url, videos = _campaign(pg_cluster, tmp_path, monkeypatch)
    judge_url = _as_judge(pg_cluster, url, "cause_judge1")
    with psycopg.connect(judge_url, autocommit=True) as conn:
        for query in ("SELECT abort_cause FROM attempts", "SELECT * FROM attempts"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"):
                conn.execute(query)
        seen = [conn.execute(f"SELECT * FROM {view}").fetchall() for view in ("blind_episodes", "judging_info")]
    assert len(seen[0]) == 3 and len(seen[1]) == 1 and CANARY not in repr(seen)
    with using_server(judge_url):
        source = CampaignSource(videos, "cause_judge1")
        shown = source.episodes()
        source.close()
    assert len(shown) == 3 and CANARY not in repr(shown) and CANARY not in repr(source.info)
    with psycopg.connect(url) as owner:                  # the positive control
        causes = sorted(r[0] for r in owner.execute("SELECT abort_cause FROM attempts WHERE status = 'aborted'"))
    assert causes == sorted([CANARY, "non-finite action"])
    capsys.readouterr()
    assert main(["report", str(videos), "--store", url]) == 0
    assert f"policy: {CANARY} 1, non-finite action 1" in capsys.readouterr().out


def _downgrade_to_schema_3(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as owner:   # schema 3 had no evidence chain (schema 5)
        owner.execute("DROP TABLE chain")
        owner.execute("ALTER TABLE attempts DROP COLUMN abort_cause")
        owner.execute("ALTER TABLE attempts DROP COLUMN operator_answer")   # schema 6
        owner.execute("ALTER TABLE attempts DROP COLUMN answered_at")
        drop_the_audit(owner)   # schema 7
        owner.execute("ALTER TABLE judgments DROP COLUMN stage")   # schema 8
        owner.execute("ALTER TABLE judgments DROP COLUMN stage_times")
        owner.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
        owner.execute(SCHEMA_3_INVALID_START)


def test_a_schema_3_server_store_is_upgraded_with_causes_and_a_new_invalid_start(pg_cluster, tmp_path):
    """Upgraded, the old aborts get the causes their reasons read as, and the server's
    `invalid_start`, refreshed with the schema (the old one, checked in place, knows no cause),
    records `invalid start` when a judge's role sends a trial back."""
    from orchestrator.judging.blinding import CampaignSource
    from orchestrator.store.postgres import using_server

    url, videos = _campaign(pg_cluster, tmp_path)
    judge_url = _as_judge(pg_cluster, url, "cause_judge2")
    _downgrade_to_schema_3(url)
    with psycopg.connect(url) as owner:
        body = owner.execute("SELECT prosrc FROM pg_proc WHERE proname = 'invalid_start'").fetchone()[0]
        assert "abort_cause" not in body
    with using_server(url):
        store = CampaignStore.open_readonly(videos)
        version = store.conn.schema_version()
        aborted = sorted((a["reason"], a["abort_cause"]) for a in store.attempts() if a["status"] == "aborted")
        store.close()
    assert version >= 4
    assert aborted == [("DeviceFault: policy: RuntimeError: boom", "exception"), (NAN, "non-finite action")]
    with using_server(judge_url):
        source = CampaignSource(videos, "cause_judge2")
        victim = source.episodes()[0].id
        source.invalidate(victim, "cube not on its mark")
        source.close()
    with psycopg.connect(url) as owner:
        cls, cause = owner.execute("SELECT abort_class, abort_cause FROM attempts WHERE episode_id = %s",
                                   (victim,)).fetchone()
    assert (cls, cause) == ("invalid_start", "invalid start")


def test_a_server_store_keeps_the_operator_s_answers_and_a_schema_5_one_is_upgraded(pg_cluster, tmp_path, capsys):
    """As on SQLite (tests/test_abort_answers.py): an open question is listed, its answer kept
    once, chained, shown in the report per policy; a judge's role cannot read it (the role has
    no right on `attempts`: a planted canary); a server store of schema 5 gets the columns."""
    url, videos = _campaign(pg_cluster, tmp_path)
    with psycopg.connect(url, autocommit=True) as owner:     # schema 5 as it shipped: no answers
        owner.execute("ALTER TABLE attempts DROP COLUMN operator_answer")
        owner.execute("ALTER TABLE attempts DROP COLUMN answered_at")
        drop_the_audit(owner)   # schema 7
        owner.execute("ALTER TABLE judgments DROP COLUMN stage")   # schema 8
        owner.execute("ALTER TABLE judgments DROP COLUMN stage_times")
        owner.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")
    judge_url = _as_judge(pg_cluster, url, "answer_judge1")
    from orchestrator.store.postgres import using_server

    with using_server(url):
        store = CampaignStore.open_for_run(videos)
        try:
            trial = next(t for t in store.trials() if t.state == "pending")
            attempt = store.begin_attempt(trial.slot, new_episode_id())
            store.abort_attempt(attempt, "emergency stop by operator", "operator_unanswered", "failure")
            assert [q["id"] for q in store.questions()] == [attempt]
            store.answer_abort(attempt, f"unsafe motion: {CANARY}")
            store.answer_abort(attempt, "other: later")
            assert store.questions() == []
        finally:
            store.close()
    with psycopg.connect(url) as owner:                  # the positive control
        assert owner.execute("SELECT operator_answer FROM attempts WHERE id = %s", (attempt,)).fetchone() == (
            f"unsafe motion: {CANARY}",)
    with psycopg.connect(judge_url, autocommit=True) as conn, pytest.raises(
            psycopg.errors.InsufficientPrivilege, match="permission denied"):
        conn.execute("SELECT operator_answer FROM attempts")
    capsys.readouterr()
    assert main(["report", str(videos), "--store", url]) == 0
    out = capsys.readouterr().out
    assert "operator_unanswered: emergency stop: unsafe motion 1" in out and CANARY not in out
