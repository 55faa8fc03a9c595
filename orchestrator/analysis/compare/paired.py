"""X against Y across tasks, at two levels that answer two different questions.

**Methods (decides "better")**: the training seed is the unit. Each (task, seed) run has one
score, its success rate on the task (`scores.py`); X's and Y's scores within a task are compared
by the permutation test of the method labels, stratified by task (`stats.seed_permutation_test`),
Holm-adjusted over the pairs of methods; the difference of the mean scores has Welch's t interval
over the seeds. A method claim is about new training runs, so a seed's own training noise belongs
in the error (Agarwal et al. 2021): pooling every seed's trials as if the checkpoints were fixed
said "better" in 20-29 % of suites of two equal methods whose seeds vary (logit sd 0.6-1.0).

**These checkpoints (reported, never "better")**: where a campaign ran X's and Y's scoring
checkpoints on one layout run (campaign, layout, repeat), every X checkpoint is paired with every
Y checkpoint there: a seed number pairs nothing (X seed 0 and Y seed 0 are two unrelated
trainings). The unit is the (campaign, mark): with d_k = b_k - c_k its X-only minus Y-only pairs,
the test is the clustered sign-flip (`stats.clustered_p_values`), Holm-adjusted over the pairs of
methods, and the interval Newcombe's with the design effect over the units
(`stats.clustered_difference`); Cochran-Mantel-Haenszel over the units is a reference. It answers
"did these trained checkpoints differ on these layouts", worded so.

**Seeds paired by number, only when pre-registered**: with `analysis.seed_pairing: by_number` in
the protocol of every campaign that ran X or Y (their runs of one seed number share its
randomness), the method-level test is the sign-flip over the (task, seed number) pairs
(`stats.paired_seed_test`, the paired t interval over them), seeds without a partner left out
and named, and on a layout run X seed s meets Y seed s only. The text says which was used.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from orchestrator.analysis import stats
from orchestrator.analysis.compare.model import CheckpointPairs, MethodScore, PairedAcross
from orchestrator.analysis.compare.scores import scored_identities
from orchestrator.analysis.compare.trials import Campaign, Trial
from orchestrator.analysis.report.format import fmt_p, points


def unit_tables(trials: Sequence[Trial], x: str, y: str, by_seed: bool = False
                ) -> dict[tuple[str, str], stats.PairedTable]:
    """{(campaign, mark): paired table of X (as A) against Y (as B)}: every scoring X checkpoint
    with every scoring Y checkpoint on one layout run (campaign, layout, repeat); `by_seed` (seed
    pairing pre-registered): X seed s with Y seed s only."""
    chosen = scored_identities(trials)
    runs: dict[tuple[str, str, int], dict[str, list[tuple[int | None, bool]]]] = defaultdict(lambda: {x: [], y: []})
    for t in trials:
        if t.success is None or t.identity.method not in (x, y):
            continue
        if chosen[(t.task, t.identity.method, t.identity.seed)] != t.identity:
            continue
        runs[(t.campaign, t.layout, t.repeat)][t.identity.method].append((t.identity.seed, bool(t.success)))
    cells: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for (campaign, layout, _), got in runs.items():
        for seed_x, sx in got[x]:
            for seed_y, sy in got[y]:
                if not by_seed or seed_x == seed_y:
                    cells[(campaign, layout)][(not sx) * 2 + (not sy)] += 1
    return {unit: stats.PairedTable(*c) for unit, c in sorted(cells.items())}


def seed_words(seeds: Sequence[int | None]) -> str:
    """'seed 0', 'seeds 0-2', 'seeds 0, 3, 5' (a run without a seed counts as one seed)."""
    known = sorted({s for s in seeds if s is not None})
    if not known:
        return "its single run"
    if len(known) == 1:
        return f"seed {known[0]}"
    if known == list(range(known[0], known[-1] + 1)):
        return f"seeds {known[0]}-{known[-1]}"
    return "seeds " + ", ".join(map(str, known))


def _cmh_tables(tables: Sequence[stats.PairedTable]) -> list[list[list[int]]]:
    return [[[t.both + t.a_only, t.b_only + t.neither], [t.both + t.b_only, t.a_only + t.neither]] for t in tables]


def _method_verdict(x: str, y: str, test: stats.SeedTest, p: float, adjusted: bool, significant: bool) -> str:
    across = f"{test.tasks} task{'s' if test.tasks != 1 else ''}"
    adjusted_p = f"p{' (Holm-adjusted)' if adjusted else ''} {fmt_p(p)}"
    if test.paired:
        what = (f"sign-flip over {test.seeds_x} (task, seed number) pairs, seeds paired by number as the protocols "
                f"pre-register, stratified by task, {adjusted_p}")
    else:
        what = (f"permutation of method labels over {test.seeds_x} and {test.seeds_y} (task, training seed) "
                f"scores, stratified by task, seeds unpaired, {adjusted_p}")
    iv = test.interval
    if iv is None:
        one = "a task with one seed pair" if test.paired else "a task with one seed"
        ci = f"mean difference {x} - {y} {points(test.difference)[0]} points, no interval ({one})"
    else:
        est, lo, hi = points(test.difference, iv.lo, iv.hi)
        ci = (f"mean difference {x} - {y} {est} points, 95% CI {lo} to {hi} "
              f"({'paired t over seed pairs' if test.paired else 'Welch t over seeds'})")
    if significant:
        better, worse = (x, y) if test.difference > 0 else (y, x)
        return f"{better} better than {worse} across {across} (the training seed the unit): {what}; {ci}."
    return f"{x} vs {y}: not established across {across} (the training seed the unit: {what}; {ci})."


def _method_notes(test: stats.SeedTest, significant: bool, alpha: float) -> list[str]:
    notes = []
    if test.floor > alpha:
        seeds = (f"{test.seeds_x} seed pairs" if test.paired else f"{test.seeds_x} and {test.seeds_y} seeds")
        notes.append(f"with {seeds} in {test.tasks} task"
                     f"{'s' if test.tasks != 1 else ''} no arrangement of the method labels reaches p <= {alpha:g} "
                     f"(smallest possible p {fmt_p(test.floor)}): train more seeds to claim a method difference")
    iv = test.interval
    if iv is not None and significant and iv.lo <= 0 <= iv.hi:
        notes.append("the permutation test says better but the 95% interval over seeds still reaches 0: a "
                     "borderline result")
    if iv is not None and not significant and not iv.lo <= 0 <= iv.hi:
        notes.append("the 95% interval over seeds excludes 0 but the permutation test does not reject: the "
                     "pre-registered test decides, so nothing is established")
    return notes


def _checkpoints(x: str, y: str, xs: str, ys: str, tables: dict[tuple[str, str], stats.PairedTable],
                 holm_p: float, mid: float, exact: float, adjusted: bool, alpha: float,
                 by_seed: bool = False) -> CheckpointPairs:
    units = list(tables.values())
    pooled = stats.PairedTable(*(sum(getattr(t, f) for t in units) for f in ("both", "a_only", "b_only", "neither")))
    difference = stats.clustered_difference(units)
    chi2, cmh_p = stats.cmh_test(_cmh_tables(units))
    discordant = sum(1 for t in units if t.a_only != t.b_only)
    differ = holm_p <= alpha and pooled.a_only != pooled.b_only
    est, lo, hi = points(difference.estimate, difference.lo, difference.hi)
    who = f"{x}'s {xs} vs {y}'s {ys} on these layouts" + (" (each seed against its own number)" if by_seed else "")
    what = (f"sign-flip mid-p{' (Holm-adjusted)' if adjusted else ''} {fmt_p(holm_p)} over {len(units)} "
            f"(campaign, mark) units; difference {est} points, 95% CI {lo} to {hi}")
    if differ:
        more, fewer = (f"{x}'s", f"{y}'s") if pooled.a_only > pooled.b_only else (f"{y}'s", f"{x}'s")
        statement = (f"{who}: {more} checkpoints succeeded more often than {fewer} ({what}); a claim about these "
                     "trained checkpoints, not about the methods")
    else:
        statement = f"{who}: no difference established between these checkpoints ({what})"
    notes = []
    if discordant < stats.min_discordant_for_alpha(alpha, "mcnemar_midp"):
        notes.append(f"only {discordant} discordant unit{'s' if discordant != 1 else ''}: too few for any split "
                     f"to reach p <= {alpha:g}")
    return CheckpointPairs(
        campaigns=len({c for c, _ in tables}), table=pooled, units=len(units), discordant_units=discordant,
        exact_p=exact, mid_p=mid, holm_mid_p=holm_p, cmh_chi2=chi2, cmh_p=cmh_p, difference=difference,
        differ=differ, statement=statement, notes=tuple(notes), by_seed=by_seed)


def _rates(m: MethodScore) -> dict[str, list[float]]:
    return {t.task: [s.rate for s in t.seeds] for t in m.tasks}


def seed_paired_methods(campaigns: Sequence[Campaign]) -> frozenset[str]:
    """The methods every campaign that ran them pre-registers `analysis.seed_pairing: by_number`
    for; two methods' seeds are paired by number only when both are here."""
    declared: set[str] = set()
    undeclared: set[str] = set()
    for c in campaigns:
        (declared if c.seed_pairing == "by_number" else undeclared).update(i.method for _, i in c.policies)
    return frozenset(declared - undeclared)


