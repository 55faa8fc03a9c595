"""Planning: cell probabilities of the paired table, exact power of the paired McNemar test
by enumeration, and the unpaired contrast (normal formula and exact Fisher power).

References: Fagerland MW, Lydersen S, Laake P (2013) BMC Med Res Methodol 13:91 (exact
power by enumeration); Fleiss JL, Levin B, Paik MC (2003) Statistical Methods for Rates and
Proportions, 3rd ed., ch. 4 (independent-groups normal formula, without continuity correction).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy import special, stats

from orchestrator.analysis.stats.types import PowerResult


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


def power_over_discordant(n: int, q: float, r: np.ndarray) -> float:
    """P(reject with n layouts) = sum_{m=0}^{n} Bin(m; n, q) R(m), where each layout is
    discordant with probability q and R(m) = r[m] is the probability of rejecting given m
    discordant layouts (a fixed-n test's or a sequential rule's: `evalue_power`)."""
    return float(np.dot(stats.binom.pmf(np.arange(n + 1), n, q), r[: n + 1]))


def first_reaching(pw, lo: int, hi: int, power: float) -> int:
    """Bisection: the smallest n in [lo, hi] with pw(n) >= power, given pw(hi) >= power and pw
    non-decreasing (on a saw-tooth curve, a crossing near the smallest)."""
    while lo < hi:
        mid = (lo + hi) // 2
        if pw(mid) >= power:
            hi = mid
        else:
            lo = mid + 1
    return hi


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
    r = _conditional_rejection(n, p10 / q, alpha, test)
    return PowerResult(n, power_over_discordant(n, q, r), n * q)


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

    def pw(n: int) -> float:
        return power_over_discordant(n, q, r)

    # cheap exponential search for a bracket, then a linear scan inside it
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
    # binary search on the (nearly monotone) curve, then step down through saw-tooth dips
    hi = first_reaching(pw, m_first, hi, power)
    # the 40 smaller n at once (one scipy call: its per-call cost dominates at these sizes)
    back = np.arange(max(m_first, hi - 40), hi)
    if back.size == 0:
        return hi
    ms = np.arange(m_first, hi + 1)
    reach = back[stats.binom.pmf(ms[None, :], back[:, None], q) @ r[m_first:hi + 1] >= power]
    return int(reach[0]) if reach.size else hi


def independent_groups_n(p1: float, p2: float, alpha: float = 0.05, power: float = 0.8) -> int:
    """Per-group sample size for two independent rates (normal approximation, Fleiss et al. 2003):
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
    """Exact power of the two-sided Fisher test with n trials per policy (by enumeration):
    sum of Bin(k1; n, p1) Bin(k2; n, p2) over all (k1, k2) with Fisher p < alpha. Given the
    total K = k1 + k2, k1 is hypergeometric, h(k1) = C(n, k1) C(n, K - k1) / C(2n, K), and the
    Fisher p of k1 is the sum of h over the tables with h <= h(k1) (1 + 1e-7). Totals K whose
    probability is below 1e-13 are skipped (together they move the power by < 3e-10 n)."""
    ks = np.arange(n + 1)
    pm1 = stats.binom.pmf(ks, n, p1)
    pm2 = stats.binom.pmf(ks, n, p2)
    totals = np.nonzero(np.convolve(pm1, pm2) > 1e-13)[0]
    if totals.size == 0:
        return 0.0
    big_k = totals[:, None]
    inside = (ks[None, :] <= big_k) & (big_k - ks[None, :] <= n)
    k2 = np.clip(big_k - ks[None, :], 0, n)
    log_h = (_log_choose(n, ks)[None, :] + _log_choose(n, k2) - _log_choose(2 * n, big_k))
    h = np.where(inside, np.exp(log_h), 0.0)
    total = 0.0
    for row, kk in enumerate(totals):
        hr = h[row]
        order = np.sort(hr)
        csum = np.cumsum(order)
        idx = np.searchsorted(order, hr * (1 + 1e-7), side="right") - 1
        rej = inside[row] & (np.minimum(1.0, csum[idx]) < alpha)
        if rej.any():
            total += float(np.sum(pm1[ks[rej]] * pm2[kk - ks[rej]]))
    return total


def _log_choose(n: int | np.ndarray, k: np.ndarray) -> np.ndarray:
    return special.gammaln(n + 1) - special.gammaln(k + 1) - special.gammaln(n - k + 1)


def fisher_trials_needed(p1: float, p2: float, power: float = 0.8, alpha: float = 0.05,
                         n_max: int = 5000) -> int | None:
    """Smallest trials per policy whose exact Fisher power (`fisher_power`) reaches `power`,
    the unpaired design's counterpart of `layouts_needed`; None if no n <= n_max does. Exact
    power is a slight saw-tooth in n: bisection on the rising curve, then a scan of the 10
    smaller n for an earlier crossing. 0.9 vs 0.6 at 80 %: 36; 0.9 vs 0.7: 69 (the normal
    formula, `independent_groups_n`, says 32 and 62)."""
    if p1 == p2:
        return None

    def reaches(n: int) -> bool:
        return fisher_power(p1, p2, n, alpha) >= power

    # bracket from the normal formula's answer in steps of 10 % (Fisher needs a little more),
    # then bisect
    lo = hi = min(n_max, max(2, independent_groups_n(p1, p2, alpha, power)))
    while not reaches(hi):
        if hi >= n_max:
            return None
        lo, hi = hi + 1, min(n_max, max(hi + 1, int(hi * 1.1)))
    if lo == hi:
        lo = max(1, int(hi / 1.1))
        while lo > 1 and reaches(lo):
            lo = max(1, int(lo / 1.1))
    while lo < hi:
        mid = (lo + hi) // 2
        if reaches(mid):
            hi = mid
        else:
            lo = mid + 1
    n = hi
    for back in range(hi - 1, max(1, hi - 10) - 1, -1):
        if reaches(back):
            n = back
    return n
