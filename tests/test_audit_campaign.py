"""`orchestrator run` of a protocol with `judging: {auto: counted, audit: 0.2}` on the simulated
rig ends with a judge queue of only the episodes the `auto` rater was unsure of plus the audited
ones (a count guard against the store read with sqlite3); the judges' bundle carries exactly those
and never the audit's seed (a canary that occurs nowhere else; the positive control reads it
unsealed); `--contested-first` and bad audit settings in a protocol are refused with one line,
exit 2."""

from __future__ import annotations

import json
import sqlite3

import pytest

from orchestrator.design.audit import draw_audit
from support.audit_protocol import audited_protocol
from support.blind_canary import assert_judges_never_read
from support.cli import run_main, run_module
from support.tiny import RIG

# lifts within millimetres of the 4 cm success height: the rater is unsure of many of them
NEAR = "  A: {type: scripted, aim_noise_mm: 2, lift_m: 0.045}\n  B: {type: scripted, aim_noise_mm: 2, lift_m: 0.048}\n"


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    folder = tmp_path_factory.mktemp("audited")
    protocol = audited_protocol(folder / "protocol", 0.2, policies=NEAR, repeats=2)   # 12 trials, 2 audited
    run = run_module("run", protocol, "--rig", RIG, "--out", folder / "out", "--workers", "1", timeout=600)   # no pool
    assert run.code == 0 and "12/12 trials done" in run.out, run.err
    return folder / "out"


def _oracle(campaign) -> tuple[set[str], set[str], set[str], str]:
    with sqlite3.connect(campaign / "campaign.db") as conn:
        slots = dict(conn.execute("SELECT id, slot FROM episodes").fetchall())
        audit = conn.execute("SELECT slot, seed FROM audit ORDER BY draw_rank").fetchall()
        sure = {r[0] for r in conn.execute("SELECT episode_id FROM judgments WHERE judge = 'auto'"
                                           " AND retracted_at IS NULL AND label IN ('success', 'failure')")}
    conn.close()
    audited = {e for e, s in slots.items() if s in {slot for slot, _ in audit}}
    unsure = set(slots) - sure
    return audited | unsure, audited, unsure, audit[0][1]


def test_the_run_ends_with_a_queue_of_the_unsure_and_audited_episodes_only(campaign, tmp_path):
    from orchestrator.judging.blinding import CampaignSource

    queue, audited, unsure, seed = _oracle(campaign)
    assert len(audited) == 2 and draw_audit(0.2, 12, int(seed)).trial_ids   # round(0.2 x 12) = 2
    source = CampaignSource(campaign, "ann")
    try:
        shown = {e.id for e in source.episodes()}
    finally:
        source.close()
    assert shown == queue and len(shown) == len(audited | unsure) < 12     # count guard
    # the bundle for judges elsewhere holds the same episodes, and never the audit's seed (a
    # 128-bit number that occurs nowhere else); read unsealed, the column holds it
    read = assert_judges_never_read(campaign, "seed", seed, tmp_path / "bundle", episodes=len(queue), table="audit")
    assert read == [seed] * 2
    manifest = json.loads((tmp_path / "bundle" / "manifest.json").read_text())
    assert {e["id"] for e in manifest["episodes"]} == queue


def test_contested_first_is_refused_in_one_line_on_an_audited_campaign(campaign):
    refused = run_module("judge", campaign, "--judge", "ann", "--contested-first")
    assert refused.code == 2 and len(refused.err_lines) == 1, refused.err
    assert "--contested-first would put the episodes" in refused.err and "Traceback" not in refused.err


FRESH = "judging: {judges: 1, audit: 0.2}"   # refused by fresh processes; the other cases by `main` here


@pytest.mark.parametrize(("judging", "message"), [
    (FRESH, "audit 0.2 needs auto: counted and judges >= 1"),
    ("judging: {judges: 0, auto: counted, audit: 0.2}", "audit 0.2 needs auto: counted and judges >= 1"),
    ("judging: {judges: 1, auto: counted, audit: 1.5}", "less than or equal to 1"),
    ("judging: {judges: 1, auto: counted, audit: 0.01}", "audit 0.01 of the 6 scheduled trials draws none"),
])
def test_a_bad_audit_is_refused_in_one_line_with_exit_2(tmp_path, capsys, judging, message):
    """`validate` and `run` refuse each bad audit in one line, exit 2, writing no campaign: the
    first case from fresh `orchestrator` processes, the others in this process (`run_main`: the
    same exit code and stderr, without six interpreters' imports)."""
    protocol = audited_protocol(tmp_path, 0)
    text = protocol.read_text()
    line = next(x for x in text.splitlines() if x.startswith("judging:"))
    protocol.write_text(text.replace(line, judging))
    for argv in (("validate", protocol), ("run", protocol, "--rig", RIG, "--out", tmp_path / "out")):
        refused = run_module(*argv) if judging == FRESH else run_main(capsys, *argv)
        assert refused.code == 2 and len(refused.err_lines) == 1, (argv[0], refused.err)
        assert message in refused.err and "protocol.yaml:" in refused.err, refused.err
    assert not (tmp_path / "out" / "campaign.db").exists()
