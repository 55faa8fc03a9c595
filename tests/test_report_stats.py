"""The report stays honest under repeats, early stopping and large samples: the
unit of analysis, the verdict's notes, the digits shown, the Cochran note. Every expected value
comes from an oracle (scipy/statsmodels, enumeration, an independent transcription) or from the
issue's own worked numbers, never from the code under test."""

from __future__ import annotations

import math
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from scipy import special
from statsmodels.stats.contingency_tables import cochrans_q

from orchestrator.analysis.outcomes import OutcomeSet, TrialOutcome
from orchestrator.analysis.outcomes_csv import load_outcomes_csv
from orchestrator.analysis.report import build_report, render, to_dict
from support.cli import run_module
from support.oracles import holm_oracle, mcnemar_p_oracle, newcombe_transcribed


def _outcomes(blocks: list[tuple[str, int, dict[str, int]]], **kw) -> OutcomeSet:
    """An in-memory outcome set from (mark, repeat, {policy: 0/1}) blocks, in run order."""
    outs, slot = [], 0
    for mark, rep, per in blocks:
        for p, ok in per.items():
            outs.append(TrialOutcome(layout=mark, repeat=rep, policy=p, success=bool(ok), slot=slot))
            slot += 1
    policies = tuple(dict.fromkeys(p for _, _, per in blocks for p in per))
    return OutcomeSet(outcomes=tuple(outs), policies=policies, source="memory", label_source="test", **kw)


def _table_blocks(cells: dict[tuple[int, int], int]) -> list:
    items = [k for k, n in cells.items() for _ in range(n)]
    return [(f"L{i:04d}", 0, {"A": a, "B": b}) for i, (a, b) in enumerate(items)]


def _ten_by_five_csv(path: Path) -> Path:
    """The issue's example: 10 marks x 5 repeats; A wins every repeat of 4 marks, both succeed
    on 3, both fail on 3."""
    rows = ["layout,policy,success,repeat"]
    for m in range(10):
        a, b = (1, 0) if m < 4 else (1, 1) if m < 7 else (0, 0)
        for r in range(5):
            rows += [f"M{m:02d},A,{a},{r}", f"M{m:02d},B,{b},{r}"]
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.mark.subprocess
def test_issue_ten_marks_five_repeats_reports_no_better(tmp_path):
    csv_path = _ten_by_five_csv(tmp_path / "repeats.csv")
    text = run_module("report", "--outcomes", csv_path)
    assert text.code == 0, text.err
    assert "better" not in text.out.split("Per mark")[0].lower().replace("a vs b", "")
    header = text.out.split("Success per policy")[0]
    assert "Unit of analysis: the mark (10 marks, 50 pairs" in header and "clustered McNemar mid-p" in header
    assert "paired over 10 marks (50 pairs)" in text.out
    # per-mark counts shown: a row per mark
    for m in range(10):
        assert re.search(rf"^M{m:02d}\s+5\s", text.out, re.M)
    doc = to_dict(build_report(load_outcomes_csv(csv_path)))
    c = doc["comparisons"][0]
    assert doc["analysis"]["unit"] == "mark" and c["unit"] == "mark" and not c["significant"]
    # 4 marks to 0: the sign test on marks, enumerated by hand: P(all 4 the same way) = 2/16
    assert c["clustered"]["exact_p"] == pytest.approx(2 / 16) and c["clustered"]["mid_p"] == pytest.approx(1 / 16)
    assert c["primary_p"] == pytest.approx(1 / 16) and c["holm_mid_p"] == pytest.approx(1 / 16)
    assert c["clustered"]["per_mark"]["M00"] == {"both": 0, "a_only": 5, "b_only": 0, "neither": 0}
    lo, hi = c["difference"]["ci95"]
    assert lo < 0 < hi and c["difference"]["method"] == "newcombe-clustered"
    # the pooled McNemar is still there, with its meaning unchanged (pairs as independent)
    assert c["mcnemar"]["exact_p"] == pytest.approx(mcnemar_p_oracle(20, 0)[0])