def _seed_test(mx: MethodScore, my: MethodScore, shared: Sequence[str], paired: bool,
               seed: int) -> tuple[stats.SeedTest, list[str]]:
    """The method-level test: over seed pairs when the pairing is pre-registered and some seed
    number has runs of both methods, else the permutation of labels over unpaired seeds."""
    notes: list[str] = []
    if paired:
        xs = {t.task: {s.seed: s.rate for s in t.seeds if s.seed is not None} for t in mx.tasks}
        ys = {t.task: {s.seed: s.rate for s in t.seeds if s.seed is not None} for t in my.tasks}
        common = {t: sorted(set(xs[t]) & set(ys[t])) for t in shared}
        if any(common.values()):
            alone = [f"{m.method} seed {s} ({t})" for t in shared for m, mine, other in ((mx, xs, ys), (my, ys, xs))
                     for s in sorted(set(mine[t]) - set(other[t]))]
            if alone:
                notes.append("seeds paired by number (pre-registered); without a partner of the same number, left "
                             "out of the method-level test: " + ", ".join(alone))
            return stats.paired_seed_test([[xs[t][s] - ys[t][s] for s in common[t]] for t in shared], rng=seed), notes
        notes.append(f"the protocols pair seeds by number, but {mx.method} and {my.method} share no seed number: "
                     "the seeds are compared unpaired")
    xr, yr = _rates(mx), _rates(my)
    return stats.seed_permutation_test([xr[t] for t in shared], [yr[t] for t in shared], rng=seed), notes


