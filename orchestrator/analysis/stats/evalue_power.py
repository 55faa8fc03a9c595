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
runner's rule (tests/test_stats_evalue_power.py).

References: Ville J (1939). Etude critique de la notion de collectif. Gauthier-Villars. Wald A
(1947). Sequential Analysis. Wiley. Ramdas A, Grunwald P, Vovk V, Shafer G (2023). Game-theoretic
statistics and safe anytime-valid inference. Statistical Science 38:576-601.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special, stats


def _rejects(m_max: int, alpha: float, prior_a: float) -> np.ndarray:
    """Boolean [m, b]: the e-value after b A-wins of m discordant layouts is >= 1/alpha."""
    m = np.arange(m_max + 1)[:, None]
    b = np.arange(m_max + 1)[None, :]
    valid = b <= m
    log_e = (special.betaln(prior_a + b, prior_a + np.maximum(m - b, 0)) - special.betaln(prior_a, prior_a)
             + m * math.log(2.0))
    return valid & (log_e >= math.log(1.0 / alpha) - 1e-12)


def rejection_by_discordant(m_max: int, theta: float, alpha: float = 0.05, prior_a: float = 1.0) -> np.ndarray:
    """R(m), m = 0..m_max: the probability that the e-value rule has rejected within the first
    m discordant layouts when each is A's with probability theta (module docstring)."""
    if not 0 <= theta <= 1:
        raise ValueError(f"theta must be in [0, 1], not {theta}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), not {alpha}")
    rejects = _rejects(m_max, alpha, prior_a)
    alive = np.zeros(m_max + 2)
    alive[0] = 1.0                       # P(b A-wins so far and not yet rejected)
    out = np.zeros(m_max + 1)
    absorbed = 0.0
    for m in range(m_max + 1):
        if m > 0:
            nxt = np.zeros_like(alive)
            nxt[1:] += alive[:-1] * theta
            nxt[:-1] += alive[:-1] * (1 - theta)
            alive = nxt
        hit = rejects[m, : m + 1]
        absorbed += float(alive[: m + 1][hit].sum())
        alive[: m + 1][hit] = 0.0
        out[m] = absorbed
    return out


def evalue_power(n: int, p10: float, p01: float, alpha: float = 0.05, prior_a: float = 1.0) -> float:
    """P(the e-value rule has rejected by layout n) with cell probabilities p10 (A only) and
    p01 (B only): sum_m Bin(m; n, p10 + p01) R(m) (module docstring). Exact."""
    q = p10 + p01
    if n <= 0 or q <= 0:
        return 0.0
    r = rejection_by_discordant(n, p10 / q, alpha, prior_a)
    return float(np.dot(stats.binom.pmf(np.arange(n + 1), n, q), r))


def evalue_layouts_needed(p10: float, p01: float, power: float = 0.8, alpha: float = 0.05,
                          n_max: int = 2000, prior_a: float = 1.0) -> int | None:
    """Smallest n <= n_max at which the e-value rule has rejected with probability >= `power`
    (`evalue_power`, non-decreasing in n, so a bisection finds it); None when n_max is not
    enough (or the cells are equal)."""
    q = p10 + p01
    if q <= 0 or p10 == p01:
        return None
    # the discordant count needed is far below n for any q; cap the lattice at what n_max can hold
    r = rejection_by_discordant(n_max, p10 / q, alpha, prior_a)

    def pw(n: int) -> float:
        return float(np.dot(stats.binom.pmf(np.arange(n + 1), n, q), r[: n + 1]))

    if pw(n_max) < power:
        return None
    lo, hi = 1, n_max
    while lo < hi:
        mid = (lo + hi) // 2
        if pw(mid) >= power:
            hi = mid
        else:
            lo = mid + 1
    return lo