def test_one_pair_per_mark_is_the_layout_analysis():
    rng = np.random.default_rng(4)
    for _ in range(40):
        cells = {k: int(v) for k, v in zip([(1, 1), (1, 0), (0, 1), (0, 0)], rng.integers(0, 15, size=4), strict=True)}
        if sum(cells.values()) == 0:
            continue
        r = build_report(_outcomes(_table_blocks(cells)))
        (c,) = r.comparisons
        exact, mid = mcnemar_p_oracle(cells[(1, 0)], cells[(0, 1)])
        assert r.unit == "layout" and c.unit == "layout" and c.clustered is None
        assert c.primary_p == pytest.approx(mid, rel=1e-9, abs=1e-15)
        assert c.holm_exact_p == pytest.approx(exact, rel=1e-9, abs=1e-15)
        lo, hi = newcombe_transcribed(cells[(1, 1)], cells[(1, 0)], cells[(0, 1)], cells[(0, 0)])
        assert (c.difference.lo, c.difference.hi) == pytest.approx((max(lo, -1), min(hi, 1)), abs=1e-9)
        assert to_dict(r)["comparisons"][0]["difference"]["method"] == "newcombe"
        assert "Unit of analysis: the layout" in render(r, "text")


@pytest.mark.slow   # seconds of simulation or enumeration: the full run, not the fast lane
def test_simulated_repeats_campaigns_keep_the_false_positive_rate():
    """Through the whole report: 20 marks x 5 repeats, every mark with its own rates, policies
    equal on average. "better" in at most alpha + 2 SE of 200 campaigns (SE = sqrt(0.05 * 0.95
    / 200) = 0.015); counting repeats as layouts gave 0.144 in the issue. (1500 campaigns through
    `stats.clustered_mcnemar` in test_stats_clustered.py.)"""
    rng = np.random.default_rng(151)
    count, better = 200, 0
    for _ in range(count):
        base = rng.beta(2, 2, 20)
        eff = rng.normal(0, 0.25, 20)
        pa, pb = np.clip(base + eff / 2, 0, 1), np.clip(base - eff / 2, 0, 1)
        u = rng.random((20, 5))
        blocks = [(f"M{m}", r, {"A": int(u[m, r] < pa[m]), "B": int(u[m, r] < pb[m])})
                  for r in range(5) for m in range(20)]
        better += build_report(_outcomes(blocks)).comparisons[0].significant
    se = math.sqrt(0.05 * 0.95 / count)
    assert better / count <= 0.05 + 2 * se, better / count


def test_exact_p_quoted_beside_mid_p_across_alpha():
    # 5-0: mid-p 0.031 <= 0.05 < exact 0.0625 (scipy); 16-0 style size problem of mid-p
    exact, mid = mcnemar_p_oracle(5, 0)
    assert mid <= 0.05 < exact
    c = build_report(_outcomes(_table_blocks({(1, 1): 10, (1, 0): 5, (0, 0): 10}))).comparisons[0]
    assert c.significant and f"(exact p {exact:.3f}: the two fall on different sides of 0.05)" in c.verdict
    exact, mid = mcnemar_p_oracle(9, 1)   # both below alpha: no second p
    c = build_report(_outcomes(_table_blocks({(1, 1): 33, (1, 0): 9, (0, 1): 1, (0, 0): 7}))).comparisons[0]
    assert exact < 0.05 and "exact p" not in c.verdict


@pytest.mark.parametrize("table, better", [([[2, 4], [12, 37]], True), ([[0, 0], [2, 0]], False)])
def test_issue_examples_of_test_and_interval_disagreeing(table, better):
    (a, b), (c_, d) = table
    exact, mid = mcnemar_p_oracle(b, c_)
    lo, hi = newcombe_transcribed(a, b, c_, d)
    assert bool(mid <= 0.05) is better and bool(lo <= 0 <= hi) is better   # the disagreement, by the oracles
    r = build_report(_outcomes(_table_blocks({(1, 1): a, (1, 0): b, (0, 1): c_, (0, 0): d})))
    c = r.comparisons[0]
    assert c.significant is better
    assert len(c.notes) == 1
    assert ("still reaches 0" if better else "excludes 0 but the mid-p test does not reject") in c.notes[0]
    assert f"Note: {c.notes[0]}" in render(r, "text")


