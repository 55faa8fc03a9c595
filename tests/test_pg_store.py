"""The campaign store on a real PostgreSQL server (`--store postgresql://...`), every verb run
as a fresh `orchestrator` process on a store and videos another process wrote.

The server is the session's private cluster (conftest `pg_cluster`); nothing is mocked.
"""

from __future__ import annotations

import json
import sqlite3

import pytest

from orchestrator.store.schema import SCHEMA_VERSION
from support.cli import run_main, run_module
from support.tiny import PROTOCOL, RIG


def _outcomes(report_json: str) -> dict:
    data = json.loads(report_json)
    return data["policies"] if "policies" in data else data


@pytest.fixture(scope="module")
def on_server(pg_cluster, tmp_path_factory, tiny_reference):
    """The tiny campaign run on a PostgreSQL store (videos in a shared dir), and the same
    protocol run on SQLite."""
    url = pg_cluster.new_database()
    videos = tmp_path_factory.mktemp("shared") / "videos"
    run = run_module("run", PROTOCOL, "--rig", RIG, "--out", videos, "--store", url, timeout=300)
    assert run.code == 0, run.err
    assert "6/6 trials done" in run.out
    return url, videos, tiny_reference


def _physics_by_slot_sqlite(directory) -> dict[int, int]:
    with sqlite3.connect(directory / "campaign.db") as conn:
        return dict(conn.execute("SELECT slot, physics_success FROM episodes"))


def _physics_by_slot_server(url) -> dict[int, int]:
    import psycopg

    with psycopg.connect(url) as conn:
        return dict(conn.execute("SELECT slot, physics_success FROM episodes").fetchall())


def test_a_campaign_on_the_server_matches_sqlite_and_reports(on_server, capsys):
    url, videos, local = on_server
    assert _physics_by_slot_server(url) == _physics_by_slot_sqlite(local)
    assert not (videos / "campaign.db").exists() and any(videos.rglob("*.mp4"))
    served = run_module("report", videos, "--store", url, "--format", "json")
    embedded = run_main(capsys, "report", local, "--format", "json")   # the server's from a fresh process
    assert served.code == 0 and embedded.code == 0, served.err + embedded.err
    a, b = json.loads(served.out), json.loads(embedded.out)
    assert a["campaign"]["protocol_sha256"] == b["campaign"]["protocol_sha256"]
    assert a["policies"] == b["policies"] and a["comparisons"] == b["comparisons"]
    # a second run on the finished store resumes and has nothing left to do
    again = run_module("run", PROTOCOL, "--rig", RIG, "--out", videos, "--store", url)
    assert again.code == 0 and "campaign is complete" in again.out, again.err


@pytest.mark.slow
def test_doctor_bundle_import_labels_judge_and_export_on_the_server(on_server, tmp_path):
    from orchestrator.judging.bundle import BundleSource

    url, videos, _ = on_server
    doctor = run_module("doctor", "--rig", RIG, "--out", videos, "--store", url)
    assert doctor.code == 0 and f"campaign schema {SCHEMA_VERSION}, 6/6 trials done" in doctor.out, doctor.err
    bundle = tmp_path / "bundle"
    made = run_module("bundle", videos, "--out", bundle, "--store", url)
    assert made.code == 0 and "6 episodes" in made.out, made.err
    source = BundleSource(bundle, "remote")
    first = source.episodes()[0]
    source.add(first.id, "failure", "dropped", None)
    source.close()
    merged = run_module("import-labels", videos, bundle, "--store", url)
    assert merged.code == 0 and "imported 1 labels" in merged.out, merged.err
    report = json.loads(run_module("report", videos, "--store", url, "--judge", "remote",
                                   "--format", "json").out)
    assert report  # the remote judge's label is counted from the server
    judged = run_module("judge", videos, "--judge", "remote", "--store", url)
    assert judged.code == 2 and "interactive terminal" in judged.err  # opened; no TTY here
    exported = run_module("export", videos, "--repo-id", "lab/ab", "--root", tmp_path / "ds",
                          "--store", url, "--judge", "physics", timeout=300)
    assert exported.code == 0 and "exported 6 episodes" in exported.out, exported.err


def test_store_migrate_copies_and_verifies(on_server, pg_cluster, tmp_path, capsys):
    import shutil

    local = tmp_path / "campaign"
    shutil.copytree(on_server[2], local)  # migrate locks the campaign: leave the reference alone
    url = pg_cluster.new_database()
    moved = run_module("store", "migrate", local, url)
    assert moved.code == 0 and "6 trials" in moved.out and "match" in moved.out, moved.err
    assert _physics_by_slot_server(url) == _physics_by_slot_sqlite(local)
    from_file = run_main(capsys, "report", local, "--format", "json")   # `migrate` was the fresh process
    from_server = run_main(capsys, "report", local, "--store", url, "--format", "json")
    assert json.loads(from_file.out)["comparisons"] == json.loads(from_server.out)["comparisons"]
    again = run_module("store", "migrate", local, url)
    assert again.code == 2 and again.err_lines == [
        f"orchestrator: {url.replace('operator@', 'operator@')}: database is not empty; migrate into a new database"]


def test_store_errors_are_one_line(on_server, pg_cluster, tmp_path, capsys):
    """The first refusal from a fresh `orchestrator` process, the others from `main` in this one."""
    _, videos, _ = on_server
    wrong = run_module("report", videos, "--store", "mysql://x/y")
    assert wrong.code == 2 and len(wrong.err_lines) == 1 and "expected a PostgreSQL URL" in wrong.err
    nowhere = run_main(capsys, "report", videos, "--store", pg_cluster.url("no_such_db"))
    assert nowhere.code == 2 and len(nowhere.err_lines) == 1 and "cannot connect" in nowhere.err
    empty = run_main(capsys, "report", videos, "--store", pg_cluster.new_database())
    assert empty.code == 2 and len(empty.err_lines) == 1 and "no campaign in this database" in empty.err
    no_out = run_main(capsys, "run", PROTOCOL, "--rig", RIG, "--store", pg_cluster.new_database())
    assert no_out.code == 2 and "--store needs --out" in no_out.err
