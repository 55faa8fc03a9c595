"""Anytime-valid confidence sequences for a campaign that may stop early.

After an optional stop (the pre-registered e-value rule) a fixed-n interval such as Newcombe's
is not valid: the stopping time depends on the data, and the intervals of campaigns that stop
early miss the truth far more often than 5 %. A confidence sequence (CS) is a sequence of
intervals C_1, C_2, ... with P(theta in C_t for every t) >= 1 - alpha, so the interval at any
data-dependent stopping time keeps its coverage (Howard, Ramdas, McAuliffe & Sekhon 2021).

Discordant split. Each discordant layout is a Bernoulli(theta) draw, theta = P(A won | the
policies disagreed). With b wins of A and c of B, the Beta(a, a) mixture martingale for a
candidate theta_0,

    M_t(theta_0) = B(a + b, a + c) / B(a, a) / (theta_0^b (1 - theta_0)^c),

is a non-negative martingale with mean 1 when theta = theta_0, so by Ville's inequality
P(sup_t M_t(theta) >= 1/alpha) <= alpha, and C_t = {theta_0 : M_t(theta_0) < 1/alpha} is a
(1 - alpha) CS: the conjugate Beta-binomial mixture CS of Howard et al. (2021, section 3.2;
Robbins 1970). At theta_0 = 1/2 M_t is the e-value of `stats.evalue_discordant`, so the CS
excludes 1/2 exactly when the stopping rule rejects. log M_t is convex in theta_0 and M_t <= 1
at theta_0 = b / (b + c), so C_t is an interval around the observed split.

Paired difference. D = rate(A) - rate(B) = q (2 theta - 1), with q = P(discordant layout).
With a CS for q (the same mixture over all n layouts, level alpha/2) and one for theta (alpha/2),
both hold at every time with probability >= 1 - alpha (union bound), so the range of
q (2 theta - 1) over the two intervals is a (1 - alpha) CS for D (`difference_cs`).

References: Howard SR, Ramdas A, McAuliffe J, Sekhon J (2021). Time-uniform, nonparametric,
nonasymptotic confidence sequences. Annals of Statistics 49:1055-1080. Robbins H (1970).
Statistical methods related to the law of the iterated logarithm. Ann Math Stat 41:1397-1409.
Ville J (1939). Etude critique de la notion de collectif. Gauthier-Villars.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from orchestrator.analysis.stats.types import Interval


def _log_mixture(k: np.ndarray, m: np.ndarray, prior_a: float) -> np.ndarray:
    """log of the Beta(prior_a, prior_a) mixture likelihood of k successes in m draws."""
    return special.betaln(prior_a + k, prior_a + m - k) - special.betaln(prior_a, prior_a)


def _log_ratio(theta: np.ndarray, k: np.ndarray, m: np.ndarray, log_mix: np.ndarray) -> np.ndarray:
    """log M(theta) = log mixture - log theta^k (1 - theta)^(m - k)."""
    return log_mix - special.xlogy(k, theta) - special.xlog1py(m - k, -theta)


def beta_binomial_bounds(k: np.ndarray, m: np.ndarray, alpha: float = 0.05,
                         prior_a: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised bounds of {theta : M(theta) < 1/alpha} for arrays of (k, m): log M is convex
    in theta with its minimum (<= 0) at k/m, so each bound is found by bisection on its side
    (44 halvings: within 1e-13). m = 0 gives [0, 1]; an end whose ratio stays below 1/alpha
    (always k = 0 for the lower, k = m for the upper) is 0 or 1."""
    k = np.asarray(k, dtype=float).ravel()
    m = np.asarray(m, dtype=float).ravel()
    target = math.log(1 / alpha)
    mle = np.divide(k, m, out=np.full_like(k, 0.5), where=m > 0)
    kk, mm = np.concatenate([k, k]), np.concatenate([m, m])
    log_mix = _log_mixture(kk, mm, prior_a)
    outside = np.concatenate([np.zeros_like(k), np.ones_like(k)])     # lower bounds, then upper
    inside = np.concatenate([mle, mle])
    edge_in = _log_ratio(outside, kk, mm, log_mix) < target
    for _ in range(44):
        mid = (outside + inside) / 2
        out = _log_ratio(mid, kk, mm, log_mix) >= target
        outside = np.where(out, mid, outside)
        inside = np.where(out, inside, mid)
    bounds = np.where(edge_in, np.concatenate([np.zeros_like(k), np.ones_like(k)]), inside)
    return bounds[: len(k)], bounds[len(k):]


def beta_binomial_cs(k: int, m: int, alpha: float = 0.05, prior_a: float = 1.0) -> Interval:
    """The Beta-binomial mixture confidence sequence for a Bernoulli rate after k successes in
    m draws: {theta : M(theta) < 1/alpha} (module docstring). Valid at any stopping time."""
    if not 0 <= k <= m or int(k) != k or int(m) != m:
        raise ValueError(f"need integer counts 0 <= k <= m, not k={k}, m={m}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), not {alpha}")
    lo, hi = beta_binomial_bounds(np.array([k]), np.array([m]), alpha, prior_a)
    return Interval(k / m if m else float("nan"), float(lo[0]), float(hi[0]), "beta-binomial-cs", 1 - alpha)


def _difference_box(q_lo: np.ndarray, q_hi: np.ndarray, t_lo: np.ndarray,
                    t_hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Range of q (2 theta - 1) over q in [q_lo, q_hi], theta in [t_lo, t_hi] (elementwise)."""
    corners = np.stack([q * (2 * t - 1) for q in (q_lo, q_hi) for t in (t_lo, t_hi)])
    return corners.min(axis=0), corners.max(axis=0)


def difference_cs(a_only: int, b_only: int, n: int, alpha: float = 0.05, prior_a: float = 1.0) -> Interval:
    """Anytime-valid (1 - alpha) interval for D = rate(A) - rate(B) after n paired layouts with
    a_only layouts won by A alone and b_only by B alone: the q-CS (discordant layouts among n)
    and the theta-CS (A's share of the discordant) at alpha/2 each give a box for D; its range
    is returned. It always holds the observed (b - c) / n. (The running intersection over time
    would also be valid and narrower, but under drift it can exclude the final estimate, which
    reads badly in a report; this is the interval at the stopping time alone.)"""
    if not (0 <= a_only and 0 <= b_only and a_only + b_only <= n):
        raise ValueError(f"need 0 <= a_only + b_only <= n, not {a_only}, {b_only}, {n}")
    if n == 0:
        return Interval(0.0, -1.0, 1.0, "beta-binomial-cs", 1 - alpha)
    m = a_only + b_only
    lo, hi = beta_binomial_bounds(np.array([m, a_only]), np.array([n, m]), alpha / 2, prior_a)
    box_lo, box_hi = _difference_box(lo[:1], hi[:1], lo[1:], hi[1:])
    return Interval((a_only - b_only) / n, float(box_lo[0]), float(box_hi[0]), "beta-binomial-cs", 1 - alpha)
