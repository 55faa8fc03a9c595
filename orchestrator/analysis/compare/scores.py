"""Per method and task: each training seed's k/n with its Wilson interval clustered over the
(campaign, mark) units (`stats.clustered_wilson`: the repeats of a mark are not independent), the mean over seeds
with its Student-t interval; across tasks: the mean and IQM (stratified bootstrap), the
probability of improvement and the performance profiles (`stats.aggregate`, rliable's
definitions).

The score of a (method, task, seed) run is its success rate on the task: the trials of known
outcome of that checkpoint, pooled over the task's campaigns. When a run has several
checkpoints (`step:`), its score is its last step's (the ladder section shows the others).
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from orchestrator.analysis import stats
from orchestrator.analysis.compare.model import Improvement, MethodScore, Profile, SeedScore, TaskScore
from orchestrator.analysis.compare.trials import Identity, Trial

RunKey = tuple[str, str, "int | None"]          # task, method, seed
TAUS = tuple(round(0.01 * i, 2) for i in range(101))

Rng = Callable[..., np.random.Generator]

FEW_SEEDS = 10
# measured by aggregate_coverage in tests/support/compare_sim.py (3 tasks, seed log-odds sd 0.6 and 1.0;
# two runs of 200 and 400, bench/compare_sims.py): the IQM's 95% stratified percentile bootstrap
BOOTSTRAP_COVERAGE = "0.75-0.83 with 3 seeds a task, 0.90-0.92 with 5"


def rng_for(seed: int) -> Rng:
    """A generator for one named statistic: the same numbers whatever else is computed."""
    def make(*names: object) -> np.random.Generator:
        digest = hashlib.sha256("|".join(map(str, names)).encode()).digest()
        return np.random.default_rng([seed, int.from_bytes(digest[:8], "big")])
    return make


def scored_identities(trials: Iterable[Trial]) -> dict[tuple[str, str, int | None], Identity]:
    """The checkpoint that scores each (task, method, seed): its last step (None counts lowest)."""
    best: dict[tuple[str, str, int | None], Identity] = {}
    for t in trials:
        key = (t.task, t.identity.method, t.identity.seed)
        old = best.get(key)
        if old is None or (t.identity.step if t.identity.step is not None else -1) > (
                old.step if old.step is not None else -1):
            best[key] = t.identity
    return best


def _seed_scores(trials: Sequence[Trial]) -> dict[tuple[str, str], list[SeedScore]]:
    chosen = scored_identities(trials)
    marks: dict[tuple[str, str, int | None], dict[tuple[str, str], list[int]]] = defaultdict(dict)
    policies: dict[tuple[str, str, int | None], dict[str, None]] = defaultdict(dict)
    for t in trials:
        key = (t.task, t.identity.method, t.identity.seed)
        if t.identity != chosen[key] or t.success is None:
            continue
        cell = marks[key].setdefault((t.campaign, t.layout), [0, 0])
        cell[0] += bool(t.success)
        cell[1] += 1
        policies[key][f"{t.campaign}:{t.policy}"] = None
    out: dict[tuple[str, str], list[SeedScore]] = defaultdict(list)
    for key in sorted(marks, key=lambda k: (k[0], k[1], -1 if k[2] is None else k[2])):
        per_mark = [(k, n) for k, n in marks[key].values()]
        k, n = sum(c[0] for c in per_mark), sum(c[1] for c in per_mark)
        out[(key[0], key[1])].append(SeedScore(key[2], chosen[key].step, k, n, stats.clustered_wilson(per_mark),
                                               tuple(policies[key])))
    return out


def method_scores(trials: Sequence[Trial], reps: int, rng: Rng) -> tuple[tuple[MethodScore, ...], list[str]]:
    """Every method's per-task scores and across-task mean and IQM, with notes."""
    per = _seed_scores(trials)
    notes: list[str] = []
    methods = sorted({m for _, m in per})
    out = []
    for method in methods:
        tasks = []
        for (task, m), seeds in per.items():
            if m != method:
                continue
            rates = [s.rate for s in seeds]
            t95 = stats.rate_t_interval(rates) if len(rates) >= 2 else None
            tasks.append(TaskScore(task, tuple(seeds), float(np.mean(rates)), t95))
        mean, iqm = stats.mean_and_iqm_intervals([[s.rate for s in t.seeds] for t in tasks], reps=reps,
                                                 rng=rng("mean-iqm", method))
        over_seeds = stats.satterthwaite_interval([(1 / len(tasks), np.array([s.rate for s in t.seeds]))
                                                   for t in tasks])
        if over_seeds is not None:      # the t interval over seeds; the bootstrap undercovers with few seeds
            mean = stats.Interval(mean.estimate, over_seeds.lo, over_seeds.hi, "t-satterthwaite", mean.level)
        out.append(MethodScore(method, tuple(tasks), mean, iqm, sum(len(t.seeds) for t in tasks)))
    task_sets = {m.method: {t.task for t in m.tasks} for m in out}
    if len({frozenset(s) for s in task_sets.values()}) > 1:
        notes.append("the methods were not all run on the same tasks ("
                     + "; ".join(f"{m}: {', '.join(sorted(s))}" for m, s in task_sets.items())
                     + "): their means and IQMs average different tasks; the probability of improvement "
                       "uses the tasks both methods have")
    single = [m.method for m in out if all(len(t.seeds) < 2 for t in m.tasks)]
    if single:
        notes.append(f"one training seed per task for {', '.join(single)}: no t-interval over seeds, and "
                     "the stratified bootstrap over runs has nothing to redraw (its interval is the point)")
    few = sorted({len(t.seeds) for m in out for t in m.tasks if 1 < len(t.seeds) < FEW_SEEDS})
    if few:
        notes.append(f"fewer than {FEW_SEEDS} training seeds in a task ({', '.join(map(str, few))}): the IQM's "
                     "stratified bootstrap interval is narrower than 95%: it covered " + BOOTSTRAP_COVERAGE + " in "
                     "simulation (docs/statistics.md); the mean's interval is Student t over seeds instead "
                     "(Welch-Satterthwaite), the probability of improvement's bootstrap is rescaled by "
                     "sqrt(n/(n-1)) and the profiles' band is Clopper-Pearson over the runs")
    ordered = tuple(sorted(out, key=lambda m: (-m.mean.estimate, m.method)))
    return ordered, notes


