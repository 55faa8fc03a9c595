"""The corrected rates and paired difference (`stats.ppi`): against from-scratch numpy oracles,
against PPI's closed form on a hand-computed example, and the coverage simulation's code path
with a positive control (tests/support/ppi_sim.py; the grid: bench/ppi_coverage.py)."""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest
from scipy import stats as sps

from orchestrator.analysis import stats
from support.ppi_sim import Scenario, coverage, simulate, uncorrected_rate
from support.repo import REPO as ROOT


def _oracle_difference(marks, fa, ya, xa, fb, yb, xb, pi, c, level=0.95):
    """From scratch: z = f + xi (y - f) / pi, per-mark sums, ratio variance with K/(K-1) plus
    c (1 - pi) / (pi n)^2 per policy, t(K-1) Wald interval."""
    za = np.array([f + (x and (y - f) / pi) for f, y, x in zip(fa, ya, xa, strict=True)])
    zb = np.array([f + (x and (y - f) / pi) for f, y, x in zip(fb, yb, xb, strict=True)])
    ids = sorted(set(marks))
    d = np.array([sum(za[i] - zb[i] for i in range(len(marks)) if marks[i] == m) for m in ids])
    n = np.array([sum(1 for x in marks if x == m) for m in ids], dtype=float)
    est = d.sum() / n.sum()
    k = len(ids)
    var = k / (k - 1) * np.sum((d - est * n) ** 2) / n.sum() ** 2 + 2 * c * (1 - pi) / (pi * n.sum()) ** 2
    t = sps.t.ppf(1 - (1 - level) / 2, k - 1)
    return est, est - t * math.sqrt(var), est + t * math.sqrt(var), 2 * sps.t.sf(abs(est) / math.sqrt(var), k - 1)


def test_difference_matches_a_from_scratch_oracle():
    rng = np.random.default_rng(7)
    cases = 0
    for _ in range(20):
        pairs = 40
        marks = list(rng.integers(0, 12, pairs))
        fa, fb = rng.integers(0, 2, pairs), rng.integers(0, 2, pairs)
        ya = np.where(rng.random(pairs) < 0.15, 1 - fa, fa)
        yb = np.where(rng.random(pairs) < 0.15, 1 - fb, fb)
        xa, xb = rng.random(pairs) < 0.25, rng.random(pairs) < 0.25
        pi = 0.25
        got = stats.ppi_difference(marks, fa, [int(v) if x else None for v, x in zip(ya, xa, strict=True)], xa,
                                   fb, [int(v) if x else None for v, x in zip(yb, xb, strict=True)], xb, pi)
        est, lo, hi, p = _oracle_difference(marks, fa, ya, xa, fb, yb, xb, pi, stats.ppi.PSEUDO_DISAGREEMENTS)
        assert got.estimate == pytest.approx(est, abs=1e-12)
        assert (got.lo, got.hi) == pytest.approx((max(-1, lo), min(1, hi)), abs=1e-12)
        assert got.p_value == pytest.approx(p, abs=1e-12)
        assert got.marks == len(set(marks)) and got.items == pairs
        cases += 1
    assert cases == 20


def _wilson(k, n, crit):
    p = k / n
    centre = (p + crit ** 2 / (2 * n)) / (1 + crit ** 2 / n)
    half = crit / (1 + crit ** 2 / n) * math.sqrt(p * (1 - p) / n + crit ** 2 / (4 * n ** 2))
    return max(0.0, centre - half) if k else 0.0, min(1.0, centre + half) if k < n else 1.0


