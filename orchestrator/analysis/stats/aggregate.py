"""Scores of a method over several tasks (Agarwal et al. 2021, "Deep reinforcement learning at
the edge of the statistical precipice", arXiv:2108.13264, and its library rliable 1.2).

A method's scores: for every task t a vector x_t of its n_t runs (a run is one training seed;
its score, its success rate on the task). With N = sum_t n_t and T tasks:

- mean = (1/T) sum_t mean(x_t): the mean over tasks of the mean over runs (`aggregate_mean`);
- IQM = the 25 % trimmed mean of the N pooled runs, int(0.25 N) cut from each end, as
  scipy.stats.trim_mean(x, 0.25) does (`aggregate_iqm`; `stats.interquartile_mean`);
- the score distribution at tau (the performance profile): the fraction of the N pooled runs
  whose score is above tau (`run_score_deviation`);
- the probability of improvement of X over Y: (1/T) sum_t P_t over the tasks both have, with
  P_t = (1 / (n m)) sum_i sum_j [1(x_i > y_j) + 1(x_i = y_j) / 2], the Mann-Whitney U of the
  task divided by n m (`probability_of_improvement`).

Intervals are stratified percentile bootstraps: each replicate redraws, within every task
separately, n_t runs with replacement from the task's n_t runs (rliable's `StratifiedBootstrap`;
X and Y independently for the probability of improvement, as its
`StratifiedIndependentBootstrap`), recomputes the statistic, and the interval is the
(alpha/2, 1 - alpha/2) quantiles of the replicates (numpy's linear quantile, arch's
np.percentile). A redraw is kept as the counts c_t of each run (Multinomial(n_t, 1/n_t), the
same distribution as n_t uniform indices), so every statistic is computed from counts for all
replicates at once: the IQM as a weighted trimmed mean over the sorted pooled runs.
Unlike rliable, tasks may hold different numbers of runs.

Default replicates: 50,000 (rliable's `get_interval_estimates`), 2,000 for the profiles
(rliable's `create_performance_profile`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from orchestrator.analysis.stats.types import Interval

REPS = 50_000
PROFILE_REPS = 2_000
_CHUNK = 10_000          # replicates drawn at once (bounded memory, same numbers at any size)

Tasks = Sequence[Sequence[float] | np.ndarray]   # each task's runs' scores


def _tasks(tasks: Tasks) -> list[np.ndarray]:
    out = [np.asarray(x, dtype=float).ravel() for x in tasks]
    if not out or any(x.size == 0 for x in out):
        raise ValueError("every task needs at least one run")
    return out


def _generator(rng: np.random.Generator | int | None) -> np.random.Generator:
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


def mean_of_tasks(tasks: Tasks) -> float:
    """The mean over tasks of the mean over each task's runs."""
    return float(np.mean([x.mean() for x in _tasks(tasks)]))


def iqm_of_runs(tasks: Tasks) -> float:
    """The interquartile mean of every run of every task, pooled (scipy's trim_mean at 0.25)."""
    pooled = np.sort(np.concatenate(_tasks(tasks)))
    g = int(0.25 * pooled.size)
    return float(pooled[g:pooled.size - g].mean())


def score_distribution(tasks: Tasks, taus: Sequence[float] | np.ndarray) -> np.ndarray:
    """Fraction of the pooled runs with a score above each tau (the performance profile)."""
    pooled = np.concatenate(_tasks(tasks))
    return (pooled[:, None] > np.asarray(taus, dtype=float)[None, :]).mean(axis=0)


