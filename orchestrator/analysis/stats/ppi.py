"""Success rates and the paired difference from an automatic rater's labels on every episode,
corrected by people's labels on a random audit: prediction-powered inference with the mark as
the unit.

Definitions. Trial i of a campaign has a mark m(i), a policy, and the label people would give
it, Y_i in {0, 1} (the human consensus: the quantity every other line of the report estimates).
The automatic rater labels every episode success, failure or unsure; people label every unsure
episode and a random audit sample drawn at freeze time: exactly k = round(fraction N) of the N
trials, without replacement (xi_i = 1 when trial i is audited and people have labelled it). The
prediction is

    f_i = the rater's label where it was sure, the human consensus where it was unsure,

known for every trial (unsure episodes are all human-labelled), so Y_i - f_i can be non-zero only
on the rater's labels. With the rater not counted (the report's fallback, people's labels only)
the caller passes f_i = 0 on the rater's labels instead: the same estimators then rest on
people's labels alone (every unsure episode as labelled, the rater's share through the audit).

The rate (`ppi_rate`). theta = mean of f over the policy's n trials + s * (mean of Y - f over the
audited trials among the rater's labels), s the rater's share of the n trials: PPI's estimator
(Angelopoulos et al. 2023: the predictions' mean plus the labelled sample's mean rectifier),
post-stratified on who labelled (Cochran 1977 section 5A: the rectifier is 0, and known, on
people's labels). Its interval is the sum of two intervals by MOVER (Zou & Donner 2008; Newcombe
2011), lo = theta - sqrt((m - l1)^2 + (r - l2)^2), hi = theta + sqrt((u1 - m)^2 + (u2 - r)^2),
m and r the two terms:

- (l1, u1) for the predictions' mean: Wilson's interval on the effective counts over marks with
  the t(K - 1) value (`stats.clustered_wilson`: Rao & Scott 1992, Korn & Graubard 1998): the
  marks' spread, the mark being the unit;
- (l2, u2) for the rectifier: s times Newcombe's paired score interval (1998b, method 10) for
  mean(Y) - mean(f) on the audited trials among the rater's labels, a simple random sample of
  them (the audit and the judge queue's order are drawn independently of every outcome). With
  none audited it is [-s, s]: the rater's errors are unknown.

Why the score interval, and not the ratio estimator's variance across marks (the interval before,
Wilson on n_eff = theta (1 - theta) / V of z = f + xi (Y - f) / pi, with a floor of 0.15
pseudo-disagreements): an audit of 6-12 trials per policy (audit 0.1 at 20-40 marks) sees no or
one disagreement in most campaigns even when the rater is wrong on 12 % of its sure labels, all
one way (P(none of 12) = 0.88^12 = 0.22), and the disagreement bound counts the rater exactly in
those campaigns; the variance across marks of so few non-zero rectifiers is then near zero and
the interval rested on the uncorrected labels: at 40 marks, audit 0.1 it covered 0.85 when the
rater was counted (0.73 after no disagreement, 0.82 after one), always missing above the true
rate. A score interval's width at no disagreement is that of the disagreement rate's own
uncertainty (Wilson 1927: 12 of 12 agreeing still allows 24 % wrong), not zero. Its cost is width
where the audit is small; docs/statistics.md gives the coverage and the mean width measured.

Why PPI (lam = 1), not PPI++'s tuned lam (Angelopoulos, Duchi & Zrnic 2023): PPI++'s lam is
estimated from the same few audited disagreements, and its gain is asymptotic; a rater poor
enough for people's labels alone to do better is caught by the pre-registered disagreement bound.

The paired difference (`ppi_difference`) over the pairs (mark, repeat) whose two trials have a
prediction: the corrected value z_i = lam f_i + xi_i (Y_i - lam f_i) / pi (PPI's rectifier
weighted by the inverse of the audit's inclusion probability pi: Zrnic & Candes 2024; Horvitz &
Thompson 1952; E[z_i] = Y_i over the audit's draw for any fixed lam), d_j = z_Aj - z_Bj, D_m =
sum of d_j on mark m, n_m its pairs, delta = sum D_m / sum n_m, V = K / (K - 1) sum_m (D_m - delta
n_m)^2 / (sum n_m)^2 (the ratio estimator's variance across marks, Cochran 1977 section 6.3; the
marks are the ultimate clusters, Kalton 1979, so it carries both the marks' and the audit's
variability); interval delta +- t(K - 1) sqrt(V), clipped to [-1, 1]; the two-sided test of
delta = 0 is t = delta / sqrt(V) on K - 1 degrees of freedom (the report's "better" when it
rejects at alpha: the interval then excludes 0). V carries a floor of `PSEUDO_DISAGREEMENTS` =
0.15 disagreements' worth of the audit's sampling variance per policy, 2 c (1 - pi) / (pi n)^2, n
the pairs (an audit that saw no disagreement would otherwise estimate the correction's variance
as zero). The difference's interval and test kept their measured coverage and type-I error
(docs/statistics.md), so they are unchanged.

Coverage and type-I error are measured by simulation (tests/support/ppi_sim.py,
`bench/ppi_coverage.py`, docs/statistics.md): at 20-60 marks, repeats, per-mark effects, a rater
whose errors and abstentions concentrate on near-threshold episodes, audits of 0.1-0.3, 2 and 3
policies, unfinished campaigns.

References
----------
- Angelopoulos AN, Bates S, Fannjiang C, Jordan MI, Zrnic T (2023). Prediction-powered
  inference. Science 382:669-674.
- Angelopoulos AN, Duchi JC, Zrnic T (2023). PPI++: efficient prediction-powered inference.
  arXiv:2311.01453.
- Zrnic T, Candes EJ (2024). Active statistical inference. ICML (PMLR 235).
- Horvitz DG, Thompson DJ (1952). A generalization of sampling without replacement from a finite
  universe. JASA 47:663-685.
- Cochran WG (1977). Sampling Techniques, 3rd ed. Wiley.
- Kalton G (1979). Ultimate cluster sampling. JRSS A 142:210-222.
- Korn EL, Graubard BI (1998). Confidence intervals for proportions with small expected number
  of positive counts estimated from survey data. Survey Methodology 24:193-201.
- Rao JNK, Scott AJ (1992). A simple method for the analysis of clustered binary data.
  Biometrics 48:577-585.
- Newcombe RG (1998b). Improved confidence intervals for the difference between binomial
  proportions based on paired data. Statistics in Medicine 17:2635-2650.
- Zou GY, Donner A (2008). Construction of confidence limits about effect measures: a general
  approach. Statistics in Medicine 27:1693-1702. Newcombe RG (2011). Propagating imprecision:
  combining confidence intervals from independent sources. Commun Stat Theory Methods 40:3154-3180.
- Wilson EB (1927). Probable inference, the law of succession, and statistical inference. JASA
  22:209-212.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from orchestrator.analysis.stats.clustered_rate import clustered_wilson
from orchestrator.analysis.stats.paired_ci import newcombe_cells
from orchestrator.analysis.stats.proportion import z_for_level


@dataclass(frozen=True)
class CorrectedInterval:
    """A corrected estimate with its interval over marks (module docstring)."""

    estimate: float
    lo: float
    hi: float
    se: float                 # sqrt(V), the standard error across marks (a difference; nan for a rate's score interval)
    marks: int                # K
    items: int                # trials (a rate) or pairs (a difference)
    audited: int              # audited trials among them
    level: float = 0.95
    p_value: float = float("nan")    # the difference's two-sided t test of 0 (nan for a rate)
    method: str = "ppi-marks"

    def contains(self, value: float) -> bool:
        return self.lo <= value <= self.hi


def corrected_values(prediction: Sequence[float], human: Sequence[float | None], audited: Sequence[bool],
                     inclusion: float, lam: float = 1.0) -> np.ndarray:
    """z_i = lam f_i + xi_i (Y_i - lam f_i) / pi: the prediction-powered rectifier (Angelopoulos
    et al. 2023) with Horvitz-Thompson weights 1/pi (Zrnic & Candes 2024); lam as in PPI++
    (Angelopoulos, Duchi & Zrnic 2023). An audited trial must have
    a human label (None is refused: an audit with missing labels is a smaller audit, whose
    inclusion probability is the caller's to state)."""
    if not 0 < inclusion <= 1:
        raise ValueError(f"the inclusion probability must be in (0, 1], not {inclusion}")
    f = np.asarray(prediction, dtype=float)
    xi = np.asarray(audited, dtype=bool)
    if len(human) != len(f) or len(xi) != len(f):
        raise ValueError("prediction, human and audited must describe the same trials")
    y = np.array([np.nan if h is None else float(h) for h in human], dtype=float)
    if np.any(xi & np.isnan(y)):
        raise ValueError("every audited trial needs a human label")
    z = lam * f
    z[xi] += (y[xi] - lam * f[xi]) / inclusion
    return z


def _per_mark(marks: Sequence[Hashable], values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(totals, counts) per mark, marks in first-seen order."""
    index: dict[Hashable, int] = {}
    codes = np.array([index.setdefault(m, len(index)) for m in marks], dtype=int)
    k = len(index)
    return np.bincount(codes, weights=values, minlength=k), np.bincount(codes, minlength=k).astype(float)


# Pseudo-disagreements per estimate added to the rectifier's variance (module docstring)
PSEUDO_DISAGREEMENTS = 0.15


def _ratio(totals: np.ndarray, counts: np.ndarray, inclusion: float, pseudo: float) -> tuple[float, float]:
    """(theta, V): the ratio estimator over marks and its variance, with the pseudo-disagreements'
    floor (module docstring)."""
    n = float(counts.sum())
    theta = float(totals.sum()) / n
    k = len(counts)
    if k < 2:
        return theta, float("inf")
    v = k / (k - 1) * float(np.sum((totals - theta * counts) ** 2)) / n ** 2
    return theta, v + pseudo * (1 - inclusion) / (inclusion * n) ** 2


def _mover_sum(parts: Sequence[tuple[float, float, float]]) -> tuple[float, float, float]:
    """(estimate, lo, hi) of a sum of independent estimates from their own intervals: the method
    of variance estimates recovery (Zou & Donner 2008; Newcombe 2011), lo = sum - sqrt(sum of
    (estimate - lo)^2), hi = sum + sqrt(sum of (hi - estimate)^2)."""
    est = sum(e for e, _, _ in parts)
    return (est, est - float(np.sqrt(sum((e - lo) ** 2 for e, lo, _ in parts))),
            est + float(np.sqrt(sum((hi - e) ** 2 for e, _, hi in parts))))


def ppi_rate(marks: Sequence[Hashable], prediction: Sequence[float], human: Sequence[float | None],
             audited: Sequence[bool], by_people: Sequence[bool] | None = None,
             level: float = 0.95) -> CorrectedInterval:
    """One policy's corrected success rate over its trials (module docstring, "The rate"): the mean
    of the predictions over every trial, clustered over marks (`clustered_wilson`: Rao & Scott
    1992, Korn & Graubard 1998), plus the rectifier, the share s of trials whose prediction is the
    rater's times the mean of Y - f over those of them audited (Angelopoulos et al. 2023,
    post-stratified: Cochran 1977 section 5A), with s times Newcombe's paired score interval
    (1998b) on the audited ones; the two combined by MOVER (Zou & Donner 2008). `human[i]` is None
    where people did not label trial i (it is then not audited); `by_people[i]` marks a prediction
    that is people's own label (rectifier 0; default none). With the rater's share unaudited the
    rectifier is unknown: [-s, s]."""
    f = np.asarray(prediction, dtype=float)
    xi = np.asarray(audited, dtype=bool)
    y = np.array([np.nan if h is None else float(h) for h in human], dtype=float)
    exact = np.zeros(len(f), dtype=bool) if by_people is None else np.asarray(by_people, dtype=bool)
    if len(y) != len(f) or len(xi) != len(f) or len(exact) != len(f):
        raise ValueError("prediction, human, audited and by_people must describe the same trials")
    if np.any(xi & np.isnan(y)):
        raise ValueError("every audited trial needs a human label")
    if len(f) == 0:
        return CorrectedInterval(float("nan"), 0.0, 1.0, float("nan"), 0, 0, 0, level)
    totals, counts = _per_mark(marks, f)
    base = clustered_wilson([(int(round(t)), int(c)) for t, c in zip(totals, counts, strict=True)], level)
    share = float(np.mean(~exact))
    sample = xi & ~exact
    yy, ff = y[sample] == 1, f[sample] == 1
    if sample.any():
        d, lo_d, hi_d = newcombe_cells(float(np.sum(yy & ff)), float(np.sum(yy & ~ff)), float(np.sum(~yy & ff)),
                                       float(np.sum(~yy & ~ff)), z_for_level(level))
        rectifier = (share * d, share * lo_d, share * hi_d)
    else:
        rectifier = (0.0, -share, share)
    est, lo, hi = _mover_sum([(base.estimate, base.lo, base.hi), rectifier])
    return CorrectedInterval(est, max(0.0, lo), min(1.0, hi), float("nan"), len(counts), len(f), int(xi.sum()),
                             level, method="ppi-score")


def ppi_difference(marks: Sequence[Hashable], prediction_a: Sequence[float], human_a: Sequence[float | None],
                   audited_a: Sequence[bool], prediction_b: Sequence[float], human_b: Sequence[float | None],
                   audited_b: Sequence[bool], inclusion: float, level: float = 0.95,
                   lam: float = 1.0, pseudo: float = PSEUDO_DISAGREEMENTS) -> CorrectedInterval:
    """The corrected paired difference rate(A) - rate(B) over pairs (one entry per pair, its mark
    in `marks`): per-mark totals of z_A - z_B (Angelopoulos et al. 2023; Zrnic & Candes 2024), the
    ratio estimator's variance across marks (Cochran 1977; Kalton 1979) plus twice the floor, the
    t(K - 1) interval and the two-sided t test of 0 (`p_value`)."""
    za = corrected_values(prediction_a, human_a, audited_a, inclusion, lam)
    zb = corrected_values(prediction_b, human_b, audited_b, inclusion, lam)
    if len(za) != len(zb) or len(marks) != len(za):
        raise ValueError("both policies' entries must be the same pairs")
    audited = int(np.sum(np.asarray(audited_a, dtype=bool)) + np.sum(np.asarray(audited_b, dtype=bool)))
    if len(za) == 0:
        return CorrectedInterval(float("nan"), -1.0, 1.0, float("nan"), 0, 0, 0, level, 1.0)
    totals, counts = _per_mark(marks, za - zb)
    delta, v = _ratio(totals, counts, inclusion, 2 * pseudo)
    k = len(counts)
    if k < 2:
        return CorrectedInterval(delta, -1.0, 1.0, float("inf"), k, len(za), audited, level, 1.0)
    se = float(np.sqrt(v))
    crit = float(stats.t.ppf(1 - (1 - level) / 2, k - 1))
    if se > 0:
        p = float(2 * stats.t.sf(abs(delta) / se, k - 1))
    else:
        p = 1.0 if delta == 0 else 0.0
    return CorrectedInterval(delta, max(-1.0, delta - crit * se), min(1.0, delta + crit * se), se, k, len(za),
                             audited, level, p)
