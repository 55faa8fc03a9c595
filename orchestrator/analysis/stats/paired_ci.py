"""Intervals for the paired difference rate(A) - rate(B) = (b - c) / n.

References: Newcombe RG (1998b) Statistics in Medicine 17:2635-2650; Tango T (1998)
Statistics in Medicine 17:891-908; Bonett DG, Price RM (2012) J Educ Behav Stat 37:479-488;
Fagerland MW, Lydersen S, Laake P (2014) Statistics in Medicine 33:2850-2875.
"""

from __future__ import annotations

import math

from orchestrator.analysis.stats.proportion import wilson, wilson_bounds, z_for_level
from orchestrator.analysis.stats.types import Interval, PairedTable


def _wilson_lu(k: float, n: float, z: float) -> tuple[float, float, float]:
    """(k/n, Wilson lower, Wilson upper); real-valued k and n (effective counts of a clustered
    design, see `stats.clustered`) go through the same formula, vectorised."""
    if int(k) == k and int(n) == n:
        iv = wilson(int(k), int(n), z=z)
        return k / n, iv.lo, iv.hi
    lo, hi = wilson_bounds(k, n, z)
    return k / n, float(lo), float(hi)


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
    if t.n == 0:
        return Interval(0.0, -1.0, 1.0, "newcombe", level)
    diff, lo, hi = newcombe_cells(t.both, t.a_only, t.b_only, t.neither, z_for_level(level))
    return Interval(diff, lo, hi, "newcombe", level)


def newcombe_cells(a: float, b: float, c: float, d: float, z: float) -> tuple[float, float, float]:
    """`newcombe_paired` on four cell counts, which may be real numbers (a clustered design's
    counts divided by its design effect): (difference, lower, upper), bounds clipped to [-1, 1]."""
    n = a + b + c + d
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
    return diff, max(-1.0, lo), min(1.0, hi)


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