@pytest.mark.slow   # seconds of simulation or enumeration: the full run, not the fast lane
def test_disagreement_note_on_random_tables():
    """A note exactly when the oracles disagree: scipy's mid-p against the transcribed Newcombe."""
    rng = np.random.default_rng(33)
    for _ in range(150):
        a, b, c_, d = (int(x) for x in rng.integers(0, 12, size=4))
        if a + b + c_ + d == 0:
            continue
        _, mid = mcnemar_p_oracle(b, c_)
        lo, hi = newcombe_transcribed(a, b, c_, d)
        disagree = (mid <= 0.05) == (max(lo, -1) <= 0 <= min(hi, 1))
        comp = build_report(_outcomes(_table_blocks({(1, 1): a, (1, 0): b, (0, 1): c_, (0, 0): d}))).comparisons[0]
        assert bool(comp.notes) is bool(disagree), (a, b, c_, d, mid, lo, hi, comp.notes)


def _shown_interval(text: str) -> tuple[str, str, str]:
    num = r"([+-]?\d+(?:\.\d+)?)"
    m = re.search(rf"difference {num} points, 95% CI {num} to {num}", text)
    assert m, text
    return m.group(1), m.group(2), m.group(3)


def test_large_sample_digits_keep_bounds_apart():
    r = build_report(_outcomes(_table_blocks({(1, 1): 5000, (1, 0): 300, (0, 1): 200, (0, 0): 4500})))
    est, lo, hi = _shown_interval(r.comparisons[0].verdict)
    assert (est, lo, hi) == ("+1.00", "+0.56", "+1.44")          # the issue's figures
    low, high = newcombe_transcribed(5000, 300, 200, 4500)
    assert float(lo) == pytest.approx(100 * low, abs=0.005) and float(hi) == pytest.approx(100 * high, abs=0.005)
    assert "Difference A - B: +1.00 points, 95% CI +0.56 to +1.44" in render(r, "text")


def _check_digits(shown, truth):
    """Each shown value within half a unit of its last digit of the truth; as many distinct
    strings as distinct values."""
    decimals = len(shown[0].split(".")[1]) if "." in shown[0] else 0
    assert {len(x.split(".")[1]) if "." in x else 0 for x in shown} == {decimals}
    for s, t in zip(shown, truth, strict=True):
        assert float(s) == pytest.approx(t, abs=0.5 * 10 ** -decimals + 1e-9), (shown, truth)
    assert len(set(shown)) == len({round(t, 9) for t in truth}), (shown, truth)


