"""The e-value stopping rule end to end: its exact power against brute
force and simulation; one e-value and one decision in the runner and the report; the interval
the verdict shows after a stop agrees with the rule; "more layouts" gives the deciding rule its
power. Seeded simulations, each with its standard error in the assertion message; kept to
seconds (bench/evalue_rule.py runs the bigger versions)."""

from __future__ import annotations

import itertools
import math
import re

import numpy as np
import pytest
from scipy import special

from orchestrator.analysis import stats
from orchestrator.analysis.report import build_report
from orchestrator.analysis.report.more_layouts import more_layouts
from orchestrator.analysis.stopping import stopping_decision
from support.evalue_sim import run_campaign


def _brute_rejection(m: int, theta: float, alpha: float) -> float:
    """P(the e-value reaches 1/alpha within m discordant draws), over all 2^m sequences."""
    total = 0.0
    for seq in itertools.product((0, 1), repeat=m):
        b = c = 0
        for x in seq:
            b, c = b + x, c + 1 - x
            if stats.evalue_discordant(b, c, alpha).e_value >= 1 / alpha:
                total += theta ** sum(seq) * (1 - theta) ** (m - sum(seq))
                break
    return total


@pytest.mark.parametrize("theta, alpha", [(0.8, 0.05), (0.5, 0.05), (0.9, 0.05 / 3), (0.3, 0.1)])
def test_first_passage_probability_equals_enumeration(theta, alpha):
    r = stats.rejection_by_discordant(13, theta, alpha)
    for m in (0, 5, 9, 13):
        assert r[m] == pytest.approx(_brute_rejection(m, theta, alpha), abs=1e-13)
    assert np.all(np.diff(r) >= -1e-15)


def test_power_equals_a_simulation_of_the_runner_s_rule():
    """At n = 30 layouts with p10 = 0.3, p01 = 0.05: the exact power against the share of 3000
    seeded simulated campaigns that `stopping_decision` (the runner's rule) stopped by then."""
    from orchestrator.analysis.outcomes import TrialOutcome

    n, p10, p01 = 30, 0.3, 0.05
    exact = stats.evalue_power(n, p10, p01, 0.05)
    rng = np.random.default_rng(27)
    reps, hits = 3000, 0
    proto = {"analysis": {"alpha": 0.05, "stopping": {"kind": "evalue", "max_layouts": 1000}},
             "policies": {"A": {}, "B": {}}}
    for _ in range(reps):
        cells = rng.choice(4, size=n, p=[p10, p01, (1 - p10 - p01) / 2, (1 - p10 - p01) / 2])
        b = np.cumsum(cells == 0)
        c = np.cumsum(cells == 1)
        # the rule's e-value changes only at discordant layouts: ask it there, as the runner would
        for i in np.nonzero(cells < 2)[0]:
            if stats.evalue_discordant(int(b[i]), int(c[i]), 0.05).reject:
                hits += 1
                break
    se = math.sqrt(exact * (1 - exact) / reps)
    assert abs(hits / reps - exact) < 4 * se, (hits / reps, exact, se)
    # and the decision function itself agrees with the e-value on one such table
    outs = [TrialOutcome(layout=f"L{i}", repeat=0, policy=p, success=s, slot=2 * i + j)
            for i, (sa, sb) in enumerate([(1, 0)] * 9) for j, (p, s) in enumerate((("A", bool(sa)), ("B", bool(sb))))]
    assert stopping_decision(outs, proto).stop == stats.evalue_discordant(9, 0, 0.05).reject


def test_the_issue_s_plan_figures():
    """The issue's example: p10 = 0.25, p01 = 0.05; 53 layouts give the rule 0.49 power, 88 are needed."""
    assert stats.evalue_power(53, 0.25, 0.05) == pytest.approx(0.494, abs=0.001)
    needed = stats.evalue_layouts_needed(0.25, 0.05, 0.8)
    assert needed == 88
    assert stats.evalue_power(needed, 0.25, 0.05) >= 0.8 > stats.evalue_power(needed - 1, 0.25, 0.05)


@pytest.mark.slow   # seconds of simulation or enumeration: the full run, not the fast lane
@pytest.mark.parametrize("repeats, marks, max_layouts, spread, better", [
    (1, 40, 36, 0.0, {"A": 0.8, "B": 0.45}), (3, 16, 45, 1.0, {"A": 0.9, "B": 0.3})])
