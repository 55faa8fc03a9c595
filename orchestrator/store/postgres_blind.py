"""The server objects a PostgreSQL campaign store carries for blinding (pgroles.py grants them).

- `blind_episodes`, a view of the opaque episode id, frame count, duration, video paths and
  layout mark of every episode of the judges' queue (`blind_view.VIEW_SQL`: with an audit, the
  audited and the unsure ones; a view reads its tables, `audit` too, with its owner's rights);
- `judging_info`, one row: the campaign's random id (the judges' ordering salt), the success
  test in words, the failure modes and the marks, from the frozen protocol
  (`design.judge_facts`; the protocol text itself names policies and is not granted);
- `judging_rules` and the security-definer functions `judging_complete()`,
  `forget_episode_labels(episode)` and `invalid_start(episode, why)` (a judge sends a trial
  back for a re-run without any right on trials, attempts or episodes; the function returns
  nothing, so it tells the judge nothing about the schedule).
Installed when a campaign is created on a server or migrated there, refreshed by
`store add-judge` / `add-operator` and after a schema upgrade (`postgres.open_connection`).
"""

from __future__ import annotations

import json

from orchestrator.design.judge_facts import facts_of
from orchestrator.design.protocol import Judging, frozen_protocol_from
from orchestrator.store.blind_view import VIEW_SQL


def install_blind_objects(conn) -> None:
    """Create (or refresh) `blind_episodes` and `judging_info` on a server store's connection."""
    campaign_id, protocol_text, layout_text = conn.raw.execute(
        "SELECT id, protocol_text, layout_text FROM campaign").fetchone()
    frozen = frozen_protocol_from("campaign store", protocol_text, layout_text)
    facts = facts_of(frozen)
    conn.raw.execute("CREATE OR REPLACE VIEW blind_episodes WITH (security_barrier) AS " + VIEW_SQL)   # the queue
    conn.raw.execute("CREATE TABLE IF NOT EXISTS judging_info (ref TEXT NOT NULL, success_test TEXT NOT NULL,"
                     " failure_modes TEXT NOT NULL, marks TEXT NOT NULL)")
    # the success height for the judges' guides (a table made before it gets the column here)
    conn.raw.execute("ALTER TABLE judging_info ADD COLUMN IF NOT EXISTS min_height_m DOUBLE PRECISION")
    conn.raw.execute("DELETE FROM judging_info")
    conn.raw.execute("INSERT INTO judging_info (ref, success_test, failure_modes, marks, min_height_m)"
                     " VALUES (%s, %s, %s, %s, %s)",
                     (str(campaign_id), facts.success_test, json.dumps(list(facts.failure_modes)),
                      json.dumps({k: list(xy) for k, xy in facts.marks.items()}), facts.min_height_m))
    _install_judging_complete(conn, frozen.protocol.judging)


def _install_judging_complete(conn, judging: Judging) -> None:
    """`judging_rules` (the protocol's pre-registration) and `judging_complete()`, a
    security-definer function (it reads every label with the owner's rights): true unless the
    protocol hides labels from the operator and judging has not ended, i.e. the campaign has
    not finished (complete or stopped) or some episode of the judges' queue (`blind_episodes`: every
    episode, or with an audit the audited and unsure ones) has fewer than `judges` human labels
    (physics and auto are not judges; unsure does not count)."""
    hide, judges = bool(judging.hide_labels_from_operator), int(judging.judges)
    conn.raw.execute("CREATE TABLE IF NOT EXISTS judging_rules (hide BOOLEAN NOT NULL, judges BIGINT NOT NULL)")
    conn.raw.execute("DELETE FROM judging_rules")
    conn.raw.execute("INSERT INTO judging_rules VALUES (%s, %s)", (hide, judges))
    conn.raw.execute("""
CREATE OR REPLACE FUNCTION judging_complete() RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public AS $$
  SELECT NOT (SELECT hide FROM judging_rules)
      OR ((SELECT stop_reason FROM campaign) IS NOT NULL
          AND NOT EXISTS (
            SELECT 1 FROM blind_episodes e
            WHERE (SELECT count(DISTINCT j.judge) FROM judgments j
                   WHERE j.episode_id = e.id AND j.retracted_at IS NULL AND j.label <> 'unsure'
                     AND j.judge NOT IN ('physics', 'auto')) < (SELECT judges FROM judging_rules)))
$$""")
    # both chain every row they change (postgres_chain.py), checking it first
    conn.raw.execute("""
CREATE OR REPLACE FUNCTION forget_episode_labels(episode TEXT) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = public AS $$
DECLARE r RECORD;
BEGIN
  FOR r IN SELECT id FROM judgments WHERE episode_id = episode ORDER BY id LOOP
    PERFORM chain_guard('judgments', r.id::text);
    DELETE FROM judgments WHERE id = r.id;
    PERFORM chain_append('judgments', r.id::text);
  END LOOP;
END $$""")
    conn.raw.execute("""
CREATE OR REPLACE FUNCTION invalid_start(episode TEXT, why TEXT) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = public AS $$
DECLARE s BIGINT; a BIGINT; c TEXT; e BIGINT;
BEGIN
  SELECT slot, attempt_id INTO s, a FROM episodes WHERE id = episode;
  IF NOT FOUND THEN RAISE EXCEPTION 'episode % is not in this campaign', episode; END IF;
  SELECT id INTO c FROM campaign;
  PERFORM forget_episode_labels(episode);
  PERFORM chain_guard('episodes', episode), chain_guard('attempts', a::text), chain_guard('trials', s::text),
          chain_guard('campaign', c);
  DELETE FROM episodes WHERE id = episode;
  UPDATE attempts SET status = 'aborted', reason = why, abort_class = 'invalid_start',
    abort_cause = 'invalid start' WHERE id = a;   -- store.abort_causes: the class's one cause
  UPDATE trials SET state = 'aborted', episode_id = NULL, done_at = NULL WHERE slot = s;
  UPDATE campaign SET finished_at = NULL, stop_reason = NULL WHERE stop_reason = 'complete';
  INSERT INTO events (at, kind, slot, message)
    VALUES (extract(epoch FROM clock_timestamp()), 'invalid_start', s,
            'episode ' || episode || ': ' || why || '; trial will be re-run') RETURNING id INTO e;
  PERFORM chain_append('episodes', episode), chain_append('attempts', a::text), chain_append('trials', s::text),
          chain_append('campaign', c), chain_append('events', e::text);
END $$""")
    conn.raw.execute("REVOKE ALL ON FUNCTION judging_complete(), forget_episode_labels(TEXT),"
                     " invalid_start(TEXT, TEXT) FROM PUBLIC")