def rescaled(iv: stats.Interval, n: int) -> stats.Interval:
    """The percentile bootstrap interval widened about its estimate by sqrt(n / (n - 1)), n the
    fewest runs resampled in a task: the bootstrap resamples n runs as if their spread were the
    population's, which understates the variance by (n - 1) / n (Davison & Hinkley 1997, section
    2.4). Clipped to [0, 1]."""
    if n < 2:
        return iv
    f = (n / (n - 1)) ** 0.5
    return stats.Interval(iv.estimate, max(0.0, iv.estimate - f * (iv.estimate - iv.lo)),
                          min(1.0, iv.estimate + f * (iv.hi - iv.estimate)), iv.method + "-rescaled", iv.level)


def improvements(methods: Sequence[MethodScore], reps: int, rng: Rng) -> tuple[Improvement, ...]:
    """P(X > Y) for every pair, X the method listed first (higher mean), over shared tasks: the
    stratified bootstrap interval, rescaled (`rescaled`) by the fewest seeds of either method in a task."""
    out = []
    for i, x in enumerate(methods):
        for y in methods[i + 1:]:
            xt = {t.task: [s.rate for s in t.seeds] for t in x.tasks}
            yt = {t.task: [s.rate for s in t.seeds] for t in y.tasks}
            shared = [task for task in xt if task in yt]
            if not shared:
                continue
            iv = stats.improvement_interval([xt[t] for t in shared], [yt[t] for t in shared], reps=reps,
                                            rng=rng("improvement", x.method, y.method))
            fewest = min(min(len(xt[t]), len(yt[t])) for t in shared)
            out.append(Improvement(x.method, y.method, tuple(shared), rescaled(iv, fewest)))
    return tuple(out)


def profiles(methods: Sequence[MethodScore], reps: int, rng: Rng) -> tuple[Profile, ...]:
    """Each method's score distribution (fraction of runs above tau) with a 95% band: at every tau
    the Clopper-Pearson interval of the k of N pooled runs above it (`stats.clopper_pearson`: the
    runs are independent; within a task they share a rate p_t, and such a stratified count has
    tails no heavier than the binomial's). The stratified percentile bootstrap
    (`stats.profile_intervals`, rliable's) covered 0.22-0.85 with 3 to 5 seeds a task: a task
    whose few runs all sit on one side of tau adds no spread (docs/statistics.md). `reps` and
    `rng` are kept for the callers' signature (the band draws nothing)."""
    del reps, rng
    out = []
    for m in methods:
        runs = np.array([s.rate for t in m.tasks for s in t.seeds])
        bands = [stats.clopper_pearson(int(np.sum(runs > tau)), int(runs.size)) for tau in TAUS]
        out.append(Profile(m.method, TAUS, tuple(b.estimate for b in bands), tuple(b.lo for b in bands),
                           tuple(b.hi for b in bands)))
    return tuple(out)
