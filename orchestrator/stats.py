"""Statistics for paired A/B trials of robot policies: pure functions, no I/O.

Every function states its definition and its reference (DESIGN section 6). Distributions come
from scipy (binomial, normal, chi-squared, Student t, beta, hypergeometric); nothing here
hand-writes a special function.

Notation for the paired 2x2 table over layouts (DESIGN section 6):

                    B succeeds   B fails
    A succeeds         a           b        (b = "A only")
    A fails            c           d        (c = "B only")

n = a + b + c + d pairs; b and c are the discordant pairs, the only ones that carry
information about which policy is better; rate(A) - rate(B) = (b - c) / n.

References
----------
- Wilson EB (1927). Probable inference, the law of succession, and statistical inference.
  JASA 22:209-212.
- Brown LD, Cai TT, DasGupta A (2001). Interval estimation for a binomial proportion.
  Statistical Science 16:101-133.
- Clopper CJ, Pearson ES (1934). The use of confidence or fiducial limits illustrated in the
  case of the binomial. Biometrika 26:404-413.
- McNemar Q (1947). Note on the sampling error of the difference between correlated
  proportions or percentages. Psychometrika 12:153-157.
- Edwards AL (1948). Note on the "correction for continuity" in testing the significance of
  the difference between correlated proportions. Psychometrika 13:185-187.
- Fagerland MW, Lydersen S, Laake P (2013). The McNemar test for binary matched-pairs data:
  mid-p and asymptotic are better than exact conditional. BMC Med Res Methodol 13:91.
- Fagerland MW, Lydersen S, Laake P (2014). Recommended tests and confidence intervals for
  paired binomial proportions. Statistics in Medicine 33:2850-2875.
- Newcombe RG (1998a). Two-sided confidence intervals for the single proportion / Interval
  estimation for the difference between independent proportions: comparison of eleven
  methods. Statistics in Medicine 17:857-872 and 873-890.
- Newcombe RG (1998b). Improved confidence intervals for the difference between binomial
  proportions based on paired data. Statistics in Medicine 17:2635-2650.
- Tango T (1998). Equivalence test and confidence interval for the difference in proportions
  for the paired-sample design. Statistics in Medicine 17:891-908.
- Bonett DG, Price RM (2012). Adjusted Wald confidence interval for a difference of binomial
  proportions based on paired data. J Educ Behav Stat 37:479-488.
- Fisher RA (1935). The logic of inductive inference. JRSS 98:39-82.
- Cochran WG (1950). The comparison of percentages in matched samples. Biometrika 37:256-266.
- Holm S (1979). A simple sequentially rejective multiple test procedure. Scand J Stat 6:65-70.
- Ville J (1939). Etude critique de la notion de collectif. Gauthier-Villars.
- Ramdas A, Grunwald P, Vovk V, Shafer G (2023). Game-theoretic statistics and safe
  anytime-valid inference. Statistical Science 38:576-601.
- Agarwal R, Schwarzer M, Castro PS, Courville A, Bellemare MG (2021). Deep reinforcement
  learning at the edge of the statistical precipice. NeurIPS (arXiv:2108.13264).
- Cohen J (1960). A coefficient of agreement for nominal scales. Educ Psychol Meas 20:37-46.
- Fleiss JL (1971). Measuring nominal scale agreement among many raters. Psychol Bull
  76:378-382.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Iterable, Sequence

import numpy as np
from scipy import special, stats

__all__ = [
    "Z95", "Interval", "PairedTable", "McNemarResult", "CochranQResult", "MeanInterval",
    "PowerResult", "PlanResult", "EValueResult", "z_for_level",
    "wilson", "clopper_pearson", "wald", "exact_coverage", "wilson_bounds", "wilson_coverage", "wilson_trials_needed",
    "paired_table", "mcnemar", "mcnemar_exact_p", "mcnemar_midp", "discordant_floor",
    "min_discordant_for_alpha", "paired_difference", "newcombe_paired", "tango_paired",
    "bonett_price_paired", "wald_paired", "fisher_exact", "newcombe_independent",
    "cochran_q", "holm", "t_interval", "t_interval_from_summary", "paired_power",
    "layouts_needed", "cell_probabilities", "independent_groups_n", "fisher_power",
    "evalue_discordant", "interquartile_mean", "stratified_bootstrap_ci", "cohen_kappa",
    "fleiss_kappa", "prob_at_least", "plan",
]

Z95 = float(stats.norm.ppf(0.975))  # 1.959963984540054


def z_for_level(level: float) -> float:
    """Two-sided standard-normal critical value: z = Phi^-1(1 - (1 - level) / 2)."""
    if not 0 < level < 1:
        raise ValueError(f"confidence level must be in (0, 1), not {level}")
    return float(stats.norm.ppf(1 - (1 - level) / 2))


# ------------------------------------------------------------------ result types


@dataclass(frozen=True)
class Interval:
    """A confidence interval [lo, hi] with its point estimate, method and level."""

    estimate: float
    lo: float
    hi: float
    method: str
    level: float = 0.95

    def as_list(self) -> list[float]:
        return [self.lo, self.hi]

    def contains(self, value: float) -> bool:
        return self.lo <= value <= self.hi


@dataclass(frozen=True)
class PairedTable:
    """Paired 2x2 over layouts: both, a_only (b), b_only (c), neither (d)."""

    both: int
    a_only: int
    b_only: int
    neither: int

    def __post_init__(self) -> None:
        for name in ("both", "a_only", "b_only", "neither"):
            value = getattr(self, name)
            if int(value) != value or value < 0:
                raise ValueError(f"{name} must be a non-negative count, not {value}")

    @property
    def n(self) -> int:
        return self.both + self.a_only + self.b_only + self.neither

    @property
    def discordant(self) -> int:
        return self.a_only + self.b_only

    @property
    def successes_a(self) -> int:
        return self.both + self.a_only

    @property
    def successes_b(self) -> int:
        return self.both + self.b_only

    @property
    def difference(self) -> float:
        """rate(A) - rate(B) = (b - c) / n."""
        return (self.a_only - self.b_only) / self.n if self.n else 0.0

    def as_matrix(self) -> list[list[int]]:
        """[[a, b], [c, d]]: rows A succeeds/fails, columns B succeeds/fails."""
        return [[self.both, self.a_only], [self.b_only, self.neither]]

    @classmethod
    def from_matrix(cls, m: Sequence[Sequence[int]]) -> "PairedTable":
        return cls(int(m[0][0]), int(m[0][1]), int(m[1][0]), int(m[1][1]))


@dataclass(frozen=True)
class McNemarResult:
    """All McNemar variants for one paired table (b = A only, c = B only)."""

    b: int
    c: int
    exact_p: float
    mid_p: float
    chi2: float
    chi2_p: float
    chi2_cc: float
    chi2_cc_p: float


@dataclass(frozen=True)
class CochranQResult:
    q: float
    df: int
    p: float
    blocks: int


@dataclass(frozen=True)
class MeanInterval:
    mean: float
    sd: float
    n: int
    lo: float
    hi: float
    t_crit: float
    level: float = 0.95

    @property
    def half_width(self) -> float:
        return (self.hi - self.lo) / 2


@dataclass(frozen=True)
class PowerResult:
    layouts: int
    power: float
    expected_discordant: float


@dataclass(frozen=True)
class PlanResult:
    """What `orchestrator plan` prints."""

    p_a: float
    p_b: float
    discordance: float
    agreement: float
    p10: float
    p01: float
    alpha: float
    test: str
    targets: tuple[tuple[float, int | None], ...]     # (target power, layouts needed or None)
    unpaired_per_policy: tuple[tuple[float, int | None], ...]
    min_discordant: int                                # fewest discordant pairs that can reach alpha
    max_layouts: int


@dataclass(frozen=True)
class EValueResult:
    """Beta-mixture e-value for the discordant pairs, with the decision at 1/alpha."""

    e_value: float
    a_only: int
    b_only: int
    alpha: float
    threshold: float
    reject: bool
    prior_a: float


# ------------------------------------------------------------------ single proportions


def _check_kn(k: int, n: int) -> None:
    if n < 0 or k < 0 or k > n or int(k) != k or int(n) != n:
        raise ValueError(f"need integer counts 0 <= k <= n, not k={k}, n={n}")


def wilson(k: int, n: int, level: float = 0.95, z: float | None = None) -> Interval:
    """Wilson score interval for k successes in n trials (Wilson 1927; Brown, Cai & DasGupta 2001).

    With p = k/n and z = Phi^-1(1 - alpha/2):
        centre = (p + z^2/(2n)) / (1 + z^2/n)
        half   = z/(1 + z^2/n) * sqrt(p(1-p)/n + z^2/(4n^2))
        [centre - half, centre + half], clipped to [0, 1] (the clip only removes rounding).
    It inverts the score test |p - pi| <= z sqrt(pi(1-pi)/n). n = 0 gives [0, 1].
    """
    _check_kn(k, n)
    z = z_for_level(level) if z is None else float(z)
    if n == 0:
        return Interval(float("nan"), 0.0, 1.0, "wilson", level)
    p = k / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z / den * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    lo = 0.0 if k == 0 else max(0.0, centre - half)
    hi = 1.0 if k == n else min(1.0, centre + half)
    return Interval(p, lo, hi, "wilson", level)


def clopper_pearson(k: int, n: int, level: float = 0.95) -> Interval:
    """Clopper-Pearson 'exact' interval (Clopper & Pearson 1934).

    lo = Beta^-1(alpha/2; k, n-k+1) (0 when k = 0), hi = Beta^-1(1-alpha/2; k+1, n-k)
    (1 when k = n): it inverts two one-sided binomial tests, so coverage is >= level.
    """
    _check_kn(k, n)
    alpha = 1 - level
    if n == 0:
        return Interval(float("nan"), 0.0, 1.0, "clopper-pearson", level)
    lo = 0.0 if k == 0 else float(stats.beta.ppf(alpha / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1 - alpha / 2, k + 1, n - k))
    return Interval(k / n, lo, hi, "clopper-pearson", level)


def wald(k: int, n: int, level: float = 0.95, z: float | None = None) -> Interval:
    """Wald interval p +- z sqrt(p(1-p)/n), clipped to [0, 1] (for contrast only).

    Brown, Cai & DasGupta (2001) show its coverage is erratic; it collapses to a point at
    k = 0 or k = n. Kept so reports and tests can show why Wilson is used.
    """
    _check_kn(k, n)
    z = z_for_level(level) if z is None else float(z)
    if n == 0:
        return Interval(float("nan"), 0.0, 1.0, "wald", level)
    p = k / n
    h = z * math.sqrt(p * (1 - p) / n)
    return Interval(p, max(0.0, p - h), min(1.0, p + h), "wald", level)


def exact_coverage(interval: Callable[[int, int], Interval], n: int, p: float) -> float:
    """Exact coverage P_p(lo(K) <= p <= hi(K)), K ~ Binomial(n, p): the sum of the binomial
    probabilities of every k whose interval contains p (Brown, Cai & DasGupta 2001)."""
    ks = np.arange(n + 1)
    pmf = stats.binom.pmf(ks, n, p)
    covered = np.array([interval(int(k), n).contains(p) for k in ks])
    return float(pmf[covered].sum())


def wilson_bounds(k: np.ndarray, n: int, z: float = Z95) -> tuple[np.ndarray, np.ndarray]:
    """`wilson` vectorised over k (same formula, same clipping): arrays of lower and upper bounds."""
    k = np.asarray(k, dtype=float)
    p = k / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z / den * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    lo = np.where(k == 0, 0.0, np.maximum(0.0, centre - half))
    hi = np.where(k == n, 1.0, np.minimum(1.0, centre + half))
    return lo, hi


def wilson_coverage(n: int, p: float, z: float = Z95) -> float:
    """Exact coverage of the Wilson interval at n and true rate p (vectorised `exact_coverage`)."""
    ks = np.arange(n + 1)
    lo, hi = wilson_bounds(ks, n, z)
    return float(stats.binom.pmf(ks, n, p)[(lo <= p) & (p <= hi)].sum())


def wilson_trials_needed(p: float, half_width: float, z: float = 1.96, n_max: int = 1_000_000) -> int:
    """Smallest n whose Wilson interval at observed rate p (k = round(p n)) has half-width
    (hi - lo)/2 <= half_width (seeds/004, table D). Uses the clipped interval, as reported."""
    if not 0 <= p <= 1 or half_width <= 0:
        raise ValueError("need 0 <= p <= 1 and half_width > 0")
    for n in range(1, n_max + 1):
        iv = wilson(round(p * n), n, z=z)
        if (iv.hi - iv.lo) / 2 <= half_width:
            return n
    raise ValueError(f"no n <= {n_max} reaches half-width {half_width}")


def prob_at_least(k: int, n: int, p: float) -> float:
    """P(K >= k) for K ~ Binomial(n, p) (e.g. how often a p = 0.737 policy scores >= 9/10)."""
    return float(stats.binom.sf(k - 1, n, p))


# ------------------------------------------------------------------ paired tests


def paired_table(a_ok: Iterable[bool], b_ok: Iterable[bool]) -> PairedTable:
    """Build the paired 2x2 from two aligned boolean sequences (one entry per layout)."""
    a = np.asarray(list(a_ok), dtype=bool)
    b = np.asarray(list(b_ok), dtype=bool)
    if a.shape != b.shape:
        raise ValueError("paired outcomes must have the same length")
    return PairedTable(int(np.sum(a & b)), int(np.sum(a & ~b)), int(np.sum(~a & b)), int(np.sum(~a & ~b)))


def mcnemar_exact_p(b: int, c: int) -> float:
    """Exact (conditional) McNemar p: the two-sided binomial test of b in m = b + c at 1/2,
    p = min(1, 2 P(X <= min(b, c))), X ~ Bin(m, 1/2) (McNemar 1947; Fagerland et al. 2013).
    No discordant pairs gives p = 1."""
    m = b + c
    if m == 0:
        return 1.0
    return float(min(1.0, 2 * stats.binom.cdf(min(b, c), m, 0.5)))


def mcnemar_midp(b: int, c: int) -> float:
    """Mid-p McNemar: the exact p minus the probability of the observed count,
    mid-p = 2 [P(X <= min(b,c)) - P(X = min(b,c))/2] = exact - P(X = b), capped at 1
    (b = c gives 1). Fagerland, Lydersen & Laake (2013) recommend it as the primary test."""
    m = b + c
    if m == 0 or b == c:
        return 1.0
    k = min(b, c)
    return float(min(1.0, 2 * stats.binom.cdf(k, m, 0.5) - stats.binom.pmf(k, m, 0.5)))


def mcnemar(b: int, c: int) -> McNemarResult:
    """McNemar's test on the discordant pairs b (A only) and c (B only), all variants:

    - exact: two-sided binomial test of b in b + c at 1/2 (`mcnemar_exact_p`);
    - mid-p: exact minus P(X = b) (`mcnemar_midp`; Fagerland, Lydersen & Laake 2013);
    - asymptotic: chi2 = (b - c)^2 / (b + c), 1 df (McNemar 1947);
    - continuity corrected: chi2_cc = (max(|b - c| - 1, 0))^2 / (b + c) (Edwards 1948).
      When b = c the correction is floored at 0 (statsmodels would give 1/(b+c)).
    With b + c = 0 every statistic is 0 and every p is 1 (no evidence either way).
    """
    if b < 0 or c < 0:
        raise ValueError("discordant counts must be non-negative")
    m = b + c
    if m == 0:
        return McNemarResult(b, c, 1.0, 1.0, 0.0, 1.0, 0.0, 1.0)
    chi2 = (b - c) ** 2 / m
    chi2_cc = max(abs(b - c) - 1, 0) ** 2 / m
    return McNemarResult(b, c, mcnemar_exact_p(b, c), mcnemar_midp(b, c), float(chi2),
                         float(stats.chi2.sf(chi2, 1)), float(chi2_cc), float(stats.chi2.sf(chi2_cc, 1)))


def discordant_floor(k: int) -> float:
    """Smallest two-sided exact McNemar p with k discordant pairs: 2 * 0.5^k (all k won by one
    policy), capped at 1. Five discordant pairs can never reach 0.05 (0.0625)."""
    return float(min(1.0, 2 * 0.5 ** k))


def min_discordant_for_alpha(alpha: float, test: str = "mcnemar_midp") -> int:
    """Fewest discordant pairs for which the test can reach p <= alpha at all (a k-0 split).

    Exact: 2 * 0.5^k <= alpha. Mid-p: 0.5^k <= alpha (its floor is half the exact floor).
    """
    k = 1
    while True:
        p = mcnemar_exact_p(k, 0) if test == "mcnemar_exact" else mcnemar_midp(k, 0)
        if p <= alpha:
            return k
        k += 1


# ------------------------------------------------------------------ paired differences


def _wilson_lu(k: int, n: int, z: float) -> tuple[float, float, float]:
    iv = wilson(k, n, z=z)
    return k / n, iv.lo, iv.hi


def newcombe_paired(t: PairedTable, level: float = 0.95) -> Interval:
    """Newcombe (1998b) method 10: square-and-add (hybrid score) interval for the paired
    difference rate(A) - rate(B), from the two Wilson intervals (l1,u1) for p1 = (a+b)/n and
    (l2,u2) for p2 = (a+c)/n and a correlation estimate phi:

        D   = p1 - p2
        lo  = D - sqrt((p1 - l1)^2 - 2 phi (p1 - l1)(u2 - p2) + (u2 - p2)^2)
        hi  = D + sqrt((p2 - l2)^2 - 2 phi (p2 - l2)(u1 - p1) + (u1 - p1)^2)
        phi = C / sqrt((a+b)(c+d)(a+c)(b+d)), with A = ad - bc and
              C = A - n/2 if A > n/2;  C = 0 if 0 <= A <= n/2;  C = A if A < 0;
              phi = 0 when any margin is zero.

    As tabulated by Fagerland, Lydersen & Laake (2014) ("Newcombe square-and-add"): on
    [[59, 6], [16, 80]] it gives -0.1186 to -0.0046. Default interval of the reports.
    """
    n = t.n
    if n == 0:
        return Interval(0.0, -1.0, 1.0, "newcombe", level)
    z = z_for_level(level)
    a, b, c, d = t.both, t.a_only, t.b_only, t.neither
    p1, l1, u1 = _wilson_lu(a + b, n, z)
    p2, l2, u2 = _wilson_lu(a + c, n, z)
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    if margins == 0:
        phi = 0.0
    else:
        big_a = a * d - b * c
        if big_a > n / 2:
            cc = big_a - n / 2
        elif big_a >= 0:
            cc = 0.0
        else:
            cc = big_a
        phi = cc / math.sqrt(margins)
    diff = p1 - p2
    lo = diff - math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    hi = diff + math.sqrt(max(0.0, (p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2))
    return Interval(diff, max(-1.0, lo), min(1.0, hi), "newcombe", level)


def _tango_p01(b: int, c: int, n: int, delta: float) -> float:
    """Constrained MLE of p01 (the B-only cell probability) given p10 - p01 = delta (Tango 1998):
    the positive root of 2n x^2 + W x - c delta (1 - delta) = 0, W = -b - c + (2n - b + c) delta."""
    w = -b - c + (2 * n - b + c) * delta
    disc = w * w + 8 * n * c * delta * (1 - delta)
    return (math.sqrt(max(disc, 0.0)) - w) / (4 * n)


def _tango_z(b: int, c: int, n: int, delta: float) -> float:
    """Tango's score statistic Z(delta) = (b - c - n delta) / sqrt(n (2 p01~ + delta (1 - delta)))."""
    var = n * (2 * _tango_p01(b, c, n, delta) + delta * (1 - delta))
    num = b - c - n * delta
    if var <= 0:
        return 0.0 if num == 0 else math.copysign(math.inf, num)
    return num / math.sqrt(var)