@pytest.mark.slow   # seconds of simulation or enumeration: the full run, not the fast lane
def test_digits_on_random_tables_are_distinct_and_faithful():
    rng = np.random.default_rng(12)
    for _ in range(30):
        n = int(rng.choice([20, 200, 2000]))
        b, c_ = (int(x) for x in rng.integers(0, max(2, n // 10), size=2))
        a = int(rng.integers(0, n - b - c_ + 1))
        d = n - a - b - c_
        lo, hi = newcombe_transcribed(a, b, c_, d)
        truth = [100 * (b - c_) / n, 100 * max(lo, -1), 100 * min(hi, 1)]
        comp = build_report(_outcomes(_table_blocks({(1, 1): a, (1, 0): b, (0, 1): c_, (0, 0): d}))).comparisons[0]
        _check_digits(_shown_interval(comp.verdict), truth)


def test_points_on_random_triples():
    from orchestrator.analysis.report.format import points

    rng = np.random.default_rng(2)
    for _ in range(3000):
        est = rng.uniform(-1, 1)
        spread = 10 ** rng.uniform(-5, 0)      # gaps down to 1e-4 points; the cap is 6 decimals
        lo, hi = est - spread * rng.uniform(0.1, 1), est + spread * rng.uniform(0.1, 1)
        shown = points(est, lo, hi)
        _check_digits(shown, [100 * est, 100 * lo, 100 * hi])
        assert not any(x.startswith("-0") and float(x) == 0 for x in shown)


def test_cochran_note_beside_a_pairwise_better():
    counts = {(0, 0, 0): 4, (0, 0, 1): 5, (1, 0, 0): 4, (1, 0, 1): 2, (1, 1, 0): 3}
    rows = [k for k, n in counts.items() for _ in range(n)]
    x = np.array(rows)
    q = cochrans_q(x)
    mids = [mcnemar_p_oracle(int(((x[:, i] == 1) & (x[:, j] == 0)).sum()),
                             int(((x[:, i] == 0) & (x[:, j] == 1)).sum()))[1] for i, j in ((0, 1), (0, 2), (1, 2))]
    holm = holm_oracle(mids)
    assert q.pvalue > 0.05 and holm[0] <= 0.05          # the situation, by the oracles
    blocks = [(f"L{i:03d}", 0, dict(zip("ABC", row, strict=True))) for i, row in enumerate(rows)]
    r = build_report(_outcomes(blocks))
    assert r.cochran.p == pytest.approx(q.pvalue)
    assert [c.significant for c in r.comparisons] == [bool(h <= 0.05) for h in holm]
    assert len(r.notes) == 1 and "Cochran's Q does not reject" in r.notes[0] and "A vs B" in r.notes[0]
    assert to_dict(r)["notes"] == list(r.notes)
    assert f"Note: {r.notes[0]}" in render(r, "text")


def test_confidence_sequence_after_optional_stopping(tmp_path):
    data = _outcomes(_table_blocks({(1, 1): 20, (1, 0): 12, (0, 0): 5}))
    r = build_report(replace(data, stopping={"kind": "evalue", "max_layouts": 60}))
    c = r.comparisons[0]
    assert c.significant and c.sequence is not None
    text = render(r, "text")
    assert "not valid after optional stopping" in text and "anytime-valid 95% confidence sequence" in c.verdict
    # the sequence is wider than the fixed-n interval and holds the estimate
    assert c.sequence.lo <= c.difference.lo and c.sequence.hi >= c.difference.hi
    assert c.sequence.lo <= 12 / 37 <= c.sequence.hi
    cs = to_dict(r)["comparisons"][0]["confidence_sequence"]
    assert cs["difference"] == [c.sequence.lo, c.sequence.hi] and cs["level"] == 0.95
    fixed = build_report(data).comparisons[0]
    assert fixed.sequence is None and to_dict(build_report(data))["comparisons"][0]["confidence_sequence"] is None


def test_evalue_with_repeats_counts_marks():
    """With repeats the e-value is the Beta-mixture e-value of the discordant marks:
    E = B(1 + k, 1) / B(1, 1) / 0.5^k for k marks won by A and none by B (scipy's Beta function)."""
    from orchestrator.analysis.stopping import stopping_decision

    blocks = [(f"M{m}", r, {"A": 1, "B": 0}) for m in range(6) for r in range(4)]
    data = _outcomes(blocks, stopping={"kind": "evalue", "max_layouts": 60})
    want = special.beta(1 + 6, 1) / special.beta(1, 1) / 0.5 ** 6
    r = build_report(data)
    assert r.comparisons[0].evalue.e_value == pytest.approx(want)         # 2^6 / 7 = 9.1
    proto = {"policies": {"A": {}, "B": {}}, "analysis": {"alpha": 0.05, "stopping": {"kind": "evalue", "max_layouts": 60}}}
    decision = stopping_decision(list(data.outcomes), proto)
    assert decision.e_value == pytest.approx(want) and not decision.stop
    # a mark counts only once all its repeats are known
    partial = [replace(o, success=None) if (o.layout, o.repeat) == ("M5", 3) else o for o in data.outcomes]
    assert stopping_decision(partial, proto).e_value == pytest.approx(2 ** 5 / 6)


def test_csv_repeat_column_reaches_the_clustered_path(tmp_path):
    """The CSV loader keeps repeats apart, so the report sees 10 marks and 50 pairs."""
    data = load_outcomes_csv(_ten_by_five_csv(tmp_path / "r.csv"))
    assert len({o.layout for o in data.outcomes}) == 10 and len(data.pairs("A", "B")) == 50


@pytest.mark.subprocess
def test_campaign_with_repeats_is_analysed_by_mark(tmp_path):
    """A stored simulated campaign with `trials_per_layout: 3` (the runner's own schedule), read
    back by a fresh `orchestrator report` process: A wins every repeat of 4 of the 20 marks and
    both succeed elsewhere. Pooled, 12-0 pairs (mid-p 0.5^12); by mark, 4-0 (mid-p 1/16)."""
    from support.repo import REPO as ROOT
    from support.store_campaign import make_store_campaign

    text = (ROOT / "protocols" / "sim_demo.yaml").read_text()
    text = text.replace("layout: ../layouts/grid20.yaml", f"layout: {ROOT / 'layouts' / 'grid20.yaml'}")
    text = text.replace("trials_per_layout: 1", "trials_per_layout: 3")
    proto = tmp_path / "repeats.yaml"
    proto.write_text(text)
    winners = {"M01", "M05", "M09", "M13"}
    directory = make_store_campaign(tmp_path, judged=False, protocol=proto,
                                    success=lambda t: t.policy == "A" or t.mark_id not in winners)
    result = run_module("report", directory, "--judge", "physics")
    assert result.code == 0, result.err
    assert "Unit of analysis: the mark (20 marks, 60 pairs" in result.out
    assert "better" not in result.out.split("Success per policy")[0].replace("A vs B", "")
    _, pooled_mid = mcnemar_p_oracle(12, 0)
    assert pooled_mid < 0.001
    assert "sign-flip mid-p 0.062 (primary), exact 0.125" in result.out


def test_every_interval_of_the_difference_line_follows_one_digits_rule():
    """The Tango and Bonett-Price bounds were printed together, so two of them within a point of
    each other gave both intervals two decimals beside a Newcombe interval in whole points
    ("95% CI +17 to +61 (Newcombe); Tango +22.58 to +68.29"); each interval now takes its decimals
    from its own bounds and the estimate (docs/statistics.md, Digits). On each table the premise is
    checked on the intervals' own numbers: a Tango bound and a Bonett-Price bound under a point
    apart, every value of each interval (and 0) at least a point apart."""
    import re

    checked = 0
    for b, c_ in ((4, 1), (4, 2), (4, 3), (5, 1)):
        report = build_report(_outcomes(_table_blocks({(1, 1): 10, (1, 0): b, (0, 1): c_, (0, 0): 6})))
        t, bp, d = report.comparisons[0].tango, report.comparisons[0].bonett_price, report.comparisons[0].difference
        assert min(abs(t.lo - bp.lo), abs(t.hi - bp.hi)) < 0.01
        for iv in (t, bp):
            values = (d.estimate, iv.lo, iv.hi, 0.0)
            assert all(abs(x - y) >= 0.01 for i, x in enumerate(values) for y in values[i + 1:])
        line = next(x for x in render(report, "text").splitlines() if "Tango" in x)
        shown = re.search(r"Tango (\S+) to (\S+), Bonett-Price (\S+) to (\S+)$", line).groups()
        assert all("." not in x for x in shown), line
        assert [int(x) for x in shown] == [round(100 * v) for v in (t.lo, t.hi, bp.lo, bp.hi)], line
        checked += 1
    assert checked == 4
