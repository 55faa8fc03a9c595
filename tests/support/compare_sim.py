"""Seeded simulations of `orchestrator compare`'s tests and intervals (tests/test_compare_sims.py
asserts them; bench/compare_sims.py prints them with more runs for docs/statistics.md).

- the paired test across tasks: campaigns x marks x training seeds, each mark with its own
  difficulty, X and Y drawn independently per pair with rates that differ by `delta` on the
  log-odds scale; its rejection rate (type-I error at delta 0) and the coverage of the
  clustered interval for the difference of rates;
- the exact trend test: a ladder of checkpoints that all have the mark's success rate (no trend);
- the Bradley-Terry interval: policies that succeed independently with rates p_i, whose
  discordant layouts follow the model with theta_i = logit p_i (centred).
All run through the code `compare` uses (`paired.paired_across`, `stats.trend_test`,
`bradley_terry.rate`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit, logit

from orchestrator.analysis import stats
from orchestrator.analysis.compare.paired import paired_across
from orchestrator.analysis.compare.trials import Identity, Trial
from orchestrator.analysis.stats import bradley_terry


@dataclass(frozen=True)
class Rate:
    """A proportion from `runs` simulations with its Monte Carlo standard error."""

    value: float
    runs: int

    @property
    def se(self) -> float:
        return float(np.sqrt(max(self.value * (1 - self.value), 1e-12) / self.runs))


def _paired_trials(rng: np.random.Generator, campaigns: int, marks: int, seeds: int, delta: float) -> tuple[list, float]:
    trials = []
    true_diff = []
    for c in range(campaigns):
        base = rng.normal(0.3 * c, 1.2, size=marks)               # the task's and the mark's difficulty
        for m in range(marks):
            px, py = expit(base[m] + delta), expit(base[m])
            true_diff.append(px - py)
            for s in range(seeds):
                for method, p in (("X", px), ("Y", py)):
                    trials.append(Trial(campaign=f"c{c}", task=f"t{c}", policy=f"{method}{s}",
                                        identity=Identity(method, s), layout=f"M{m}", repeat=0,
                                        success=bool(rng.random() < p)))
    return trials, float(np.mean(true_diff))


def paired_test(runs: int, delta: float = 0.0, campaigns: int = 3, marks: int = 10, seeds: int = 3,
                alpha: float = 0.05, seed: int = 0) -> tuple[Rate, Rate, Rate]:
    """The checkpoint-level test (every X checkpoint with every Y checkpoint on a layout run) when
    every checkpoint of a method has the same rate: (rejections by the mid-p, by the exact p,
    coverage of the clustered 95% interval)."""
    rng = np.random.default_rng(seed)
    mid = exact = covered = 0
    for _ in range(runs):
        trials, true_diff = _paired_trials(rng, campaigns, marks, seeds, delta)
        (result,) = paired_across(trials, _method_scores(trials), alpha)
        pairs = result.checkpoints
        mid += pairs.mid_p <= alpha
        exact += pairs.exact_p <= alpha
        covered += pairs.difference.lo <= true_diff <= pairs.difference.hi
    return Rate(mid / runs, runs), Rate(exact / runs, runs), Rate(covered / runs, runs)


def trend_null(runs: int, steps: int = 3, marks: int = 20, campaigns: int = 2, alpha: float = 0.05,
               seed: int = 0) -> tuple[Rate, Rate]:
    """(rejections by the mid-p, by the exact p) of the trend test when no step is better."""
    rng = np.random.default_rng(seed)
    mid = exact = 0
    for _ in range(runs):
        p = expit(rng.normal(0.5, 1.5, size=campaigns * marks))
        blocks = [[(k, bool(rng.random() < pm)) for k in range(steps)] for pm in p]
        result = stats.trend_test(blocks)
        mid += result.mid_p <= alpha
        exact += result.exact_p <= alpha
    return Rate(mid / runs, runs), Rate(exact / runs, runs)


def bradley_terry_coverage(runs: int, reps: int = 300, rates: tuple[float, ...] = (0.85, 0.75, 0.65, 0.5, 0.4, 0.3),
                           marks: int = 20, campaigns: int = 3, seed: int = 0) -> Rate:
    """Coverage of the 95% bootstrap interval of every rating (pooled over the policies)."""
    rng = np.random.default_rng(seed)
    p = np.array(rates)
    theta = logit(p) - logit(p).mean()
    size = p.size
    covered = total = 0
    for _ in range(runs):
        units, strata = [], []
        for c in range(campaigns):
            for _ in range(marks):
                y = rng.random(size) < p
                units.append(np.outer(y, ~y).astype(float))      # i won over j: i succeeded, j failed
                strata.append(c)
        r = bradley_terry.rate(np.array(units), strata, reps=reps, rng=rng)
        covered += int(((r.lo <= theta) & (theta <= r.hi)).sum())
        total += size
    return Rate(covered / total, total)


# ------------------------------------------------------------------ methods whose training seeds vary


def seed_suite(rng: np.random.Generator, tasks: int, marks: int, seeds: tuple[int, int], repeats: int,
               seed_sd: float, delta: float = 0.0, dominant: float = 0.0, shared_sd: float = 0.0) -> list[Trial]:
    """Trials of methods X and Y on `tasks` campaigns (one a task) of `marks` marks x `repeats`.
    Every (method, task, seed) run is its own training: its log-odds move by N(0, seed_sd); X's
    runs have `delta` more log-odds on average. Each mark has its difficulty (N(0, 1.2)); with
    `dominant` > 0 a third method D (one seed) runs too, `dominant` log-odds above the mark. With
    `shared_sd` > 0 X's and Y's runs of one seed number share a shift N(0, shared_sd) (common random
    numbers: what `analysis.seed_pairing: by_number` pre-registers)."""
    out = []
    for c in range(tasks):
        base = rng.normal(0.3 * c, 1.2, size=marks)
        common = rng.normal(0, shared_sd, size=max(seeds)) if shared_sd else np.zeros(max(seeds))
        runs = [("X", s, delta + common[s] + rng.normal(0, seed_sd)) for s in range(seeds[0])]
        runs += [("Y", s, common[s] + rng.normal(0, seed_sd)) for s in range(seeds[1])]
        if dominant:
            runs.append(("D", 0, dominant))
        for method, s, shift in runs:
            p = expit(base + shift)
            hits = rng.random((marks, repeats)) < p[:, None]
            out += [Trial(campaign=f"c{c}", task=f"t{c}", policy=f"{method}{s}", identity=Identity(method, s),
                          layout=f"M{m}", repeat=r, success=bool(hits[m, r]))
                    for m in range(marks) for r in range(repeats)]
    return out


def _method_scores(trials: list[Trial]):
    """X's and Y's seed scores as compare computes them (`scores._seed_scores`), without the
    across-task aggregates the paired test does not read (they cost half a simulation's time)."""
    from orchestrator.analysis.compare.model import MethodScore, TaskScore
    from orchestrator.analysis.compare.scores import _seed_scores

    unused = stats.Interval(float("nan"), 0.0, 1.0, "not computed")
    per = _seed_scores(trials)
    return [MethodScore(method, tuple(TaskScore(task, tuple(seeds), float(np.mean([s.rate for s in seeds])), None)
                                      for (task, m), seeds in per.items() if m == method), unused, unused, 0)
            for method in ("X", "Y")]


def method_null(runs: int, seed_sd: float, tasks: int = 3, marks: int = 10, seeds: tuple[int, int] = (3, 3),
                repeats: int = 1, delta: float = 0.0, alpha: float = 0.05, seed: int = 0) -> tuple[Rate, Rate, Rate]:
    """Over `runs` suites of X and Y (`seed_suite`): (the verdict says "better", the checkpoint
    level says the checkpoints differ, the verdict's Welch interval covers the methods' true mean
    difference of expected rates (estimated by quadrature-free Monte Carlo over seeds))."""
    rng = np.random.default_rng(seed)
    better = differ = covered = intervals = 0
    for _ in range(runs):
        trials = seed_suite(rng, tasks, marks, seeds, repeats, seed_sd, delta)
        (result,) = paired_across(trials, _method_scores(trials), alpha)
        better += result.significant
        differ += result.checkpoints is not None and result.checkpoints.differ
        iv = result.seeds.interval
        if iv is not None and delta == 0.0:       # equal methods: the true mean difference is 0
            intervals += 1
            covered += iv.lo <= 0.0 <= iv.hi
    return Rate(better / runs, runs), Rate(differ / runs, runs), Rate(covered / max(intervals, 1), max(intervals, 1))


def seed_pairing_sim(runs: int, shared_sd: float, seed_sd: float = 0.3, delta: float = 0.0, tasks: int = 3,
                     marks: int = 10, seeds: int = 3, alpha: float = 0.05, seed: int = 0) -> tuple[Rate, Rate]:
    """Suites whose X and Y runs of one seed number share a shift N(0, shared_sd) (`seed_suite`),
    through `paired_across`: (the seed-paired test says "better", the unpaired test says "better")."""
    rng = np.random.default_rng(seed)
    paired = unpaired = 0
    for _ in range(runs):
        trials = seed_suite(rng, tasks, marks, (seeds, seeds), 1, seed_sd, delta, shared_sd=shared_sd)
        scores = _method_scores(trials)
        (by_seed,) = paired_across(trials, scores, alpha, seed_paired=frozenset({"X", "Y"}))
        (plain,) = paired_across(trials, scores, alpha)
        paired += by_seed.significant
        unpaired += plain.significant
    return Rate(paired / runs, runs), Rate(unpaired / runs, runs)


def ladder_null(runs: int, repeats: int, step_sd: float, steps: int = 2, marks: int = 20, campaigns: int = 1,
                alpha: float = 0.05, seed: int = 0) -> tuple[Rate, Rate, Rate]:
    """A ladder whose steps are equal on average but not on every mark: mark k's log-odds at step
    j are base_k + e_kj, e_kj ~ N(0, step_sd) independent (each mark its own response to a step),
    base_k ~ N(0.5, 1.5); `repeats` layout runs per mark share them. Run through `ladders` (the
    code compare uses): (the trend statement says rises or falls, the last-step statement says
    improves or worse, the last step's exact p is at most alpha)."""
    from orchestrator.analysis.compare.ladders import ladders

    rng = np.random.default_rng(seed)
    trend = last = exact = 0
    for _ in range(runs):
        trials = []
        for c in range(campaigns):
            p = expit(rng.normal(0.5, 1.5, size=(marks, 1)) + rng.normal(0, step_sd, size=(marks, steps)))
            hits = rng.random((marks, steps, repeats)) < p[:, :, None]
            trials += [Trial(campaign=f"c{c}", task="t", policy=f"X@{j}", identity=Identity("X", 0, 100 * (j + 1)),
                             layout=f"M{m}", repeat=r, success=bool(hits[m, j, r]))
                       for m in range(marks) for j in range(steps) for r in range(repeats)]
        (ladder,) = ladders(trials, alpha)
        trend += "no trend established" not in ladder.trend_statement
        last += not ladder.statement.startswith("no evidence")
        exact += ladder.last_exact_p <= alpha
    return Rate(trend / runs, runs), Rate(last / runs, runs), Rate(exact / runs, runs)


def board(runs: int, logits: tuple[float, ...], marks: int = 20, campaigns: int = 1, mark_sd: float = 1.0,
          reps: int = 200, seed: int = 0) -> tuple[Rate, Rate, Rate]:
    """Leaderboards of policies P0, P1, ... with log-odds `logits` on a mark of difficulty
    N(0, mark_sd) (the Bradley-Terry model holds: theta_i = logits_i + c), every policy once on
    every mark, run through `leaderboard`: (boards where some truly equal neighbours are called
    separated, boards where P0 heads the board and is separated from the runner-up, coverage of
    the head-to-head 95% interval of every neighbour pair that met)."""
    from orchestrator.analysis.compare.leaderboard import leaderboard

    rng = np.random.default_rng(seed)
    truth = {f"P{i}": v for i, v in enumerate(logits)}
    false_sep = found = covered = met = 0
    for _ in range(runs):
        trials = []
        for c in range(campaigns):
            base = rng.normal(0, mark_sd, size=marks)
            for name, v in truth.items():
                hits = rng.random(marks) < expit(base + v)
                trials += [Trial(campaign=f"c{c}", task="t", policy=name, identity=Identity(name), layout=f"M{m}",
                                 repeat=0, success=bool(hits[m])) for m in range(marks)]
        result = leaderboard(trials, reps, rng)
        wrong = False
        for n in result.neighbours if result else ():
            gap = truth[n.a] - truth[n.b]
            wrong |= gap == 0 and n.separated
            found += n.a == "P0" and n.separated
            if n.wins + n.losses:
                met += 1
                covered += n.lo <= gap <= n.hi
        false_sep += wrong
    return Rate(false_sep / runs, runs), Rate(found / runs, runs), Rate(covered / max(met, 1), max(met, 1))


def _mean_rate(mu: float, sd: float) -> float:
    """E[expit(N(mu, sd^2))] by Gauss-Hermite quadrature (80 nodes)."""
    x, w = np.polynomial.hermite_e.hermegauss(80)
    return float(np.sum(w * expit(mu + sd * x)) / np.sum(w))


def rate_coverage(runs: int, repeats: int, marks: int = 20, mu: float = 0.8, mark_sd: float = 1.2,
                  seed: int = 0) -> tuple[Rate, Rate]:
    """Coverage of the per-seed and per-step 95% intervals compare prints, for a checkpoint whose
    rate on a mark is expit(mu + N(0, mark_sd)) and which runs every mark `repeats` times; the
    truth is its rate over the marks' population, E[expit(mu + N(0, mark_sd))]."""
    from orchestrator.analysis.compare.ladders import ladders
    from orchestrator.analysis.compare.scores import method_scores, rng_for

    rng = np.random.default_rng(seed)
    truth = _mean_rate(mu, mark_sd)
    per_seed = per_step = 0
    for _ in range(runs):
        p = expit(mu + rng.normal(0, mark_sd, size=marks))
        trials = []
        for step in (100, 200):
            hits = rng.random((marks, repeats)) < p[:, None]
            trials += [Trial(campaign="c", task="t", policy=f"X@{step}", identity=Identity("X", 0, step),
                             layout=f"M{m}", repeat=r, success=bool(hits[m, r])) for m in range(marks)
                       for r in range(repeats)]
        (method,), _ = method_scores(trials, 10, rng_for(0))
        iv = method.tasks[0].seeds[0].wilson
        per_seed += iv.lo <= truth <= iv.hi
        first = ladders(trials, 0.05)[0].steps[0].wilson
        per_step += first.lo <= truth <= first.hi
    return Rate(per_seed / runs, runs), Rate(per_step / runs, runs)


def aggregate_coverage(runs: int, seeds: int, seed_sd: float, tasks: int = 3, reps: int = 1000,
                       seed: int = 0) -> tuple[Rate, Rate, Rate]:
    """Coverage of the intervals over seeds compare prints for one method whose run on task t
    scores expit(mu_t + N(0, seed_sd)) (mu_t evenly from -0.5 to 1.5; the score is the run's true
    rate, to 1/40): (the mean's interval across tasks, the IQM's stratified bootstrap, each task's
    Student t interval of the mean over seeds, pooled over tasks). Truths by quadrature (means)
    and by the trimmed mean of 400,000 draws of the runs' distribution (IQM)."""
    from scipy import stats as sps

    from orchestrator.analysis.compare.scores import method_scores, rng_for

    rng = np.random.default_rng(seed)
    mus = np.linspace(-0.5, 1.5, tasks)
    true_mean = float(np.mean([_mean_rate(mu, seed_sd) for mu in mus]))
    population = np.concatenate([expit(mu + rng.normal(0, seed_sd, 400_000)) for mu in mus])
    true_iqm = float(sps.trim_mean(population, 0.25))
    true_task = [_mean_rate(mu, seed_sd) for mu in mus]
    mean_in = iqm_in = task_in = 0
    for _ in range(runs):
        trials = []
        for t, mu in enumerate(mus):
            for s in range(seeds):
                k = int(round(40 * expit(mu + rng.normal(0, seed_sd))))     # its rate, to 1/40
                trials += [Trial(campaign=f"c{t}", task=f"t{t}", policy=f"X{s}", identity=Identity("X", s),
                                 layout=f"M{m}", repeat=0, success=m < k) for m in range(40)]
        (method,), _ = method_scores(trials, reps, rng_for(int(rng.integers(1 << 30))))
        mean_in += method.mean.lo <= true_mean <= method.mean.hi
        iqm_in += method.iqm.lo <= true_iqm <= method.iqm.hi
        task_in += sum(t.t95 is not None and t.t95.lo <= true_task[int(t.task[1:])] <= t.t95.hi for t in method.tasks)
    return Rate(mean_in / runs, runs), Rate(iqm_in / runs, runs), Rate(task_in / (runs * tasks), runs * tasks)


# ------------------------------------------------------------------ P(X > Y) and the profiles


def _score_law(mu: float, sd: float, layouts: int) -> np.ndarray:
    """P(score = j / layouts), j = 0..layouts, for a run whose score is round(layouts expit(z)),
    z ~ N(mu, sd): the cells of z between logit((j - 1/2) / layouts) and logit((j + 1/2) / layouts)."""
    from scipy.stats import norm

    j = np.arange(layouts + 1)
    lo = np.where(j == 0, -np.inf, logit(np.clip((j - 0.5) / layouts, 1e-300, 1)))
    hi = np.where(j == layouts, np.inf, logit(np.clip((j + 0.5) / layouts, 0, 1 - 1e-16)))
    return norm.cdf((hi - mu) / sd) - norm.cdf((lo - mu) / sd)


def improvement_coverage(runs: int, seeds: int, seed_sd: float, delta: float = 0.0, tasks: int = 3,
                         layouts: int = 40, reps: int = 1000, taus: tuple[float, ...] = (0.25, 0.5, 0.75, 0.9),
                         seed: int = 0) -> tuple[Rate, tuple[Rate, ...]]:
    """Coverage of the probability of improvement's and the performance profile's 95% intervals
    as compare computes them (`scores.improvements`, `scores.profiles`) under seed-to-seed
    variance: on task t (mu_t evenly from -0.5 to 1.5) a run of X scores round(40 expit(mu_t +
    delta + N(0, seed_sd))) / 40, a run of Y the same without delta, `seeds` runs each. The
    truths from the exact law of a score (`_score_law`): P(X > Y) + P(X = Y) / 2 averaged over
    tasks, and X's P(score > tau) averaged over tasks. (P(X > Y), the profile at each tau)."""
    from orchestrator.analysis.compare.model import MethodScore, SeedScore, TaskScore
    from orchestrator.analysis.compare.scores import improvements, profiles, rng_for

    rng = np.random.default_rng(seed)
    mus = np.linspace(-0.5, 1.5, tasks)
    grid = np.arange(layouts + 1) / layouts
    laws_x = [_score_law(mu + delta, seed_sd, layouts) for mu in mus]
    laws_y = [_score_law(mu, seed_sd, layouts) for mu in mus]
    true_p = float(np.mean([np.sum(np.outer(px, py) * (np.sign(grid[:, None] - grid[None, :]) + 1) / 2)
                            for px, py in zip(laws_x, laws_y, strict=True)]))
    true_profile = [float(np.mean([px[grid > tau].sum() for px in laws_x])) for tau in taus]
    unused = stats.Interval(float("nan"), 0.0, 1.0, "not computed")
    p_in, profile_in = 0, np.zeros(len(taus))
    for _ in range(runs):
        methods = []
        for method, shift in (("X", delta), ("Y", 0.0)):
            per_task = []
            for t, mu in enumerate(mus):
                k = np.rint(layouts * expit(mu + shift + rng.normal(0, seed_sd, seeds))).astype(int)
                per_task.append(TaskScore(f"t{t}", tuple(SeedScore(s, None, int(k[s]), layouts, unused, ())
                                                          for s in range(seeds)), float(k.mean() / layouts), None))
            methods.append(MethodScore(method, tuple(per_task), unused, unused, tasks * seeds))
        draw = rng_for(int(rng.integers(1 << 30)))
        (imp,) = improvements(methods, reps, draw)
        p_in += imp.interval.lo <= true_p <= imp.interval.hi
        profile = profiles(methods[:1], reps, draw)[0]
        at = [profile.taus.index(tau) for tau in taus]
        profile_in += [profile.lo[i] <= truth <= profile.hi[i] for i, truth in zip(at, true_profile, strict=True)]
    return Rate(p_in / runs, runs), tuple(Rate(float(c) / runs, runs) for c in profile_in)
