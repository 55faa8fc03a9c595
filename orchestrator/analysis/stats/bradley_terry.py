"""Bradley-Terry ratings from paired wins, with a bootstrap over the units the wins came from.

Model (Bradley & Terry 1952; Zermelo 1929): policy i beats policy j with probability
sigma(theta_i - theta_j), sigma the logistic function; theta is on the log-odds scale. In a
paired campaign a win is a discordant layout: i succeeded and j failed on the same layout run.
(If each policy succeeds on a layout independently with rate p_i, a discordant layout is won by
i with probability odds_i / (odds_i + odds_j): the model holds with theta_i = logit p_i + c.)

Estimate: the maximum of the log-likelihood sum_{i,j} W_ij log sigma(theta_i - theta_j) minus
the penalty alpha sum_i theta_i^2 (W_ij: wins of i over j), i.e. the MAP estimate under a
N(0, 1 / (2 alpha)) prior, the objective of choix's `opt_pairwise`. The penalty keeps the
estimate finite when a policy wins (or loses) every comparison, where the plain maximum
likelihood does not exist (Ford 1957), and it makes sum_i theta_i = 0 at the optimum. It is
found by Newton's method (the objective is strictly concave), for all bootstrap replicates at
once.

Interval: the basic (reverse percentile) bootstrap over units within strata, [2 theta^ - q(1 -
alpha/2), 2 theta^ - q(alpha/2)] with q the quantiles of the replicates (Davison & Hinkley 1997,
eq. 5.6). A unit is one (campaign, mark): its wins are redrawn together, so wins on one mark
count as one draw; the strata are the campaigns (each replicate redraws every campaign's marks
with replacement from that campaign). The plain percentile interval undercovers here: the
estimate is biased away from 0 with few marks and the percentile interval repeats that bias
(measured: 0.92 at 60 marks, the basic interval 0.96; docs/statistics.md).

References: Bradley RA, Terry ME (1952). Rank analysis of incomplete block designs I.
Biometrika 39:324-345. Zermelo E (1929). Die Berechnung der Turnier-Ergebnisse als ein
Maximumproblem der Wahrscheinlichkeitsrechnung. Math Z 29:436-460. Ford LR (1957). Solution of
a ranking problem from binary comparisons. Am Math Monthly 64:28-33. Clopper CJ, Pearson ES (1934).
Biometrika 26:404-413. Rao JNK, Scott AJ (1992). Biometrics 48:577-585. Davison AC, Hinkley DV
(1997). Bootstrap Methods and their Application. Cambridge University Press. Hunter DR (2004). MM
algorithms for generalized Bradley-Terry models. Ann Stat 32:384-406. Maystre L (2015). choix.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import beta

from orchestrator.analysis.stats.aggregate import chunks, resample_counts
from orchestrator.analysis.stats.clustered_rate import rate_design_effect

ALPHA = 0.01           # penalty: prior sd 1 / sqrt(2 alpha) ~ 7 log-odds, weak
REPS = 2_000


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1 + np.tanh(x / 2))


def fit(wins: np.ndarray, alpha: float = ALPHA, tol: float = 1e-10, max_iter: int = 200) -> np.ndarray:
    """Penalised maximum-likelihood ratings for a P x P win matrix (or a stack B x P x P):
    theta (P,) or (B, P). Newton's method, each step's largest move capped at 2 (log-odds)."""
    w = np.asarray(wins, dtype=float)
    single = w.ndim == 2
    w = w[None] if single else w
    if alpha <= 0:
        raise ValueError("the penalty alpha must be > 0")
    n = w + np.swapaxes(w, 1, 2)
    size = w.shape[-1]
    theta = np.zeros(w.shape[:2])
    eye = np.eye(size)
    for _ in range(max_iter):
        p = _sigmoid(theta[:, :, None] - theta[:, None, :])
        grad = (w - n * p).sum(axis=2) - 2 * alpha * theta              # gradient of the objective
        curv = n * p * (1 - p)
        hess = curv - curv.sum(axis=2)[:, :, None] * eye - 2 * alpha * eye     # negative definite
        step = np.linalg.solve(hess, grad[:, :, None])[:, :, 0]
        step *= np.minimum(1.0, 2.0 / np.maximum(np.abs(step).max(axis=1, keepdims=True), 1e-300))
        theta = theta - step
        if np.abs(step).max() < tol:
            break
    return theta[0] if single else theta


def components(wins: np.ndarray) -> list[list[int]]:
    """Connected components of the comparison graph (an edge where i and j have at least one
    win between them), each sorted, in order of their smallest member."""
    n = np.asarray(wins) + np.asarray(wins).T
    size = n.shape[0]
    seen = [False] * size
    out = []
    for start in range(size):
        if seen[start]:
            continue
        stack, part = [start], []
        seen[start] = True
        while stack:
            i = stack.pop()
            part.append(i)
            for j in np.nonzero(n[i])[0]:
                if not seen[j]:
                    seen[j] = True
                    stack.append(int(j))
        out.append(sorted(part))
    return out


@dataclass(frozen=True)
class Ratings:
    """Ratings with their basic bootstrap intervals; `replicates` (reps x P) for the intervals
    of differences."""

    theta: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    replicates: np.ndarray
    comparisons: np.ndarray     # wins + losses of each policy
    level: float

    def difference(self, i: int, j: int) -> tuple[float, float, float]:
        """theta_i - theta_j with its basic bootstrap interval from the same replicates."""
        d = self.replicates[:, i] - self.replicates[:, j]
        est = float(self.theta[i] - self.theta[j])
        lo, hi = _basic(est, d, self.level)
        return est, float(lo), float(hi)


def _basic(estimate, replicates: np.ndarray, level: float):
    """The basic bootstrap interval: 2 estimate - the upper and lower quantiles."""
    tail = (1 - level) / 2
    q_lo, q_hi = np.quantile(replicates, [tail, 1 - tail], axis=0)
    return 2 * estimate - q_hi, 2 * estimate - q_lo


def rate(unit_wins: np.ndarray, strata: Sequence[object], reps: int = REPS, level: float = 0.95,
         alpha: float = ALPHA, rng: np.random.Generator | int | None = 0) -> Ratings:
    """Ratings from units' win matrices (U x P x P) with the stratified bootstrap over units."""
    units = np.asarray(unit_wins, dtype=float)
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    total = units.sum(axis=0)
    theta = fit(total, alpha)
    groups = [np.array([u for u, s in enumerate(strata) if s == key]) for key in dict.fromkeys(strata)]
    flat = units.reshape(units.shape[0], -1)
    out = []
    for size in chunks(reps):
        drawn = np.zeros((size, flat.shape[1]))
        for members in groups:
            drawn += resample_counts(gen, size, members.size) @ flat[members]
        out.append(fit(drawn.reshape(size, *units.shape[1:]), alpha))
    replicates = np.concatenate(out)
    lo, hi = _basic(theta, replicates, level)
    return Ratings(theta, lo, hi, replicates, total.sum(axis=1) + total.sum(axis=0), level)


def head_to_head(per_mark: Sequence[tuple[int, int]], level: float = 0.95) -> tuple[float, float, float]:
    """(share, lo, hi): i's share of its discordant layouts against j, per mark (wins, discordant
    layouts), with the Clopper-Pearson interval (Clopper & Pearson 1934) on the effective counts
    W / deff of N / deff, deff the design effect of the share over marks (`clustered_rate`; Rao &
    Scott 1992). Under the model the share is sigma(theta_i - theta_j), so logit(lo), logit(hi)
    bound the difference. Clopper-Pearson, not Wilson: near separation (a share near 1 from a
    dozen layouts) Wilson's interval covered 0.917 at 20 marks, below its label."""
    marks = [(int(w), int(n)) for w, n in per_mark if n]
    wins, total = sum(w for w, _ in marks), sum(n for _, n in marks)
    if total == 0:
        return float("nan"), 0.0, 1.0
    deff = rate_design_effect(marks)
    k, n = wins / deff, total / deff
    tail = (1 - level) / 2
    lo = 0.0 if wins == 0 else float(beta.ppf(tail, k, n - k + 1))
    hi = 1.0 if wins == total else float(beta.ppf(1 - tail, k + 1, n - k))
    return wins / total, lo, hi