def _oracle_rate(per_mark, cells, share):
    """From scratch: Wilson on the effective counts of the predictions over marks (deff from the
    ratio variance, every mark counted once when the rarer outcome is fewer than a mark's trials;
    t(K-1)), Newcombe's square-and-add interval for the audited Y - f scaled by the rater's
    share, and MOVER's sum."""
    y = np.array([s for s, _ in per_mark], dtype=float)
    m = np.array([n for _, n in per_mark], dtype=float)
    k, n, total = len(m), m.sum(), y.sum()
    p = total / n
    deff = max(1.0, k / (k - 1) * np.sum((y - p * m) ** 2) / n ** 2 / (p * (1 - p) / n))
    if min(total, n - total) < m.max():
        deff = max(deff, n / k)
    lo1, hi1 = _wilson(total / deff, n / deff, sps.t.ppf(0.975, k - 1))
    a, b, c, d = cells
    na = a + b + c + d
    z = sps.norm.ppf(0.975)
    p1, p2 = (a + b) / na, (a + c) / na
    l1, u1 = _wilson(a + b, na, z)
    l2, u2 = _wilson(a + c, na, z)
    big = a * d - b * c
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    phi = 0.0 if margins == 0 else (big - na / 2 if big > na / 2 else (0 if big >= 0 else big)) / math.sqrt(margins)
    r = share * (p1 - p2)
    rlo = r - share * math.sqrt((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2)
    rhi = r + share * math.sqrt((p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2)
    est = p + r
    return est, max(0.0, est - math.hypot(p - lo1, r - rlo)), min(1.0, est + math.hypot(hi1 - p, rhi - r))


def test_rate_matches_a_from_scratch_oracle():
    """The predictions' clustered Wilson interval plus the rectifier's Newcombe interval on the
    audited trials the rater labelled (people's own labels need no correction), summed by MOVER."""
    rng = np.random.default_rng(11)
    cases = 0
    for _ in range(10):
        trials = 60
        marks = list(np.repeat(np.arange(20), 3))
        f = rng.integers(0, 2, trials)
        y = np.where(rng.random(trials) < 0.2, 1 - f, f)
        by_people = rng.random(trials) < 0.3
        f = np.where(by_people, y, f)                       # people's label where the rater was unsure
        x = np.zeros(trials, dtype=bool)
        x[rng.choice(trials, 12, replace=False)] = True
        got = stats.ppi_rate(marks, f, [int(v) if a or p else None for v, a, p in zip(y, x, by_people, strict=True)],
                             x, by_people)
        s = x & ~by_people
        cells = [int(np.sum((y[s] == i) & (f[s] == j))) for i, j in ((1, 1), (1, 0), (0, 1), (0, 0))]
        per_mark = [(int(f[3 * m:3 * m + 3].sum()), 3) for m in range(20)]
        est, lo, hi = _oracle_rate(per_mark, cells, float(np.mean(~by_people)))
        assert got.estimate == pytest.approx(est, abs=1e-12)
        assert (got.lo, got.hi) == pytest.approx((lo, hi), abs=1e-12)
        assert got.items == trials and got.audited == 12 and got.marks == 20
        cases += 1
    assert cases == 10


def test_an_audit_that_saw_no_disagreement_does_not_vouch_for_the_rater():
    """The under-coverage at small audits: the rater says success on all 120 trials (40 marks of
    3), people would say failure on 15 of them (an eighth, all one way), and the audit's 12 trials
    (0.1) are all true successes: no disagreement seen (a chance of 0.2 with such a rater). The
    rectifier's spread across marks is then zero and an interval resting on it sat at the
    uncorrected 1.0 and excluded 105/120 (it gave 0.907 to 1); the score interval for Y - f on 12
    audited trials cannot rule out a rater that wrong. Positive control: an audit of every trial
    sees the 15 errors; the interval moves to 105/120 and narrows."""
    marks = list(np.repeat(np.arange(40), 3))
    truth = np.ones(120, dtype=int)
    truth[np.arange(15) * 6 + 1] = 0
    audited = np.zeros(120, dtype=bool)
    audited[np.flatnonzero(truth)[::9][:12]] = True
    assert audited.sum() == 12 and truth[audited].all()
    iv = stats.ppi_rate(marks, [1] * 120, [int(t) if a else None for t, a in zip(truth, audited, strict=True)],
                        audited)
    assert iv.estimate == 1.0 and iv.contains(105 / 120) and iv.hi - iv.lo > 0.2
    full = stats.ppi_rate(marks, [1] * 120, list(truth), [True] * 120)
    assert full.estimate == pytest.approx(105 / 120) and full.contains(105 / 120) and full.hi - full.lo < iv.hi - iv.lo


def test_with_none_of_the_raters_labels_audited_the_rectifier_spans_its_share():
    """No audited trial among the rater's: its error is unknown, anywhere in [-s, s]."""
    marks = list(range(10))
    iv = stats.ppi_rate(marks, [1] * 10, [None] * 10, [False] * 10, [False] * 5 + [True] * 5)
    base = stats.clustered_wilson([(1, 1)] * 10)
    assert iv.estimate == 1.0 and iv.lo == pytest.approx(1 - math.hypot(1 - base.lo, 0.5)) and iv.hi == 1.0


def test_ppi_closed_form_on_a_hand_computed_example():
    """PPI's mean estimator (Angelopoulos et al. 2023): mean of f over all N trials minus the
    mean of (f - Y) over the n labelled, which the inverse-probability form equals at pi = n / N.
    Ten trials on ten marks, f = six successes; audited trials 0 (f 1, Y 0) and 9 (f 0, Y 1):
    0.6 - ((1 - 0) + (0 - 1)) / 2 = 0.6; with trial 9's Y = 0: 0.6 - 1/2 = 0.1."""
    f = [1, 1, 1, 1, 1, 1, 0, 0, 0, 0]
    audited = [True] + [False] * 8 + [True]
    human = [0] + [None] * 8 + [1]
    assert stats.ppi_rate(range(10), f, human, audited).estimate == pytest.approx(0.6)
    human[9] = 0
    assert stats.ppi_rate(range(10), f, human, audited).estimate == pytest.approx(0.1)
    # people's labels only: a prediction of 0 everywhere, the audit's mean Y corrects it: 0
    assert stats.ppi_rate(range(10), [0] * 10, human, audited).estimate == pytest.approx(0.0)
    # the paired difference: A as above (0.1), B all failures with no audited trial: 0.1 - 0
    d = stats.ppi_difference(range(10), f, human, audited, [0] * 10, [None] * 10, [False] * 10, 0.2)
    assert d.estimate == pytest.approx(0.1)


def test_an_audited_trial_without_a_human_label_is_refused():
    with pytest.raises(ValueError, match="audited trial needs a human label"):
        stats.ppi_rate([0, 1], [1, 0], [None, 0], [True, False])
    with pytest.raises(ValueError, match="audited trial needs a human label"):
        stats.corrected_values([1, 0], [None, 0], [True, False], 0.5)
    with pytest.raises(ValueError, match="inclusion probability"):
        stats.corrected_values([1, 0], [1, 0], [True, False], 0.0)


def test_coverage_simulation_path_and_its_positive_control():
    """A few replicates of the bench's simulation: the corrected intervals cover; the rater's
    own labels with a biased rater (calling near-threshold failures successes) do not: the
    simulation can fail an interval."""
    biased = Scenario(marks=20, repeats=3, rater_bias=1.5, audit=0.2)
    out = coverage(biased, runs=80, seed=5)
    assert out["uncorrected_a"] < 0.6, out           # the positive control fails
    assert out["rate_a"] >= 0.85 and out["rate_b"] >= 0.85 and out["difference"] >= 0.85, out
    assert 0.2 <= out["human_per_episode"] < 0.6
    rep = simulate(biased, np.random.default_rng(1))
    assert rep.audited.sum() == 24 == 0.2 * rep.truth.size       # exactly k of N
    assert not uncorrected_rate(rep).contains(1.0)


def test_the_simulation_runs_three_policies_and_unfinished_campaigns():
    """The code path of the bench's 3-policy and unfinished scenarios: three policies give three
    pairs (Holm), the family-wise error counts only pairs of equal rates, trials not run are
    pending with no episode, waiting episodes have no people's label and are left out."""
    from orchestrator.analysis.report.corrected import corrected_section
    from support.ppi_sim import outcome_set

    three = Scenario(marks=20, logit_a=3.0, logit_b=-1.0, extra=(-1.0,), rater_noise=0.2, band=0.3)
    out = coverage(three, runs=6, seed=3)
    assert out["reject"] == 1.0 and out["false_better"] <= 0.5 and 0 <= out["differences_min"] <= 1, out
    unfinished = Scenario(marks=20, missing=0.2, waiting=0.5, audit=0.3)
    rep = simulate(unfinished, np.random.default_rng(4))
    assert rep.run is not None and rep.waits is not None and 0 < rep.run.sum() < rep.truth.size
    data = outcome_set(rep, unfinished.audit)
    assert sum(o.state == "pending" and o.episode_id is None for o in data.outcomes) == rep.truth.size - rep.run.sum()
    section = corrected_section(data)
    assert section is not None and section.waiting == int(np.sum(rep.run & rep.waits & (rep.rater < 0)))
    assert section.waiting > 0 and section.episodes == rep.run.sum()
    assert 0 < section.audit_labelled < section.audit_size
    assert 0 <= coverage(unfinished, runs=4, seed=2)["rate_min"] <= 1


def test_the_ppi_bench_runs():
    spec = importlib.util.spec_from_file_location("ppi_coverage", ROOT / "bench" / "ppi_coverage.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    rows = bench.grid(runs=3, marks=(20,), audits=(0.1,))
    assert len(rows) == len(bench.SCENARIOS) and all(0 <= r["rate_a"] <= 1 for r in rows)