def tango_paired(t: PairedTable, level: float = 0.95) -> Interval:
    """Tango (1998) asymptotic score interval for the paired difference: all delta with
    |Z(delta)| <= z, where Z(delta) = (b - c - n delta) / sqrt(n (2 p01~ + delta(1 - delta)))
    and p01~ is the MLE of the B-only probability under p10 - p01 = delta (closed form, see
    `_tango_p01`). At delta = 0, Z = (b - c)/sqrt(b + c), McNemar's statistic, so the interval
    excludes 0 exactly when the uncorrected asymptotic McNemar test rejects. Bounds by root
    finding (scipy brentq). Fagerland et al. (2014): [[59,6],[16,80]] -> -0.1240 to -0.0054.
    """
    from scipy.optimize import brentq

    n = t.n
    if n == 0:
        return Interval(0.0, -1.0, 1.0, "tango", level)
    z = z_for_level(level)
    b, c = t.a_only, t.b_only
    d_hat = (b - c) / n

    def f(delta: float) -> float:
        return _tango_z(b, c, n, delta) - z

    def g(delta: float) -> float:
        return _tango_z(b, c, n, delta) + z

    eps = 1e-12
    # Z decreases in delta; lower bound solves Z = z below d_hat, upper solves Z = -z above.
    lo = -1.0 if f(-1 + eps) <= 0 else brentq(f, -1 + eps, d_hat, xtol=1e-12)
    hi = 1.0 if g(1 - eps) >= 0 else brentq(g, d_hat, 1 - eps, xtol=1e-12)
    return Interval(d_hat, float(lo), float(hi), "tango", level)


