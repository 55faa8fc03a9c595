"""Scores over training seeds and multi-task suites: Student-t interval for a mean, the
interquartile mean and the stratified bootstrap.

References: Agarwal R, Schwarzer M, Castro PS, Courville A, Bellemare MG (2021). Deep
reinforcement learning at the edge of the statistical precipice. NeurIPS (arXiv:2108.13264).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import combinations
from math import comb

import numpy as np
from scipy import stats

from orchestrator.analysis.stats.types import Interval, MeanInterval


def t_interval(scores: Sequence[float], level: float = 0.95) -> MeanInterval:
    """Mean over s training seeds with a Student-t interval: mean +- t(1 - alpha/2, s - 1) sd/sqrt(s),
    sd the sample standard deviation (divide by s - 1). Example (tests/data/stats_vectors.json): ten
    seeds 0.45 ... 0.41 -> 0.434 +- 0.020."""
    x = np.asarray(scores, dtype=float)
    if x.size < 2:
        raise ValueError("a t interval needs at least 2 scores")
    return t_interval_from_summary(float(x.mean()), float(x.std(ddof=1)), int(x.size), level)


def t_interval_from_summary(mean: float, sd: float, n: int, level: float = 0.95) -> MeanInterval:
    """The same interval from a mean, a sample sd and the number of seeds."""
    t_crit = float(stats.t.ppf(1 - (1 - level) / 2, n - 1))
    h = t_crit * sd / math.sqrt(n)
    return MeanInterval(mean, sd, n, mean - h, mean + h, t_crit, level)


def interquartile_mean(scores: np.ndarray | Sequence[float]) -> float:
    """Interquartile mean (Agarwal et al. 2021): pool all runs of all tasks, drop the lowest and
    highest 25 %, average the rest. Uses scipy.stats.trim_mean(x, 0.25), which cuts int(0.25 n)
    values from each end, as the released rliable library does (for n = 10 it keeps 6 values
    where the paper's floor(n/2) would keep 5)."""
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


# ------------------------------------------------------------------ methods, the training seed the unit

EXACT_LIMIT = 2_000_000      # arrangements enumerated exactly; beyond, seeded Monte Carlo
MONTE_CARLO = 100_000        # random arrangements when exact enumeration is too big


@dataclass(frozen=True)
class SeedTest:
    """The permutation test of method labels over (task, seed) scores (`seed_permutation_test`)."""

    difference: float          # mean over tasks of (mean of X's seeds - mean of Y's seeds)
    p: float                   # two-sided permutation p
    floor: float               # the smallest p any arrangement of these seeds can give
    arrangements: int          # label arrangements of the null distribution (exact), or drawn
    exact: bool                # enumerated (True) or Monte Carlo (False)
    seeds_x: int
    seeds_y: int
    tasks: int
    interval: MeanInterval | None      # Welch-Satterthwaite t over seeds (None: a task with one seed)
    paired: bool = False       # `paired_seed_test`: X's seed s against Y's seed s (pre-registered)


def _task_values(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """T_t over every assignment of n_x of the task's pooled scores to X (itertools order)."""
    pooled = np.concatenate([x, y])
    n, nx, ny = pooled.size, x.size, y.size
    picks = np.array(list(combinations(range(n), nx)), dtype=int)
    sum_x = pooled[picks].sum(axis=1)
    return sum_x / nx - (pooled.sum() - sum_x) / ny


def satterthwaite_interval(groups: Sequence[tuple[float, np.ndarray]], level: float = 0.95,
                           bounds: tuple[float, float] = (0.0, 1.0)) -> MeanInterval | None:
    """The estimate sum_g c_g mean(x_g) over independent groups of seed scores with the Student t
    interval of Welch (1947) and Satterthwaite (1946): variance V = sum_g c_g^2 s_g^2 / n_g,
    degrees of freedom V^2 / sum_g (c_g^2 s_g^2 / n_g)^2 / (n_g - 1), clipped to `bounds` (a rate
    lies in [0, 1], a difference of rates in [-1, 1]). None when a group has fewer than 2 scores.
    With no spread at all (V = 0) the interval is the point and `sd` is 0: say so in words."""
    if not groups or any(x.size < 2 for _, x in groups):
        return None
    parts = [(c * c * float(x.var(ddof=1)) / x.size, x.size - 1) for c, x in groups]
    var = sum(v for v, _ in parts)
    mean = float(sum(c * x.mean() for c, x in groups))
    n = sum(x.size for _, x in groups)
    if var <= 0:
        return MeanInterval(mean, 0.0, n, mean, mean, float("nan"), level)
    df = var ** 2 / sum(v * v / d for v, d in parts if v > 0)
    t_crit = float(stats.t.ppf(1 - (1 - level) / 2, df))
    half = t_crit * math.sqrt(var)
    return MeanInterval(mean, math.sqrt(var), n, max(bounds[0], mean - half), min(bounds[1], mean + half), t_crit,
                        level)


def rate_t_interval(scores: Sequence[float], level: float = 0.95) -> MeanInterval:
    """`t_interval` of seed scores that are rates, clipped to [0, 1] (sd 0: no spread, the point)."""
    iv = t_interval(scores, level)
    return MeanInterval(iv.mean, iv.sd, iv.n, max(0.0, iv.lo), min(1.0, iv.hi), iv.t_crit, level)


def _welch(tasks: Sequence[tuple[np.ndarray, np.ndarray]], level: float) -> MeanInterval | None:
    """mean over T tasks of the difference of means: `satterthwaite_interval` with c = +-1/T."""
    share = 1 / len(tasks)
    return satterthwaite_interval([(share, x) for x, _ in tasks] + [(-share, y) for _, y in tasks], level,
                                  (-1.0, 1.0))


def seed_permutation_test(x_tasks: Sequence[Sequence[float]], y_tasks: Sequence[Sequence[float]],
                          level: float = 0.95, rng: np.random.Generator | int | None = 0) -> SeedTest:
    """Is method X better than method Y, the training seed the unit: an exact permutation test of
    the method labels over the (task, seed) scores, stratified by task (Fisher 1935; Pitman 1937;
    Good 2005 section 3.5 on stratified permutation tests).

    Task t has X's seed scores x_t (n_x of them) and Y's y_t (n_y); a seed's score is its success
    rate on the task. Statistic T = sum_t (mean x_t - mean y_t). H0: the two methods are one
    distribution of trained checkpoints, so within each task the n_x + n_y scores are
    exchangeable between the labels (a seed's score includes its own training noise: a method
    claim must hold for new seeds, Agarwal et al. 2021). Under H0 each task's labels fall on a
    uniformly random n_x-subset of its runs, independently across tasks; p = P(|T*| >= |t|)
    over all prod_t C(n_x + n_y, n_x) arrangements (exact when at most EXACT_LIMIT, otherwise
    MONTE_CARLO seeded draws with p = (1 + hits) / (1 + draws), Phipson & Smyth 2010). Two
    methods' seed numbers pair nothing here. The test cannot reject when the floor 2 / prod_t
    C(n_x + n_y, n_x) (symmetric case) exceeds alpha: one task with 3 seeds of each gives 0.1.

    The interval for the mean difference is Welch's t with Satterthwaite's degrees of freedom
    over the seeds (`_welch`); none when a task has fewer than 2 seeds of a method."""
    pairs = [(np.asarray(x, dtype=float), np.asarray(y, dtype=float)) for x, y in zip(x_tasks, y_tasks, strict=True)]
    pairs = [(x, y) for x, y in pairs if x.size and y.size]
    if not pairs:
        raise ValueError("no task has seeds of both methods")
    observed = float(sum(x.mean() - y.mean() for x, y in pairs))
    sizes = [comb(x.size + y.size, x.size) for x, y in pairs]
    total = math.prod(sizes)
    tol = 1e-9
    if total <= EXACT_LIMIT:
        dist = np.zeros(1)
        for x, y in pairs:
            dist = np.add.outer(dist, _task_values(x, y)).ravel()
        p = float(np.mean(np.abs(dist) >= abs(observed) - tol))
        floor = float(np.mean(np.abs(dist) >= np.abs(dist).max() - tol))
        exact, count = True, total
    else:
        gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        draws = np.zeros(MONTE_CARLO)
        for x, y in pairs:
            pooled = np.concatenate([x, y])
            order = gen.random((MONTE_CARLO, pooled.size)).argsort(axis=1)[:, :x.size]
            sum_x = pooled[order].sum(axis=1)
            draws += sum_x / x.size - (pooled.sum() - sum_x) / y.size
        p = float((1 + np.sum(np.abs(draws) >= abs(observed) - tol)) / (1 + MONTE_CARLO))
        floor, exact, count = 1 / (1 + MONTE_CARLO), False, MONTE_CARLO
    return SeedTest(difference=observed / len(pairs), p=min(1.0, p), floor=floor, arrangements=count, exact=exact,
                    seeds_x=sum(x.size for x, _ in pairs), seeds_y=sum(y.size for _, y in pairs), tasks=len(pairs),
                    interval=_welch(pairs, level))


def paired_seed_test(d_tasks: Sequence[Sequence[float]], level: float = 0.95,
                     rng: np.random.Generator | int | None = 0) -> SeedTest:
    """The paired form of `seed_permutation_test`, for seeds the protocol pre-registers as paired
    (`analysis.seed_pairing: by_number`: X's and Y's runs of one seed number share its randomness).
    Task t holds the differences d_ts = x_ts - y_ts of its seed numbers that both methods have.
    Statistic T = sum_t mean(d_t); H0: within each pair the two labels are exchangeable, so every
    d_ts is symmetric about 0, independently: p = P(|T*| >= |t|) over the 2^n sign patterns of the
    n pairs (Fisher 1935; Pitman 1937; exact when 2^n <= EXACT_LIMIT, else MONTE_CARLO seeded
    draws, p = (1 + hits) / (1 + draws)). The interval is Student t for sum_t mean(d_t) / T with
    Satterthwaite's degrees of freedom over the tasks' differences (none with one pair in a task)."""
    tasks = [np.asarray(d, dtype=float) for d in d_tasks]
    tasks = [d for d in tasks if d.size]
    if not tasks:
        raise ValueError("no seed number has runs of both methods")
    observed = float(sum(d.mean() for d in tasks))
    n = sum(d.size for d in tasks)
    tol = 1e-9
    if 2 ** n <= EXACT_LIMIT:
        dist = np.zeros(1)
        for d in tasks:
            signs = np.array(np.meshgrid(*([[1.0, -1.0]] * d.size), indexing="ij")).reshape(d.size, -1).T
            dist = np.add.outer(dist, signs @ d / d.size).ravel()
        p = float(np.mean(np.abs(dist) >= abs(observed) - tol))
        floor = float(np.mean(np.abs(dist) >= np.abs(dist).max() - tol))
        exact, count = True, 2 ** n
    else:
        gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        draws = np.zeros(MONTE_CARLO)
        for d in tasks:
            draws += np.where(gen.random((MONTE_CARLO, d.size)) < 0.5, 1.0, -1.0) @ d / d.size
        p = float((1 + np.sum(np.abs(draws) >= abs(observed) - tol)) / (1 + MONTE_CARLO))
        floor, exact, count = 1 / (1 + MONTE_CARLO), False, MONTE_CARLO
    share = 1 / len(tasks)
    return SeedTest(difference=observed / len(tasks), p=min(1.0, p), floor=floor, arrangements=count, exact=exact,
                    seeds_x=n, seeds_y=n, tasks=len(tasks),
                    interval=satterthwaite_interval([(share, d) for d in tasks], level, (-1.0, 1.0)), paired=True)
