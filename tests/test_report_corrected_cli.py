"""`orchestrator report` on a campaign store with a pre-registered audit (`judging: {auto:
counted, audit: 0.2}`), the first JSON from a fresh process, the rest in this process (`run_main`:
the same command without an interpreter's imports each): the verdict rests on the rater's labels
corrected by the audit at the mark, with kappa on the audit and people's labels per episode; a
rater wrong beyond the bound is not counted."""

from __future__ import annotations

import json

from support.cli import run_main, run_module
from support.store_campaign import make_audited_campaign

BASIS = "the rater's labels on every episode corrected by the audit's human labels"


def test_report_of_an_audited_campaign(tmp_path, capsys):
    directory = make_audited_campaign(tmp_path)
    res = run_module("report", directory, "--format", "json")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    corrected = doc["corrected"]
    assert corrected["decides"] and corrected["rater_counted"] and corrected["audit"]["size"] == 16   # 0.2 x 80
    assert corrected["audit"]["labelled"] == 16 and corrected["audit"]["disagreements"] == 0
    (pair,) = corrected["comparisons"]
    assert pair["significant"] and pair["marks"] == 20 and pair["verdict"] == doc["verdict"]
    assert doc["verdict"].startswith("A better than B") and BASIS in doc["verdict"] and "unit: marks" in doc["verdict"]
    # people labelled the unsure fifth and the audit's other trials: fewer than half the episodes
    assert corrected["episodes"] == 80 and 16 <= corrected["labelled_by_people"] < 40
    text = run_main(capsys, "report", directory)
    assert text.code == 0, text.err
    assert "Corrected by the audit (decides)" in text.out and "The rater against people on the audit: kappa" in text.out
    assert f"People labelled {corrected['labelled_by_people']} of 80 episodes" in text.out


def test_report_falls_back_when_the_rater_disagrees_beyond_the_bound(tmp_path, capsys):
    directory = make_audited_campaign(tmp_path, wrong_every=3)
    res = run_main(capsys, "report", directory, "--format", "json")
    assert res.code == 0, res.err
    corrected = json.loads(res.out)["corrected"]
    assert not corrected["rater_counted"] and corrected["estimator"] == "human-only (ipw)"
    assert corrected["audit"]["disagreements"] > 0.1 * corrected["audit"]["rated"]
    assert "the rater cannot be counted" in json.loads(res.out)["verdict"]