def bonett_price_paired(t: PairedTable, level: float = 0.95) -> Interval:
    """Bonett & Price (2012) adjusted Wald interval for the paired difference:
    p12 = (b + 1)/(n + 2), p21 = (c + 1)/(n + 2),
    (p12 - p21) +- z sqrt((p12 + p21 - (p12 - p21)^2) / (n + 2)), truncated to [-1, 1].
    The estimate reported is the observed (b - c)/n. Fagerland et al. (2014):
    [[59,6],[16,80]] -> -0.1195 to -0.0032."""
    n = t.n
    z = z_for_level(level)
    b, c = t.a_only, t.b_only
    p12, p21 = (b + 1) / (n + 2), (c + 1) / (n + 2)
    d = p12 - p21
    se = math.sqrt(max(0.0, p12 + p21 - d * d) / (n + 2))
    est = (b - c) / n if n else 0.0
    return Interval(est, max(-1.0, d - z * se), min(1.0, d + z * se), "bonett-price", level)


def wald_paired(t: PairedTable, level: float = 0.95) -> Interval:
    """Wald interval for the paired difference (for contrast; seeds/002 quotes it):
    D = (b - c)/n, se = sqrt(b + c - (b - c)^2/n) / n, D +- z se. Rough at small n."""
    n = t.n
    z = z_for_level(level)
    if n == 0:
        return Interval(0.0, -1.0, 1.0, "wald", level)
    b, c = t.a_only, t.b_only
    d = (b - c) / n
    se = math.sqrt(max(0.0, b + c - (b - c) ** 2 / n)) / n
    return Interval(d, max(-1.0, d - z * se), min(1.0, d + z * se), "wald", level)