def _wins(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """W_ij = 1 if x_i > y_j, 1/2 if equal, 0 otherwise."""
    return (x[:, None] > y[None, :]) + 0.5 * (x[:, None] == y[None, :])


def probability_of_improvement(x_tasks: Tasks, y_tasks: Tasks) -> float:
    """P(X > Y) averaged over tasks (tasks in the same order for both, every task in both)."""
    xs, ys = _tasks(x_tasks), _tasks(y_tasks)
    if len(xs) != len(ys):
        raise ValueError("X and Y need the same tasks")
    return float(np.mean([_wins(x, y).mean() for x, y in zip(xs, ys, strict=True)]))


def resample_counts(rng: np.random.Generator, reps: int, n: int) -> np.ndarray:
    """reps x n counts: how often each of n items is drawn in n draws with replacement (one row
    per replicate; the rows are Multinomial(n, 1/n))."""
    idx = rng.integers(0, n, size=(reps, n)) + n * np.arange(reps)[:, None]
    return np.bincount(idx.ravel(), minlength=reps * n).reshape(reps, n).astype(float)


def task_counts(rng: np.random.Generator, reps: int, sizes: Sequence[int]) -> list[np.ndarray]:
    """`resample_counts` for every task (sizes n_t), tasks of one size drawn together."""
    out: list[np.ndarray] = [np.empty(0)] * len(sizes)
    for n in sorted(set(sizes)):
        members = [i for i, size in enumerate(sizes) if size == n]
        drawn = resample_counts(rng, reps * len(members), n).reshape(reps, len(members), n)
        for k, i in enumerate(members):
            out[i] = drawn[:, k]
    return out


def chunks(reps: int) -> Iterator[int]:
    if reps < 1:
        raise ValueError("need at least one bootstrap replicate")
    for start in range(0, reps, _CHUNK):
        yield min(_CHUNK, reps - start)


def _quantiles(values: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    tail = (1 - level) / 2
    lo, hi = np.quantile(values, [tail, 1 - tail], axis=0)
    return lo, hi


def _trimmed_from_counts(sorted_values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The 25 % trimmed mean of each replicate's multiset (values repeated `weights` times, the
    values sorted, each row of weights summing to N): value j keeps the part of its copies
    that falls between positions g and N - g of the sorted multiset."""
    total = sorted_values.size
    g = int(0.25 * total)
    upper = np.cumsum(weights, axis=1)
    lower = upper - weights
    np.clip(upper, g, total - g, out=upper)
    np.clip(lower, g, total - g, out=lower)
    upper -= lower
    return upper @ sorted_values / (total - 2 * g)


def mean_and_iqm_intervals(tasks: Tasks, reps: int = REPS, level: float = 0.95,
                           rng: np.random.Generator | int | None = 0) -> tuple[Interval, Interval]:
    """(mean, IQM), each with its stratified bootstrap percentile interval; one set of
    replicates serves both."""
    xs = _tasks(tasks)
    gen = _generator(rng)
    pooled = np.concatenate(xs)
    order = np.argsort(pooled, kind="stable")
    means, iqms = [], []
    for size in chunks(reps):
        counts = task_counts(gen, size, [x.size for x in xs])
        means.append(np.mean([c @ x / x.size for c, x in zip(counts, xs, strict=True)], axis=0))
        iqms.append(_trimmed_from_counts(pooled[order], np.concatenate(counts, axis=1)[:, order]))
    mean_lo, mean_hi = _quantiles(np.concatenate(means), level)
    iqm_lo, iqm_hi = _quantiles(np.concatenate(iqms), level)
    return (Interval(mean_of_tasks(xs), float(mean_lo), float(mean_hi), "stratified-bootstrap", level),
            Interval(iqm_of_runs(xs), float(iqm_lo), float(iqm_hi), "stratified-bootstrap", level))


def profile_intervals(tasks: Tasks, taus: Sequence[float], reps: int = PROFILE_REPS, level: float = 0.95,
                      rng: np.random.Generator | int | None = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(profile, lower, upper) at every tau: the score distribution with its stratified
    bootstrap percentile band."""
    xs = _tasks(tasks)
    grid = np.asarray(taus, dtype=float)
    gen = _generator(rng)
    total = sum(x.size for x in xs)
    above = [(x[:, None] > grid[None, :]).astype(float) for x in xs]
    reps_out = []
    for size in chunks(reps):
        reps_out.append(sum(c @ a for c, a in zip(task_counts(gen, size, [x.size for x in xs]), above, strict=True)) / total)
    lo, hi = _quantiles(np.concatenate(reps_out), level)
    return score_distribution(xs, grid), lo, hi


def improvement_interval(x_tasks: Tasks, y_tasks: Tasks, reps: int = REPS, level: float = 0.95,
                         rng: np.random.Generator | int | None = 0) -> Interval:
    """P(X > Y) with its stratified bootstrap interval, X's and Y's runs redrawn independently
    within every task."""
    xs, ys = _tasks(x_tasks), _tasks(y_tasks)
    if len(xs) != len(ys):
        raise ValueError("X and Y need the same tasks")
    gen = _generator(rng)
    wins = [_wins(x, y) / (x.size * y.size) for x, y in zip(xs, ys, strict=True)]
    out = []
    for size in chunks(reps):
        cx = task_counts(gen, size, [x.size for x in xs])
        cy = task_counts(gen, size, [y.size for y in ys])
        per_task = [np.einsum("bi,ij,bj->b", a, w, b) for a, w, b in zip(cx, wins, cy, strict=True)]
        out.append(np.mean(per_task, axis=0))
    lo, hi = _quantiles(np.concatenate(out), level)
    return Interval(probability_of_improvement(xs, ys), float(lo), float(hi), "stratified-bootstrap", level)
