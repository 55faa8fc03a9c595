"""`orchestrator compare` with a campaign on the PostgreSQL store (`--store URL` per campaign, and
a suite file's `store:`): the same comparison as from the SQLite stores."""

from __future__ import annotations

import json

from support.cli import run_module
from support.compare_campaigns import make_suite


def test_compare_reads_a_campaign_on_the_server(pg_cluster, tmp_path):
    campaigns = make_suite(tmp_path)
    url = pg_cluster.new_database()
    moved = run_module("store", "migrate", campaigns[1], url)
    assert moved.code == 0, moved.err
    local = run_module("compare", *campaigns, "--format", "json", "--reps", "500")
    mixed = run_module("compare", *campaigns, "--store", "-", "--store", url, "--store", "-",
                       "--format", "json", "--reps", "500")
    assert local.code == 0 and mixed.code == 0, mixed.err
    a, b = json.loads(local.out), json.loads(mixed.out)
    assert a["methods"] == b["methods"] and a["paired"] == b["paired"] and a["leaderboard"] == b["leaderboard"]
    suite = tmp_path / "suite.yaml"
    suite.write_text("campaigns:\n" + "".join(
        f"  - {{path: {d}{', store: ' + repr(url) if i == 1 else ''}}}\n" for i, d in enumerate(campaigns)))
    from_suite = run_module("compare", suite, "--format", "json", "--reps", "500")
    assert from_suite.code == 0 and json.loads(from_suite.out)["methods"] == a["methods"], from_suite.err
    # positive control: the wrong database for that campaign is refused in one line
    wrong = run_module("compare", *campaigns, "--store", "-", "--store", pg_cluster.new_database(), "--store", "-")
    assert wrong.code == 2 and len(wrong.err_lines) == 1, wrong.err