_PAIRED_METHODS = {"newcombe": newcombe_paired, "tango": tango_paired,
                   "bonett-price": bonett_price_paired, "wald": wald_paired}


def paired_difference(t: PairedTable, method: str = "newcombe", level: float = 0.95) -> Interval:
    """Interval for rate(A) - rate(B) from paired data; method newcombe (default, Newcombe 1998
    method 10), tango (Tango 1998 score), bonett-price (Bonett & Price 2012) or wald."""
    try:
        fn = _PAIRED_METHODS[method]
    except KeyError:
        raise ValueError(f"unknown paired-difference method {method!r}; "
                         f"use one of {', '.join(_PAIRED_METHODS)}") from None
    return fn(t, level)


# ------------------------------------------------------------------ unpaired (contrast)


def fisher_exact(k1: int, n1: int, k2: int, n2: int) -> float:
    """Two-sided Fisher exact test of k1/n1 vs k2/n2 (Fisher 1935): with the margins fixed,
    the total hypergeometric probability of every table no more likely than the observed one
    (scipy.stats.fisher_exact). For contrast only: it ignores the pairing."""
    _check_kn(k1, n1)
    _check_kn(k2, n2)
    if n1 == 0 or n2 == 0:
        return 1.0
    return float(stats.fisher_exact([[k1, n1 - k1], [k2, n2 - k2]]).pvalue)


