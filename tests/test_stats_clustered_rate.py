"""One policy's rate with repeats: the mark as the unit for per-policy and
per-stratum intervals, Cochran's Q and the drift test withheld with their reason, the smallest
p line for the deciding test. The design effect against statsmodels' cluster-robust variance;
coverage by seeded simulation (with its standard error)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import statsmodels.api as sm

from orchestrator.analysis import stats
from orchestrator.analysis.outcomes import OutcomeSet, TrialOutcome
from orchestrator.analysis.report import build_report, render, to_dict


def _truth(p: float, spread: float) -> float:
    """E over marks of expit(logit(p) + N(0, spread)): the rate a policy has over marks."""
    x, w = np.polynomial.hermite_e.hermegauss(80)
    return float(np.sum(w / w.sum() / (1 + np.exp(-(math.log(p / (1 - p)) + spread * x)))))


def test_design_effect_equals_statsmodels_cluster_robust_variance():
    rng = np.random.default_rng(5)
    for _ in range(5):
        marks, reps = 12, rng.integers(2, 6)
        y = rng.binomial(1, rng.uniform(0.1, 0.9, marks).repeat(reps))
        groups = np.arange(marks).repeat(reps)
        fit = sm.OLS(y, np.ones((len(y), 1))).fit(cov_type="cluster", cov_kwds={"groups": groups})
        p = y.mean()
        deff = fit.cov_params()[0, 0] / (p * (1 - p) / len(y))
        per = [(int(y[groups == g].sum()), int(reps)) for g in range(marks)]
        assert stats.rate_design_effect(per) == pytest.approx(max(1.0, deff), rel=1e-10)


def test_one_trial_per_mark_is_wilson():
    iv = stats.clustered_wilson([(1, 1)] * 7 + [(0, 1)] * 5)
    w = stats.wilson(7, 12)
    assert (iv.lo, iv.hi, iv.method) == (w.lo, w.hi, "wilson")


@pytest.mark.parametrize("marks, repeats, p, spread", [
    (8, 3, 0.7, 1.0), (10, 5, 0.5, 1.5), (20, 3, 0.8, 1.0), (40, 2, 0.6, 1.0), (12, 4, 0.3, 1.0)])
def test_per_policy_interval_with_repeats_covers(marks, repeats, p, spread):
    """Correlated repeats (a mark's difficulty shifts the logit by N(0, spread)): the clustered
    interval covers the rate over marks at >= 0.93; Wilson on the pooled trials does not always."""
    truth = _truth(p, spread)
    rng = np.random.default_rng(marks * 100 + repeats)
    reps, covered, wilson_covered = 1500, 0, 0
    lg = math.log(p / (1 - p))
    for _ in range(reps):
        pm = 1 / (1 + np.exp(-(lg + rng.normal(0, spread, marks))))
        y = rng.binomial(repeats, pm)
        iv = stats.clustered_wilson([(int(k), repeats) for k in y])
        covered += iv.lo <= truth <= iv.hi
        w = stats.wilson(int(y.sum()), marks * repeats)
        wilson_covered += w.lo <= truth <= w.hi
    rate = covered / reps
    se = math.sqrt(rate * (1 - rate) / reps)
    assert rate >= 0.93, (rate, se, wilson_covered / reps)


def _blocks(rows, policies=("A", "B", "C")) -> OutcomeSet:
    outs, slot = [], 0
    for mark, rep, vals in rows:
        for p, ok in zip(policies, vals, strict=True):
            outs.append(TrialOutcome(layout=mark, repeat=rep, policy=p, success=bool(ok), slot=slot,
                                     stratum="edge" if mark < "M05" else "centre"))
            slot += 1
    return OutcomeSet(outcomes=tuple(outs), policies=policies, source="memory", label_source="test")


def test_report_with_repeats_counts_marks_everywhere():
    rng = np.random.default_rng(9)
    rows = [(f"M{m:02d}", r, tuple(int(x) for x in rng.integers(0, 2, 3))) for m in range(10) for r in range(3)]
    r = build_report(_blocks(rows))
    doc = to_dict(r)
    for p in r.policies:
        mine = [(sum(v[i] for mm, _, v in rows if mm == m), 3) for m in sorted({m for m, _, _ in rows})
                for i in ["ABC".index(p.label)]]
        iv = stats.clustered_wilson(mine)
        assert (p.interval.lo, p.interval.hi) == (iv.lo, iv.hi)
        assert doc["policies"][p.label]["ci_method"] == "wilson-clustered"
        assert doc["policies"][p.label]["wilson95"] == [p.wilson.lo, p.wilson.hi]   # the old key keeps its meaning
    assert all(v["ci_method"] == "wilson-clustered" for s in doc["strata"].values() for v in s.values())
    assert r.cochran is None and "cochran_q" in doc["withheld"] and "cochran_q" not in doc
    assert all(d["fisher_p"] is None for d in doc["drift"].values()) and "drift_fisher_p" in doc["withheld"]
    text = render(r, "text")
    assert "Cochran's Q withheld: marks have repeats" in text and "Fisher p withheld" in text
    assert "clustered over marks" in text
    c = r.comparisons[0]
    assert c.deciding_floor_p == stats.discordant_floor(c.clustered.discordant_marks)
    assert "the smallest exact p the test over marks could give is" in text
    # one repeat: nothing withheld, Wilson, the pooled floor
    single = build_report(_blocks([(m, 0, v) for m, r_, v in rows if r_ == 0]))
    assert single.withheld == () and single.cochran is not None
    assert all(p.interval.method == "wilson" for p in single.policies)