def paired_across(trials: Sequence[Trial], methods: Sequence[MethodScore], alpha: float,
                  seed: int = 0, seed_paired: frozenset[str] = frozenset()) -> tuple[PairedAcross, ...]:
    """Every pair of methods (in the order of `methods`) that share a task: the method-level test
    over seeds, and the checkpoint-level test where some campaign ran both on one layout run.
    Two methods' seeds are paired by number only when both are in `seed_paired`
    (`seed_paired_methods`: pre-registered by every campaign that ran them)."""
    found = []
    for i, mx in enumerate(methods):
        for my in methods[i + 1:]:
            common = [t.task for t in mx.tasks if t.task in {u.task for u in my.tasks}]
            if common:
                by_seed = {mx.method, my.method} <= seed_paired
                test, notes = _seed_test(mx, my, common, by_seed, seed)
                found.append((mx, my, tuple(common), test, unit_tables(trials, mx.method, my.method, test.paired),
                              notes))
    if not found:
        return ()
    method_p = stats.holm([f[3].p for f in found])
    raw = {k: stats.clustered_p_values([t.a_only - t.b_only for t in f[4].values()]) for k, f in enumerate(found)
           if f[4]}
    checkpoint_p = dict(zip(raw, stats.holm([mid for _, mid in raw.values()]), strict=True))
    out = []
    for k, ((mx, my, shared, test, tables, notes), holm_p) in enumerate(zip(found, method_p, strict=True)):
        x, y = mx.method, my.method
        significant = holm_p <= alpha and test.difference != 0
        pairs = None
        if tables:
            xs = seed_words([s.seed for t in mx.tasks if t.task in shared for s in t.seeds])
            ys = seed_words([s.seed for t in my.tasks if t.task in shared for s in t.seeds])
            exact, mid = raw[k]
            pairs = _checkpoints(x, y, xs, ys, tables, checkpoint_p[k], mid, exact, len(raw) > 1, alpha, test.paired)
        out.append(PairedAcross(
            x=x, y=y, tasks=shared, seeds=test, p=holm_p, significant=significant,
            verdict=_method_verdict(x, y, test, holm_p, len(found) > 1, significant),
            checkpoints=pairs, notes=tuple(notes + _method_notes(test, significant, alpha))))
    return tuple(out)
