"""The report's words agree with the test that decides: one test per
wording fix, each failing on the wording it replaces."""

from __future__ import annotations

import pytest

from orchestrator.analysis import stats
from orchestrator.analysis.outcomes import OutcomeSet, TrialOutcome
from orchestrator.analysis.report import build_report
from orchestrator.analysis.report.format import points
from support.oracles import holm_oracle


def _data(rows, policies=("A", "B"), **kw) -> OutcomeSet:
    outs, slot = [], 0
    for i, vals in enumerate(rows):
        for p, ok in zip(policies, vals, strict=True):
            outs.append(TrialOutcome(layout=f"L{i:03d}", repeat=0, policy=p, success=bool(ok), slot=slot))
            slot += 1
    return OutcomeSet(outcomes=tuple(outs), policies=policies, source="memory", label_source="test", **kw)


def _rows(cells: dict[tuple, int]) -> list[tuple]:
    return [k for k, n in cells.items() for _ in range(n)]


def test_a_bound_just_below_zero_never_prints_as_zero():
    """"95% CI -78 to 0" beside "the interval excludes 0" (the bound was -0.36 points)."""
    lo, hi = points(-0.78, -0.0036)
    assert hi == "-0.36" and lo == "-78.00"
    assert points(-0.78, 0.0) == ["-78", "0"]          # a bound that is 0 prints as 0
    assert points(0.16, 0.03, 0.29) == ["+16", "+3", "+29"]


def test_with_three_policies_the_disagreement_note_names_holm():
    """A vs B: mid-p below 0.05 and the Newcombe interval excluding 0, but not after Holm over 3
    comparisons: the note says the adjustment is the cause, not "the two methods"."""
    rows = _rows({(1, 0, 1): 9, (0, 1, 1): 2, (1, 1, 1): 20, (0, 0, 0): 9})
    r = build_report(_data(rows, ("A", "B", "C")))
    ab = r.comparisons[0]
    mid = stats.mcnemar(9, 2).mid_p
    assert mid <= 0.05 and not ab.significant and ab.difference.lo > 0
    assert holm_oracle([c.primary_p for c in r.comparisons])[0] > 0.05
    (note,) = [n for n in ab.notes if "excludes 0" in n]
    assert "Holm's adjustment for the 3 comparisons" in note and "the two methods" not in note


def test_the_holm_adjusted_exact_p_is_labelled_so():
    """Quoted beside a Holm-adjusted mid-p, the other McNemar p is Holm-adjusted too and says so."""
    rows = _rows({(1, 0, 1): 10, (0, 1, 1): 2, (1, 1, 1): 20, (0, 0, 1): 8})
    r = build_report(_data(rows, ("A", "B", "C")))
    c = r.comparisons[0]
    if (c.holm_mid_p <= 0.05) != (c.holm_exact_p <= 0.05):
        assert "Holm-adjusted exact p" in c.verdict
    checked = 0
    for b_only in range(0, 8):
        rows = _rows({(1, 0, 0): 13, (0, 1, 0): b_only, (1, 1, 1): 20, (0, 0, 1): 8})
        c = build_report(_data(rows, ("A", "B", "C"))).comparisons[0]
        if (c.holm_mid_p <= 0.05) != (c.holm_exact_p <= 0.05):
            assert "(Holm-adjusted exact p" in c.verdict, c.verdict
            checked += 1
    assert checked >= 1


def test_the_evalue_rule_s_level_is_stated_once_and_right_with_three_policies():
    """With 3 policies the rule's threshold is 3/alpha: the verdict's confidence sequence and the
    note both say 98.33%, never 95%."""
    rows = _rows({(1, 0, 0): 16, (1, 1, 1): 10, (0, 0, 0): 6})
    r = build_report(_data(rows, ("A", "B", "C"), stopping={"kind": "evalue", "max_layouts": 100}))
    c = r.comparisons[0]
    assert c.significant and "98.33% confidence sequence" in c.verdict
    assert all("95%" not in n for n in c.notes) and any("98.33%" in n for n in c.notes)
    assert c.share.lo > 0.5                          # the rule's interval agrees with its decision


@pytest.mark.slow   # seconds of simulation or enumeration: the full run, not the fast lane
def test_the_interval_after_an_early_stop_agrees_with_the_rule_on_every_table():
    """For every split of up to 16 discordant layouts: the verdict's interval excludes 50 %
    exactly when the e-value rule rejects (no "borderline" note ever)."""
    count = 0
    for b in range(0, 17):
        for c in range(0, 17 - b):
            rows = _rows({(1, 0): b, (0, 1): c, (1, 1): 5})
            comp = build_report(_data(rows, stopping={"kind": "evalue", "max_layouts": 100})).comparisons[0]
            rejects = stats.evalue_discordant(b, c).reject
            assert comp.significant == rejects
            assert (not (comp.share.lo <= 0.5 <= comp.share.hi)) == rejects, (b, c, comp.share)
            assert not any("borderline" in n for n in comp.notes)
            count += 1
    assert count == 153


def test_under_the_evalue_rule_the_reach_line_is_the_rule_s_own():
    """'Smallest exact p they could give' is McNemar's floor; under the e-value rule the deciding
    test's reach is the largest e-value its discordant units could give: all n on one side,
    B(1 + n, 1) / B(1, 1) / 0.5^n = 2^n / (n + 1) with the uniform prior (checked in closed form)."""
    from orchestrator.analysis.report import render_text, to_dict

    count = 0
    for n in (0, 1, 3, 6, 9):
        rows = _rows({(1, 0): n // 2, (0, 1): n - n // 2, (1, 1): 4})
        r = build_report(_data(rows, stopping={"kind": "evalue", "max_layouts": 100}))
        c = r.comparisons[0]
        assert abs(c.deciding_max_e - 2 ** n / (n + 1)) <= 1e-9 * max(1.0, c.deciding_max_e)
        text = render_text(r)
        assert f"the largest e-value the rule's {n} discordant units could give is {c.deciding_max_e:.3g}" in text
        assert "smallest exact p they could give" not in text
        assert to_dict(r)["comparisons"][0]["deciding_max_evalue"] == c.deciding_max_e
        count += 1
    assert count == 5
    # positive control: without the rule the McNemar floor is what is shown
    fixed = build_report(_data(_rows({(1, 0): 3, (0, 1): 1, (1, 1): 4})))
    assert fixed.comparisons[0].deciding_max_e is None and "smallest exact p they could give" in render_text(fixed)