def newcombe_independent(k1: int, n1: int, k2: int, n2: int, level: float = 0.95) -> Interval:
    """Newcombe (1998a) method 10, hybrid score interval for p1 - p2 of independent rates:
    D = p1 - p2, lo = D - sqrt((p1 - l1)^2 + (u2 - p2)^2), hi = D + sqrt((u1 - p1)^2 + (p2 - l2)^2),
    with (l_i, u_i) the Wilson intervals. For contrast with the paired interval."""
    _check_kn(k1, n1)
    _check_kn(k2, n2)
    z = z_for_level(level)
    p1, l1, u1 = _wilson_lu(k1, n1, z)
    p2, l2, u2 = _wilson_lu(k2, n2, z)
    d = p1 - p2
    return Interval(d, d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2),
                    d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2), "newcombe-hybrid", level)


# ------------------------------------------------------------------ 3+ policies


def cochran_q(x: np.ndarray | Sequence[Sequence[int]]) -> CochranQResult:
    """Cochran's Q (Cochran 1950) for k >= 2 related binary samples; x is blocks x treatments
    (layouts x policies) of 0/1. With column totals C_j, row totals R_i and N = sum:
        Q = (k - 1) (k sum C_j^2 - N^2) / (k N - sum R_i^2),  Q ~ chi2(k - 1) under H0.
    Rows where every policy agrees add nothing. A zero denominator (no row varies) gives
    Q = 0, p = 1. With k = 2 it equals the uncorrected McNemar chi2."""
    arr = np.asarray(x, dtype=float)
    if arr.ndim != 2 or arr.shape[1] < 2:
        raise ValueError("Cochran's Q needs a blocks x treatments array with >= 2 treatments")
    k = arr.shape[1]
    col = arr.sum(axis=0)
    row = arr.sum(axis=1)
    total = arr.sum()
    den = k * total - np.sum(row ** 2)
    if den <= 0:
        return CochranQResult(0.0, k - 1, 1.0, arr.shape[0])
    q = (k - 1) * (k * np.sum(col ** 2) - total ** 2) / den
    return CochranQResult(float(q), k - 1, float(stats.chi2.sf(q, k - 1)), arr.shape[0])


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm (1979) step-down adjusted p-values: sort p ascending, p~_(i) = max_{j<=i}
    min(1, (m - j + 1) p_(j)), returned in the input order. Controls the family-wise error."""
    p = np.asarray(pvalues, dtype=float)
    m = len(p)
    if m == 0:
        return []
    order = np.argsort(p, kind="stable")
    adj = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adj = np.maximum.accumulate(adj)
    out = np.empty(m)
    out[order] = adj
    return [float(v) for v in out]


# ------------------------------------------------------------------ over training seeds


def t_interval(scores: Sequence[float], level: float = 0.95) -> MeanInterval:
    """Mean over s training seeds with a Student-t interval: mean +- t(1 - alpha/2, s - 1) sd/sqrt(s),
    sd the sample standard deviation (divide by s - 1). seeds/000: ten seeds 0.45 ... 0.41 ->
    0.434 +- 0.020."""
    x = np.asarray(scores, dtype=float)
    if x.size < 2:
        raise ValueError("a t interval needs at least 2 scores")
    return t_interval_from_summary(float(x.mean()), float(x.std(ddof=1)), int(x.size), level)


def t_interval_from_summary(mean: float, sd: float, n: int, level: float = 0.95) -> MeanInterval:
    """The same interval from a mean, a sample sd and the number of seeds."""
    t_crit = float(stats.t.ppf(1 - (1 - level) / 2, n - 1))
    h = t_crit * sd / math.sqrt(n)
    return MeanInterval(mean, sd, n, mean - h, mean + h, t_crit, level)


# ------------------------------------------------------------------ planning


def cell_probabilities(p_a: float, p_b: float, agreement: float | None = None,
                       discordance: float | None = None) -> tuple[float, float, float, float]:
    """Cell probabilities (p11, p10, p01, p00) of the paired table from the two success rates
    and the agreement r = p11 + p00 (or the discordance q = 1 - r = p10 + p01):
        p10 = (q + (p_a - p_b)) / 2,  p01 = (q - (p_a - p_b)) / 2,
        p11 = (p_a + p_b - q) / 2,     p00 = 1 - (p_a + p_b + q) / 2.
    All four must be >= 0: |p_a - p_b| <= q <= min(p_a + p_b, 2 - p_a - p_b). Neither given:
    independent outcomes, q = p_a (1 - p_b) + p_b (1 - p_a). Raises ValueError when impossible."""
    for name, v in (("p_a", p_a), ("p_b", p_b)):
        if not 0 <= v <= 1 or math.isnan(v):
            raise ValueError(f"{name} must be a probability in [0, 1], not {v}")
    if agreement is not None and discordance is not None:
        raise ValueError("give the agreement or the discordance, not both")
    if agreement is not None:
        if not 0 <= agreement <= 1:
            raise ValueError(f"agreement must be in [0, 1], not {agreement}")
        q = 1 - agreement
    elif discordance is not None:
        if not 0 <= discordance <= 1:
            raise ValueError(f"discordance must be in [0, 1], not {discordance}")
        q = discordance
    else:
        q = p_a * (1 - p_b) + p_b * (1 - p_a)
    delta = p_a - p_b
    q_min, q_max = abs(delta), min(p_a + p_b, 2 - p_a - p_b)
    tol = 1e-12
    if q < q_min - tol or q > q_max + tol:
        raise ValueError(
            f"impossible: with p_a={p_a:g} and p_b={p_b:g} the discordance must be between "
            f"{q_min:.4g} and {q_max:.4g} (agreement between {1 - q_max:.4g} and {1 - q_min:.4g}), "
            f"not {q:.4g}")
    q = min(max(q, q_min), q_max)
    p10, p01 = (q + delta) / 2, (q - delta) / 2
    p11 = (p_a + p_b - q) / 2
    p00 = 1 - (p_a + p_b + q) / 2
    return max(p11, 0.0), max(p10, 0.0), max(p01, 0.0), max(p00, 0.0)


@lru_cache(maxsize=32)
def _rejection_bounds(m_max: int, alpha: float, test: str) -> np.ndarray:
    """For every discordant count m = 0..m_max, the largest k <= m/2 such that b = k (and by
    symmetry b = m - k) is rejected at level alpha (p <= alpha); -1 when nothing is.

    Vectorised over m: the exact test's p(k) = 2 F(k) is increasing in k, so its bound is
    the largest k with F(k) <= alpha/2 (from scipy's binomial ppf, then checked); the mid-p
    p(k) = F(k) + F(k-1) is also increasing and its bound is that k or k + 1."""
    ms = np.arange(m_max + 1)
    tol = alpha * (1 + 1e-12)

    def p_of(k: np.ndarray) -> np.ndarray:
        kk = np.clip(k, 0, None)
        cdf = stats.binom.cdf(kk, ms, 0.5)
        if test == "mcnemar_exact":
            p = np.minimum(1.0, 2 * cdf)
        else:
            p = np.minimum(1.0, cdf + stats.binom.cdf(kk - 1, ms, 0.5))
            p = np.where(2 * kk == ms, 1.0, p)
        return np.where((k < 0) | (2 * k > ms), np.inf, p)

    k = stats.binom.ppf(alpha / 2, ms, 0.5).astype(np.int64)
    k = np.where(stats.binom.cdf(k, ms, 0.5) <= alpha / 2 * (1 + 1e-12), k, k - 1)
    k = np.minimum(k, ms // 2)
    # walk each bound to the exact answer (at most a couple of steps either way)
    for _ in range(3):
        k = np.where(p_of(k + 1) <= tol, k + 1, k)
    for _ in range(3):
        k = np.where((k >= 0) & (p_of(k) > tol), k - 1, k)
    k[0] = -1
    return k


def _conditional_rejection(m_max: int, theta: float, alpha: float, test: str) -> np.ndarray:
    """R(m) = P(reject | m discordant pairs), b ~ Bin(m, theta), for m = 0..m_max."""
    kb = _rejection_bounds(m_max, alpha, test)
    ms = np.arange(m_max + 1)
    has = kb >= 0
    r = np.zeros(m_max + 1)
    r[has] = (stats.binom.cdf(kb[has], ms[has], theta)
              + stats.binom.sf(ms[has] - kb[has] - 1, ms[has], theta))
    # for k = m/2 exactly (never for a sensible alpha) the two tails would overlap
    overlap = has & (2 * kb >= ms)
    r[overlap] = 1.0
    return r


def paired_power(n: int, p10: float, p01: float, alpha: float = 0.05,
                 test: str = "mcnemar_midp") -> PowerResult:
    """Exact power of the paired McNemar test (exact or mid-p) with n layouts, by enumeration
    over the discordant count (Fagerland et al. 2013 use the same enumeration):
        power = sum_{m=0}^{n} Bin(m; n, p10 + p01) * P(reject | m),
        P(reject | m) = sum over b in the rejection region of Bin(b; m, p10/(p10 + p01)).
    The rejection region of each m is b <= k_m or b >= m - k_m with k_m the largest count
    whose p <= alpha."""
    q = p10 + p01
    if n <= 0 or q <= 0:
        return PowerResult(max(n, 0), 0.0, 0.0)
    theta = p10 / q
    r = _conditional_rejection(n, theta, alpha, test)
    pm = stats.binom.pmf(np.arange(n + 1), n, q)
    return PowerResult(n, float(np.dot(pm, r)), n * q)


def layouts_needed(p10: float, p01: float, power: float = 0.8, alpha: float = 0.05,
                   test: str = "mcnemar_midp", n_max: int = 2000) -> int | None:
    """Smallest number of layouts n <= n_max whose exact power (see `paired_power`) reaches
    `power`; None if none does. Exact power is a saw-tooth in n, so a slightly larger n can
    have slightly less power; the smallest n is reported, as is usual."""
    q = p10 + p01
    if q <= 0 or p10 == p01:
        return None
    r = _conditional_rejection(n_max, p10 / q, alpha, test)
    nz = np.nonzero(r > 0)[0]
    if nz.size == 0:
        return None
    m_first = int(nz[0])
    # cheap exponential search for a bracket, then a linear scan inside it
    def pw(n: int) -> float:
        ms = np.arange(m_first, n + 1)
        return float(np.dot(stats.binom.pmf(ms, n, q), r[m_first:n + 1]))

    hi = max(m_first, 1)
    while hi <= n_max and pw(hi) < power:
        hi *= 2
    hi = min(hi, n_max)
    if pw(hi) < power:
        # power is only roughly monotone: scan the tail before giving up
        for n in range(hi, n_max + 1):
            if pw(n) >= power:
                return n
        return None
    lo = m_first
    # binary search on the (nearly monotone) curve, then step down through saw-tooth dips
    while lo < hi:
        mid = (lo + hi) // 2
        if pw(mid) >= power:
            hi = mid
        else:
            lo = mid + 1
    n = hi
    for back in range(n - 1, max(m_first, n - 40) - 1, -1):
        if pw(back) >= power:
            n = back
    return n


def independent_groups_n(p1: float, p2: float, alpha: float = 0.05, power: float = 0.8) -> int:
    """Per-group sample size for two independent rates (normal approximation, seeds/000):
        n = (z_{1-alpha/2} sqrt(2 pbar (1 - pbar)) + z_{power} sqrt(p1(1-p1) + p2(1-p2)))^2 / (p1 - p2)^2,
    pbar = (p1 + p2)/2, rounded up. 0.9 vs 0.8 -> 199; 0.9 vs 0.85 -> 686."""
    if p1 == p2:
        raise ValueError("equal rates: no sample size detects a zero difference")
    za = stats.norm.ppf(1 - alpha / 2)
    zb = stats.norm.ppf(power)
    pbar = (p1 + p2) / 2
    num = za * math.sqrt(2 * pbar * (1 - pbar)) + zb * math.sqrt(p1 * (1 - p1) + p2 * (1 - p2))
    return int(math.ceil(num * num / (p1 - p2) ** 2 - 1e-9))


def fisher_power(p1: float, p2: float, n: int, alpha: float = 0.05) -> float:
    """Exact power of the two-sided Fisher test with n trials per policy (seeds/004 step 5):
    sum of Bin(k1; n, p1) Bin(k2; n, p2) over all (k1, k2) with Fisher p < alpha. Fisher p by
    the hypergeometric (scipy), per total K, counting tables with pmf <= pmf_obs (1 + 1e-7)."""
    pm1 = stats.binom.pmf(np.arange(n + 1), n, p1)
    pm2 = stats.binom.pmf(np.arange(n + 1), n, p2)
    total = 0.0
    for big_k in range(0, 2 * n + 1):
        a_lo, a_hi = max(0, big_k - n), min(big_k, n)
        a = np.arange(a_lo, a_hi + 1)
        h = stats.hypergeom.pmf(a, 2 * n, big_k, n)
        order = np.sort(h)
        csum = np.cumsum(order)
        idx = np.searchsorted(order, h * (1 + 1e-7), side="right") - 1
        pv = np.minimum(1.0, csum[idx])
        rej = pv < alpha
        if rej.any():
            total += float(np.sum(pm1[a[rej]] * pm2[big_k - a[rej]]))
    return total


# ------------------------------------------------------------------ anytime-valid stopping


def evalue_discordant(a_only: int, b_only: int, alpha: float = 0.05, prior_a: float = 1.0) -> EValueResult:
    """Anytime-valid e-value for 'the policies are equally good' on the discordant pairs.

    Each discordant pair is a Bernoulli(theta) draw (1 = A won); H0: theta = 1/2. The mixture
    likelihood ratio with a Beta(prior_a, prior_a) prior on theta,
        E = B(prior_a + b, prior_a + c) / B(prior_a, prior_a) / 0.5^(b + c),
    is a non-negative martingale with mean 1 under H0, so by Ville's inequality
    P(sup_t E_t >= 1/alpha) <= alpha: rejecting when E >= 1/alpha keeps the type-I error <= alpha
    however often one looks (Ville 1939; Ramdas et al. 2023). The prior is symmetric, so the
    test is two-sided. Computed in logs (scipy.special.betaln)."""
    if a_only < 0 or b_only < 0:
        raise ValueError("discordant counts must be non-negative")
    if prior_a <= 0:
        raise ValueError("prior_a must be positive")
    log_e = (special.betaln(prior_a + a_only, prior_a + b_only) - special.betaln(prior_a, prior_a)
             + (a_only + b_only) * math.log(2.0))
    e = float(math.exp(min(log_e, 700.0)))
    threshold = 1.0 / alpha
    return EValueResult(e, a_only, b_only, alpha, threshold, e >= threshold, prior_a)


# ------------------------------------------------------------------ multi-task suites


def interquartile_mean(scores: np.ndarray | Sequence[float]) -> float:
    """Interquartile mean (Agarwal et al. 2021): pool all runs of all tasks, drop the lowest and
    highest 25 %, average the rest. Uses scipy.stats.trim_mean(x, 0.25), which cuts int(0.25 n)
    values from each end, as the released rliable library does (seeds/001: for n = 10 it keeps
    6 values where the paper's floor(n/2) would keep 5)."""
    x = np.asarray(scores, dtype=float).ravel()
    if x.size == 0:
        raise ValueError("no scores")
    return float(stats.trim_mean(x, 0.25))


def stratified_bootstrap_ci(scores: np.ndarray, metric: Callable[[np.ndarray], float] = interquartile_mean,
                            reps: int = 2000, level: float = 0.95,
                            rng: np.random.Generator | int | None = 0) -> Interval:
    """Stratified percentile bootstrap (Agarwal et al. 2021, section 4.1): scores is runs x tasks
    (N x M); each replicate redraws N runs with replacement separately within every task,
    recomputes `metric` on the N x M resample, and the interval is the (alpha/2, 1 - alpha/2)
    percentiles of the replicates. `rng` is a numpy Generator or a seed (reproducible)."""
    x = np.asarray(scores, dtype=float)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2 or x.shape[0] < 1:
        raise ValueError("scores must be runs x tasks")
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    n_runs, n_tasks = x.shape
    cols = np.arange(n_tasks)
    est = np.empty(reps)
    for i in range(reps):
        idx = gen.integers(0, n_runs, size=(n_runs, n_tasks))
        est[i] = metric(x[idx, cols])
    tail = (1 - level) / 2
    lo, hi = np.quantile(est, [tail, 1 - tail])
    return Interval(float(metric(x)), float(lo), float(hi), "stratified-bootstrap", level)


# ------------------------------------------------------------------ agreement between judges


def cohen_kappa(labels_1: Sequence, labels_2: Sequence) -> float:
    """Cohen's kappa (Cohen 1960) for two raters on the same items:
    kappa = (p_o - p_e) / (1 - p_e), p_o the observed agreement, p_e = sum_k p1_k p2_k the
    agreement expected from the raters' marginal rates. 1 when p_e = 1 and they agree fully."""
    if len(labels_1) != len(labels_2):
        raise ValueError("both raters must label the same items")
    if not labels_1:
        return float("nan")
    cats = sorted(set(labels_1) | set(labels_2), key=str)
    index = {c: i for i, c in enumerate(cats)}
    m = np.zeros((len(cats), len(cats)))
    for x, y in zip(labels_1, labels_2):
        m[index[x], index[y]] += 1
    m /= m.sum()
    po = float(np.trace(m))
    pe = float(np.dot(m.sum(axis=1), m.sum(axis=0)))
    if pe >= 1.0:
        return 1.0 if po >= 1.0 else 0.0
    return (po - pe) / (1 - pe)


def fleiss_kappa(counts: np.ndarray | Sequence[Sequence[int]]) -> float:
    """Fleiss' kappa (Fleiss 1971); counts is items x categories, each row summing to the same
    number of raters r: P_i = (sum_j n_ij^2 - r) / (r (r - 1)), P-bar = mean P_i,
    p_j = sum_i n_ij / (N r), P_e = sum p_j^2, kappa = (P-bar - P_e) / (1 - P_e)."""
    x = np.asarray(counts, dtype=float)
    r = x.sum(axis=1)
    if x.ndim != 2 or x.shape[0] == 0 or not np.allclose(r, r[0]) or r[0] < 2:
        raise ValueError("Fleiss' kappa needs items x categories with the same number (>= 2) of raters per item")
    r0 = r[0]
    p_i = (np.sum(x * x, axis=1) - r0) / (r0 * (r0 - 1))
    p_bar = p_i.mean()
    p_j = x.sum(axis=0) / x.sum()
    p_e = float(np.sum(p_j ** 2))
    if p_e >= 1.0:
        return 1.0 if p_bar >= 1.0 else 0.0
    return float((p_bar - p_e) / (1 - p_e))


def plan(p_a: float, p_b: float, agreement: float | None = None, discordance: float | None = None,
         power: float = 0.8, alpha: float = 0.05, test: str = "mcnemar_midp",
         n_max: int = 2000) -> PlanResult:
    """Planning summary for `orchestrator plan`: layouts needed for 80 %, 90 % and the requested
    power with the paired exact test (`layouts_needed`), the per-policy trials an unpaired
    design would need (`independent_groups_n`), and the fewest discordant pairs that can reach
    alpha at all (`min_discordant_for_alpha`). Raises ValueError on impossible inputs."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), not {alpha}")
    if not 0 < power < 1:
        raise ValueError(f"power must be in (0, 1), not {power}")
    _p11, p10, p01, _p00 = cell_probabilities(p_a, p_b, agreement, discordance)
    q = p10 + p01
    wanted = sorted({0.8, 0.9, round(power, 6)})
    targets = tuple((w, layouts_needed(p10, p01, w, alpha, test, n_max)) for w in wanted)
    unpaired = tuple((w, independent_groups_n(p_a, p_b, alpha, w) if p_a != p_b else None) for w in wanted)
    return PlanResult(p_a, p_b, q, 1 - q, p10, p01, alpha, test, targets, unpaired,
                      min_discordant_for_alpha(alpha, test), n_max)
