"""The evidence chain on a PostgreSQL store (store/postgres_chain.py), on the session's private
server: a label edited with `psql` and a trial outcome edited through psycopg make `orchestrator
report --store` refuse the store naming the row; a judge's role extends the chain with its
labels and its invalid starts yet reads neither the chain nor a row digest; a SQLite campaign
copied to the server verifies there (the server's SQL digests equal chain.py's); an older server
store is chained from its migration."""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

import psycopg
import pytest

from support.cli import run_module
from support.pg_campaign import campaign_on_server, drop_the_audit
from support.postgres import pg_bin

JUDGE = "evidence_judge"   # roles are cluster-wide: a name of this file's own


def _campaign(pg_cluster, *, judge: bool = False) -> tuple[str, Path]:
    """A campaign on a new database with 4 episodes written through the store API."""
    from orchestrator.store.sqlite import new_episode_id

    videos = Path(tempfile.mkdtemp(prefix="pg-evidence-"))
    url, store = campaign_on_server(pg_cluster, videos)
    store.abort_attempt(store.begin_attempt(store.trials()[4].slot, new_episode_id()), "policy: nan", "policy")
    store.close()
    if judge:
        made = run_module("store", "add-judge", url, JUDGE)
        assert made.code == 0, made.err
    return url, videos


def _database(url: str) -> str:
    return url.split("@/")[1].split("?")[0]


def _report(url: str, videos: Path, *extra: str):
    return run_module("report", videos, "--store", url, *extra)


def test_a_label_edited_with_psql_is_refused_naming_the_row(pg_cluster):
    url, videos = _campaign(pg_cluster)
    before = _report(url, videos, "--format", "json")
    assert before.code == 0 and json.loads(before.out)["evidence"]["intact"], before.err
    with psycopg.connect(url) as conn:
        label = conn.execute("SELECT min(id) FROM judgments WHERE judge = 'physics'").fetchone()[0]
    edit = subprocess.run([str(pg_bin() / "psql"), "-X", "-v", "ON_ERROR_STOP=1", "-c",
                           f"UPDATE judgments SET label = CASE label WHEN 'success' THEN 'failure' ELSE 'success' END"
                           f" WHERE id = {label}", url], capture_output=True, text=True, timeout=60)
    assert edit.returncode == 0 and "UPDATE 1" in edit.stdout, edit.stderr
    after = _report(url, videos)
    assert after.code == 2 and len(after.err_lines) == 1, after.err
    assert f"the evidence chain breaks at judgments id {label}" in after.err and "server's campaign store" in after.err
    verified = run_module("verify", videos, "--store", url)
    assert verified.code == 2 and f"judgments id {label}" in verified.err
    anyway = _report(url, videos, "--allow-broken-chain")
    assert anyway.code == 0 and anyway.out.splitlines()[0].startswith("UNVERIFIED: 1 row ")
    assert f"judgments id {label}" in anyway.out.splitlines()[0]


def test_a_trial_outcome_edited_through_psycopg_is_refused_naming_the_row(pg_cluster):
    url, videos = _campaign(pg_cluster)
    assert run_module("verify", videos, "--store", url).code == 0          # the positive control
    with psycopg.connect(url) as conn:
        slot = conn.execute("SELECT min(slot) FROM episodes").fetchone()[0]
        conn.execute("UPDATE episodes SET physics_success = 1 - physics_success WHERE slot = %s", (slot,))
        assert conn.execute("UPDATE trials SET state = 'pending' WHERE slot = 4 AND state = 'aborted'").rowcount == 1
    after = _report(url, videos)
    assert after.code == 2 and "the evidence chain breaks at episodes id ep_" in after.err, after.err
    anyway = _report(url, videos, "--allow-broken-chain", "--format", "json")
    unverified = json.loads(anyway.out)["evidence"]["unverified"]
    assert len(unverified) == 2 and unverified[0].startswith("episodes id ") and unverified[1] == "trials slot 4"


def test_a_judges_role_extends_the_chain_and_reads_none_of_it(pg_cluster):
    from orchestrator.judging.blinding import CampaignSource
    from orchestrator.store.postgres import using_server
    from orchestrator.store.sqlite import CampaignStore

    url, videos = _campaign(pg_cluster, judge=True)
    judge_url = pg_cluster.url(_database(url), JUDGE)
    with using_server(url), CampaignStore.open_readonly(videos) as store:
        before = store.evidence
    with using_server(judge_url):
        source = CampaignSource(videos, JUDGE)
        assert source.store.evidence.head == before.head    # the judge's opening verified it
        episodes = source.episodes()
        label = source.add(episodes[0].id, "failure", "dropped")
        source.retract(label.id)
        source.add(episodes[0].id, "success")
        source.invalidate(episodes[1].id, "cube not on its mark")
        source.close()
    with using_server(url), CampaignStore.open_readonly(videos) as store:
        after = store.evidence
        assert after.intact and [e["kind"] for e in store.events()][-1] == "invalid_start"
    # 3 label writes; the invalid start: the episode's physics label, the episode, its attempt,
    # its trial, an event (the campaign had not finished: its record is unchanged)
    assert after.entries == before.entries + 3 + 5
    with psycopg.connect(judge_url, autocommit=True) as conn:
        for query in ("SELECT * FROM chain", "SELECT row_sha256 FROM chain",
                      "SELECT chain_row_sha('trials', '0')", "SELECT chain_row_expr('trials')",
                      "INSERT INTO chain VALUES (999, 'trials', '0', 'x', 0, 'x')"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"):
                conn.execute(query)
        assert conn.execute("SELECT unverified FROM chain_verify()").fetchone()[0] == []
        conn.execute("SELECT chain_append('trials', '0')")  # records only what the server holds
    with using_server(url), CampaignStore.open_readonly(videos) as store:
        assert store.evidence.entries == after.entries


def test_a_sqlite_campaign_copied_to_the_server_verifies_there(pg_cluster, tiny_reference, tmp_path):
    import shutil

    from orchestrator.store.postgres import using_server
    from orchestrator.store.postgres_copy import migrate_to_server
    from orchestrator.store.sqlite import CampaignStore

    local = tmp_path / "local"
    shutil.copytree(tiny_reference, local)
    with CampaignStore.open_readonly(local) as store:
        head = store.evidence.head
    url = pg_cluster.new_database()
    migrate_to_server(local, url)          # it recomputes the copied chain on the server first
    with using_server(url), CampaignStore.open_readonly(local) as store:
        assert store.evidence.intact and store.evidence.head == head


def test_an_older_server_store_is_chained_from_its_migration(pg_cluster):
    url, videos = _campaign(pg_cluster)
    with psycopg.connect(url) as conn:   # the store as schema 4 left it: no chain
        conn.execute("DROP TABLE chain")
        conn.execute("ALTER TABLE attempts DROP COLUMN operator_answer")   # schema 6's columns
        conn.execute("ALTER TABLE attempts DROP COLUMN answered_at")
        drop_the_audit(conn)   # schema 7
        conn.execute("ALTER TABLE judgments DROP COLUMN stage")   # schema 8
        conn.execute("ALTER TABLE judgments DROP COLUMN stage_times")
        conn.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
        rows = sum(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                   for t in ("campaign", "trials", "attempts", "episodes", "judgments", "events", "sessions"))
    report = _report(url, videos, "--format", "json")
    assert report.code == 0, report.err
    evidence = json.loads(report.out)["evidence"]
    assert evidence["intact"] and evidence["origin"] == "migrated" and evidence["entries"] == 1 + rows
    text = _report(url, videos)
    assert "(entry 1, migrated" in text.out, text.out
