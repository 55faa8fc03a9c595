"""Success rates and the paired difference from an automatic rater's labels on every episode,
corrected by people's labels on a random audit: prediction-powered inference with the mark as
the unit.

Definitions. Trial i of a campaign has a mark m(i), a policy, and the label people would give
it, Y_i in {0, 1} (the human consensus: the quantity every other line of the report estimates).
The automatic rater labels every episode success, failure or unsure; people label every unsure
episode and a random audit sample drawn at freeze time: exactly k = round(fraction N) of the N
trials, without replacement, so every trial is audited with the known probability pi = k / N
(xi_i = 1 when it is). The prediction is

    f_i = the rater's label where it was sure, the human consensus where it was unsure,

known for every trial (unsure episodes are all human-labelled). The corrected value of trial i
(the prediction-powered rectifier of Angelopoulos et al. 2023, inverse-probability weighted for
the audit's inclusion probability as in Zrnic & Candes 2024) is

    z_i = lam f_i + xi_i (Y_i - lam f_i) / pi,

and E[z_i | trial i] = Y_i over the draw of the audit, for any fixed lam: the correction removes
the rater's bias whatever it is (a rater wrong on every near-threshold lift included). lam = 1
is PPI; lam = 0 uses people's labels only (unsure episodes all, sure ones through the audit:
a Horvitz-Thompson estimator), the fallback when the rater cannot be counted.

Why PPI with lam = 1, not PPI++'s tuned lam (Angelopoulos, Duchi & Zrnic 2023): PPI++'s lam is
estimated from the same audited disagreements the variance rests on, and its gain is
asymptotic; at 20-60 marks with an audit of 0.1-0.3 a fixed lam keeps the estimator exactly
unbiased under the design, and a rater poor enough for lam = 0 to win is caught by the
pre-registered disagreement bound (the report then falls back to lam = 0).

The mark is the unit. Trials of one mark (its repeats, both policies) share its difficulty and
are correlated, so the estimate is a ratio of per-mark totals and its variance is computed
across marks (the ratio estimator's variance, Cochran 1977 section 6.3, with the small-sample
factor K / (K - 1), as `stats.clustered_rate`). Marks are the ultimate clusters (Kalton 1979):
the audit's draw inside them adds to the per-mark totals' spread, so one variance across marks
carries both the marks' and the audit's variability; the fixed sample size (k exactly, not
Bernoulli) makes the marks' totals slightly negatively correlated, which makes this variance
conservative.

- Rate of one policy over its K marks: T_m = sum of z_i over its trials on mark m, n_m their
  number, theta = sum T_m / sum n_m, V = K / (K - 1) sum_m (T_m - theta n_m)^2 / (sum n_m)^2.
  Interval: Wilson's on the effective sample size n_eff = theta (1 - theta) / V (at most the
  trials' number; Korn & Graubard 1998 give the effective-sample-size construction, Rao & Scott
  1992 the design effect) with the Student t(K - 1) critical value, as `stats.clustered_wilson`;
  at an estimate of 0 or 1 (or a zero variance) every mark counts once (n_eff = K).
- Paired difference A - B over the pairs (mark, repeat) whose two trials have a prediction:
  d_j = z_Aj - z_Bj, D_m = sum of d_j on mark m, n_m its pairs, delta = sum D_m / sum n_m,
  V as above; interval delta +- t(K - 1) sqrt(V), clipped to [-1, 1]; the two-sided test of
  delta = 0 is t = delta / sqrt(V) on K - 1 degrees of freedom (the report's "better" when it
  rejects at alpha: the interval then excludes 0).

A floor on the correction's variance. An audit of 6-20 trials per policy usually finds no
disagreement, and then estimates the correction's variance as zero, although the rater may be
wrong on a tenth of its sure labels, all one way: the interval then rests on the uncorrected
labels and missed the true rate in 13 % of campaigns (coverage 0.87 at 20 marks of 3 repeats,
audit 0.1, a rater wrong on 12 % of its sure labels). V therefore carries `PSEUDO_DISAGREEMENTS`
= 0.15 disagreements' worth of the audit's sampling variance, c (1 - pi) / (pi n)^2 (twice that
for a difference: the disagreement can be on either policy's trial), n the trials (pairs): the
smallest of 0, 0.15, 0.3, 0.5 and 1 that keeps every measured point at 0.93 or more; it widens
the interval by about 4 % for an unbiased rater at 30 marks and audit 0.2, and more where the
audit is small (its cost is the audit's size, which is the point).

Coverage and type-I error are measured by simulation (tests/support/ppi_sim.py,
`bench/ppi_coverage.py`, docs/statistics.md): at 20-60 marks, repeats, per-mark effects, a rater
whose errors and abstentions concentrate on near-threshold episodes, audits of 0.1-0.3.

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
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from orchestrator.analysis.stats.proportion import wilson_bounds


@dataclass(frozen=True)
class CorrectedInterval:
    """A corrected estimate with its interval over marks (module docstring)."""

    estimate: float
    lo: float
    hi: float
    se: float                 # sqrt(V), the standard error across marks
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


def ppi_rate(marks: Sequence[Hashable], prediction: Sequence[float], human: Sequence[float | None],
             audited: Sequence[bool], inclusion: float, level: float = 0.95, lam: float = 1.0,
             pseudo: float = PSEUDO_DISAGREEMENTS) -> CorrectedInterval:
    """One policy's corrected success rate over its trials: the ratio of per-mark totals of z
    (Angelopoulos et al. 2023; Zrnic & Candes 2024), its variance across marks (Cochran 1977
    section 6.3; Kalton 1979) plus the pseudo-disagreements' floor, Wilson's interval on the
    effective sample size with t(K - 1) (Korn & Graubard 1998). `human[i]` is None where people did
    not label trial i (it is then not audited)."""
    z = corrected_values(prediction, human, audited, inclusion, lam)
    if len(z) == 0:
        return CorrectedInterval(float("nan"), 0.0, 1.0, float("nan"), 0, 0, 0, level)
    totals, counts = _per_mark(marks, z)
    theta, v = _ratio(totals, counts, inclusion, pseudo)
    k, n = len(counts), float(counts.sum())
    crit = float(stats.t.ppf(1 - (1 - level) / 2, k - 1)) if k > 1 else float("inf")
    p = min(1.0, max(0.0, theta))
    if k < 2:
        lo, hi = 0.0, 1.0
    else:
        n_eff = min(n, p * (1 - p) / v) if v > 0 and 0 < p < 1 else float(k)
        lo, hi = (float(x) for x in wilson_bounds(p * n_eff, n_eff, crit))
    return CorrectedInterval(theta, max(0.0, lo), min(1.0, hi), float(np.sqrt(v)), k, len(z),
                             int(np.sum(np.asarray(audited, dtype=bool))), level)


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
