"""The evidence chain from the command line: a label or a trial outcome edited with the sqlite3
module (as `sqlite3 campaign.db` would) makes `orchestrator report` refuse the store, exit 2, in
one line naming the row; `--allow-broken-chain` reads it and says so in its first line;
`orchestrator verify` passes on the untouched campaign and fails on the edited one. Every verb
runs in a fresh process on a campaign another process wrote (the `tiny_reference` run); for the
second and third edits, in this process (`run_main`: the same exit codes and lines, without six
interpreters' imports)."""

from __future__ import annotations

import functools
import json
import shutil
import sqlite3

import pytest

from support.cli import run_main, run_module


@pytest.fixture
def copy(tiny_reference, tmp_path):
    target = tmp_path / "campaign"
    shutil.copytree(tiny_reference, target)
    return target


def _edit(directory, sql: str) -> None:
    """One row changed by another program, as `sqlite3 campaign.db "UPDATE ..."` changes it."""
    with sqlite3.connect(directory / "campaign.db") as conn:
        assert conn.execute(sql).rowcount == 1
    conn.close()


def test_report_and_verify_pass_on_the_untouched_campaign(copy):
    verified = run_module("verify", copy)
    assert verified.code == 0 and "evidence chain intact" in verified.out and "chained from the start" in verified.out
    report = run_module("report", copy, "--format", "json")
    assert report.code == 0, report.err
    evidence = json.loads(report.out)["evidence"]
    assert evidence["intact"] and evidence["unverified"] == [] and evidence["head"] in verified.out
    text = run_module("report", copy)
    assert text.out.startswith("Report: ") and f"Evidence: chain head {evidence['head']}" in text.out


@pytest.mark.parametrize("what, sql, named", [
    ("a label", "UPDATE judgments SET label = CASE label WHEN 'success' THEN 'failure' ELSE 'success' END"
     " WHERE id = (SELECT min(id) FROM judgments WHERE judge = 'physics')", "judgments id "),
    ("a trial outcome", "UPDATE episodes SET physics_success = 1 - physics_success"
     " WHERE slot = (SELECT min(slot) FROM episodes)", "episodes id ep_"),
    ("a trial's state", "UPDATE trials SET state = 'pending' WHERE slot = 4", "trials slot 4"),
])
def test_an_edit_with_sqlite3_is_refused_naming_the_row(copy, capsys, what, sql, named):
    run = run_module if what == "a label" else functools.partial(run_main, capsys)
    with sqlite3.connect(copy / "campaign.db") as conn:
        before = conn.execute("SELECT count(*) FROM chain").fetchone()[0]
    conn.close()
    _edit(copy, sql)
    report = run("report", copy)
    assert report.code == 2 and report.out == "", what
    assert len(report.err_lines) == 1, report.err
    assert f"the evidence chain breaks at {named}" in report.err and "campaign.db" in report.err, report.err
    verified = run("verify", copy)
    assert verified.code == 2 and len(verified.err_lines) == 1 and named in verified.err, verified.err
    read_anyway = run("report", copy, "--allow-broken-chain")
    assert read_anyway.code == 0, read_anyway.err
    first = read_anyway.out.splitlines()[0]
    assert first.startswith("UNVERIFIED: 1 row ") and named in first, first
    with sqlite3.connect(copy / "campaign.db") as conn:   # reading wrote nothing
        assert conn.execute("SELECT count(*) FROM chain").fetchone()[0] == before
    conn.close()


def test_export_and_judging_refuse_a_broken_chain(copy, tmp_path):
    _edit(copy, "UPDATE trials SET policy = 'A' WHERE slot = (SELECT min(slot) FROM trials WHERE policy = 'B')")
    for argv in (("bundle", copy, "--out", tmp_path / "bundle"), ("judge", copy, "--judge", "auto"),
                 ("export", copy, "--repo-id", "user/x", "--root", tmp_path / "dataset")):
        done = run_module(*argv)
        assert done.code == 2 and "the evidence chain breaks at trials slot" in done.err, (argv, done.err)
    assert not (tmp_path / "bundle").exists() and not (tmp_path / "dataset").exists()