def test_verdict_agrees_with_the_recorded_stop_in_every_campaign(repeats, marks, max_layouts, spread, better):
    """Seeded e-value campaigns run as the runner runs them (tests/support/evalue_sim.py), under
    the null and under a difference: the verdict says "better" exactly when the recorded stop is
    the rule's rejection, and after every early stop the interval the verdict shows (the rule's
    CS for A's share of the discordant units) excludes 50%. Every campaign must agree (SE 0 at
    an observed rate of 1)."""
    campaigns = disagree = early = excluded = 0
    for seed in range(60):
        rates = better if seed % 2 else {"A": 0.6, "B": 0.6}
        c = run_campaign(rates, marks, repeats, max_layouts, seed, spread)
        comp = build_report(c.data).comparisons[0]
        stopped = c.stop_reason.startswith("stopped early by the pre-registered e-value rule")
        assert stopped or c.stop_reason.startswith("reached max_layouts")
        campaigns += 1
        disagree += comp.significant != stopped
        if stopped:
            early += 1
            excluded += not (comp.share.lo <= 0.5 <= comp.share.hi)
            assert "better than" in comp.verdict and "confidence sequence" in comp.verdict
            assert not any("reaches 0" in n or "borderline" in n for n in comp.notes)
    assert campaigns == 60 and early >= 10, early       # the rule did stop early, often
    assert disagree == 0 and excluded == early


def test_the_rule_can_stop_early_with_repeats():
    """With the schedule's progressive marks the rule stops before max_layouts: under a large
    difference most campaigns stop by half of it."""
    halves = [run_campaign({"A": 0.9, "B": 0.2}, 16, 3, 48, seed).layouts_run <= 24 for seed in range(20)]
    assert sum(halves) >= 10, sum(halves)


@pytest.mark.parametrize("evalue_rule, comparisons", [(True, 1), (False, 1), (False, 3)])
def test_more_layouts_gives_the_deciding_rule_its_power(evalue_rule, comparisons):
    """Observed 14 A-only and 6 B-only of 60 layouts (not established): the figure, simulated at
    its planning effect (the observed rates) with the deciding rule, has power >= 0.78."""
    table = stats.paired_table([True] * 14 + [False] * 6 + [True] * 20 + [False] * 20,
                               [False] * 14 + [True] * 6 + [True] * 20 + [False] * 20)
    more, note = more_layouts(table, 0.05, "mcnemar_midp", comparisons, evalue_rule)
    assert more is not None and more > 0 and f"need about {more} more layouts" in note
    n_total = table.n + more
    p10, p01 = 14 / 60, 6 / 60
    rng = np.random.default_rng(2027 + comparisons)
    reps, hits = 1500, 0
    level = 0.05 / comparisons
    for _ in range(reps):
        cells = rng.choice(3, size=n_total, p=[p10, p01, 1 - p10 - p01])
        if evalue_rule:
            b, c = np.cumsum(cells == 0), np.cumsum(cells == 1)
            # the e-value of stats.evalue_discordant (prior Beta(1, 1)), vectorised over the layouts
            log_e = special.betaln(1 + b, 1 + c) - special.betaln(1, 1) + (b + c) * math.log(2)
            hits += bool(np.any(log_e >= math.log(1 / level)))
        else:
            b, c = int((cells == 0).sum()), int((cells == 1).sum())
            hits += stats.mcnemar_midp(b, c) <= level
    power = hits / reps
    se = math.sqrt(power * (1 - power) / reps)
    assert power >= 0.78, (power, se, n_total)
    assert not re.search(r"\b0 more", note)


def test_never_zero_more_beside_not_established():
    """Over a grid of tables that do not establish a difference (1 and 3 policies, mid-p and
    exact, fixed-n and the e-value rule) the figure is a positive number or a sentence without
    one; never "0 more". Holm's level makes the 3-policy figure larger than the 1-policy one."""
    checked = 0
    for n, b, c in [(30, 9, 3), (40, 12, 5), (60, 20, 8), (60, 14, 6), (100, 20, 11), (24, 5, 1)]:
        table = stats.PairedTable(both=n - b - c, a_only=b, b_only=c, neither=0)
        for k, primary, rule in itertools.product((1, 3), ("mcnemar_midp", "mcnemar_exact"), (False, True)):
            p = stats.evalue_discordant(b, c, 0.05 / k).reject if rule else \
                (stats.mcnemar(b, c).mid_p if primary == "mcnemar_midp" else stats.mcnemar(b, c).exact_p) * k <= 0.05
            if p:
                continue
            more, note = more_layouts(table, 0.05, primary, k, rule)
            assert (more is None or more > 0) and not re.search(r"\b0 more", note), (n, b, c, k, primary, rule, note)
            checked += 1
    assert checked >= 30, checked
    one = more_layouts(stats.PairedTable(both=40, a_only=14, b_only=6, neither=0), 0.05, "mcnemar_midp", 1)[0]
    three = more_layouts(stats.PairedTable(both=40, a_only=14, b_only=6, neither=0), 0.05, "mcnemar_midp", 3)[0]
    assert three > one > 0


def test_one_more_layout_is_said_in_the_singular():
    # 13 layouts, 6 A-only: the mid-p test reaches 80 % power at 14 (found by a search over tables)
    more, note = more_layouts(stats.PairedTable(both=7, a_only=6, b_only=0, neither=0), 0.05, "mcnemar_midp")
    assert more == 1 and "need about 1 more layout:" in note, note
    more, note = more_layouts(stats.PairedTable(both=40, a_only=14, b_only=6, neither=0), 0.05, "mcnemar_midp")
    assert more is not None and more > 1 and f"need about {more} more layouts:" in note, note   # the control
