"""Exact power of the pre-registered e-value stopping rule, and the layouts it needs.

The rule (`analysis.stopping`) looks after every layout and stops, rejecting, the first time
the Beta-mixture e-value of the discordant layouts (`stats.evalue_discordant`) reaches
1/alpha; it gives up at `max_layouts`. Its e-value changes only at a discordant layout, so
whether it has rejected after n layouts depends on the discordant sequence alone:

- Given m discordant layouts, each won by A with probability theta = p10 / (p10 + p01), the
  probability R(m) that the e-value has reached 1/alpha at some discordant count <= m is a
  first-passage probability, computed exactly by dynamic programming over the number b of A
  wins with the rejection region absorbing (the boundary-crossing recursion of Wald 1947,
  chapter 3, on a lattice).
- The number of discordant layouts among n is Binomial(n, q), q = p10 + p01, so
      P(reject by layout n) = sum_m Bin(m; n, q) R(m),
  which, unlike a fixed-n test's power, never decreases in n.

`evalue_power(n, ...)` is that probability; `evalue_layouts_needed` the smallest n reaching a
target power. With K pairwise comparisons the rule's threshold is K/alpha: pass alpha/K.
Checked against enumeration of every discordant sequence and against simulation of the
runner's rule (tests/test_stats_evalue_rule.py). The sum over m and the bisection are
`power.power_over_discordant` and `power.first_reaching`, shared with the fixed-n test.

References: Ville J (1939). Etude critique de la notion de collectif. Gauthier-Villars. Wald A
(1947). Sequential Analysis. Wiley. Ramdas A, Grunwald P, Vovk V, Shafer G (2023). Game-theoretic
statistics and safe anytime-valid inference. Statistical Science 38:576-601.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy import special

from orchestrator.analysis.stats.power import first_reaching, power_over_discordant


@lru_cache(maxsize=64)
def _low_bounds(m_max: int, alpha: float, prior_a: float) -> np.ndarray:
    """k_m for m = 0..m_max: the e-value after b A-wins of m discordant layouts is >= 1/alpha
    exactly when b <= k_m or b >= m - k_m (the Beta mixture is symmetric and log-convex in b);
    -1 when no b is. Row by row, in logs (scipy.special.betaln)."""
    target = math.log(1.0 / alpha) - 1e-12
    out = np.full(m_max + 1, -1, dtype=int)
    base = special.betaln(prior_a, prior_a)
    for m in range(1, m_max + 1):
        b = np.arange(m // 2 + 1)
        log_e = special.betaln(prior_a + b, prior_a + m - b) - base + m * math.log(2.0)
        hit = np.nonzero(log_e >= target)[0]
        out[m] = int(hit[-1]) if hit.size else -1
    return out


class _FirstPassage:
    """The dynamic programme behind `rejection_by_discordant`, resumable: `extend(m_max)` carries
    it on from where it stopped. The not-yet-rejected mass lives on the band of b strictly
    between the two rejection regions; only that band is updated (outside it every entry is 0,
    so the result is the full recursion's)."""

    def __init__(self, theta: float, alpha: float, prior_a: float):
        if not 0 <= theta <= 1:
            raise ValueError(f"theta must be in [0, 1], not {theta}")
        if not 0 < alpha < 1:
            raise ValueError(f"alpha must be in (0, 1), not {alpha}")
        self.theta, self.alpha, self.prior_a = float(theta), float(alpha), float(prior_a)
        self.alive: np.ndarray = np.zeros(2)
        self.alive[0] = 1.0              # P(b A-wins so far and not yet rejected), b = 0..m
        self.lo, self.hi = 0, 0          # the band holding that mass (empty once hi < lo)
        self.absorbed = 0.0
        self.out: list[float] = []       # R(m) for m = 0..len(out) - 1

    def extend(self, m_max: int) -> np.ndarray:
        size = 64
        while size < m_max + 1:
            size *= 2                    # bounds of a power-of-two size: few distinct cache entries
        bounds = _low_bounds(size, self.alpha, self.prior_a)
        if self.alive.size < m_max + 2:
            self.alive = np.concatenate([self.alive, np.zeros(m_max + 2 - self.alive.size)])
        alive, theta, lo, hi, absorbed = self.alive, self.theta, self.lo, self.hi, self.absorbed
        for m in range(len(self.out), m_max + 1):
            if m > 0 and lo <= hi:       # one more discordant layout: b -> b + 1 with theta, stays with 1 - theta
                moved = alive[lo: hi + 1] * theta
                alive[lo: hi + 1] *= 1 - theta
                alive[lo + 1: hi + 2] += moved
                hi += 1
            k = int(bounds[m])
            if k >= 0 and lo <= hi:
                if 2 * k >= m:           # every split rejects (only for an absurdly large alpha)
                    absorbed += float(alive[lo: hi + 1].sum())
                    alive[lo: hi + 1] = 0.0
                    lo, hi = 1, 0
                else:
                    if lo <= k:
                        absorbed += float(alive[lo: k + 1].sum())
                        alive[lo: k + 1] = 0.0
                        lo = k + 1
                    if hi >= m - k:
                        absorbed += float(alive[m - k: hi + 1].sum())
                        alive[m - k: hi + 1] = 0.0
                        hi = m - k - 1
            self.out.append(absorbed)
        self.lo, self.hi, self.absorbed = lo, hi, absorbed
        return np.array(self.out[: m_max + 1])


def rejection_by_discordant(m_max: int, theta: float, alpha: float = 0.05, prior_a: float = 1.0) -> np.ndarray:
    """R(m), m = 0..m_max: the probability that the e-value rule has rejected within the first
    m discordant layouts when each is A's with probability theta (module docstring)."""
    return _FirstPassage(theta, alpha, prior_a).extend(m_max)


def evalue_power(n: int, p10: float, p01: float, alpha: float = 0.05, prior_a: float = 1.0) -> float:
    """P(the e-value rule has rejected by layout n) with cell probabilities p10 (A only) and
    p01 (B only): sum_m Bin(m; n, p10 + p01) R(m) (module docstring). Exact."""
    q = p10 + p01
    if n <= 0 or q <= 0:
        return 0.0
    return power_over_discordant(n, q, rejection_by_discordant(n, p10 / q, alpha, prior_a))


def evalue_layouts_needed(p10: float, p01: float, power: float = 0.8, alpha: float = 0.05,
                          n_max: int = 2000, prior_a: float = 1.0) -> int | None:
    """Smallest n <= n_max at which the e-value rule has rejected with probability >= `power`
    (`evalue_power`, non-decreasing in n, so a bisection finds it); None when n_max is not
    enough (or the cells are equal)."""
    q = p10 + p01
    if q <= 0 or p10 == p01:
        return None
    # grow the lattice fourfold at a time: the n needed is usually far below n_max
    passage = _FirstPassage(p10 / q, alpha, prior_a)
    hi = 16
    while True:
        hi = min(hi * 4, n_max)
        r = passage.extend(hi)
        if power_over_discordant(hi, q, r) >= power:
            break
        if hi == n_max:
            return None
    return first_reaching(lambda n: power_over_discordant(n, q, r), 1, hi, power)
