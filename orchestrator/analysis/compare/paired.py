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
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from orchestrator.analysis import stats
from orchestrator.analysis.compare.model import CheckpointPairs, MethodScore, PairedAcross
from orchestrator.analysis.compare.scores import scored_identities
from orchestrator.analysis.compare.trials import Trial
from orchestrator.analysis.report.format import fmt_p, points


def unit_tables(trials: Sequence[Trial], x: str, y: str) -> dict[tuple[str, str], stats.PairedTable]:
    """{(campaign, mark): paired table of X (as A) against Y (as B)}: every scoring X checkpoint
    with every scoring Y checkpoint on one layout run (campaign, layout, repeat)."""
    chosen = scored_identities(trials)
    runs: dict[tuple[str, str, int], dict[str, list[bool]]] = defaultdict(lambda: {x: [], y: []})
    for t in trials:
        if t.success is None or t.identity.method not in (x, y):
            continue
        if chosen[(t.task, t.identity.method, t.identity.seed)] != t.identity:
            continue
        runs[(t.campaign, t.layout, t.repeat)][t.identity.method].append(bool(t.success))
    cells: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for (campaign, layout, _), got in runs.items():
        for sx in got[x]:
            for sy in got[y]:
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
    what = (f"permutation of method labels over {test.seeds_x} and {test.seeds_y} (task, training seed) scores, "
            f"stratified by task, p{' (Holm-adjusted)' if adjusted else ''} {fmt_p(p)}")
    iv = test.interval
    if iv is None:
        ci = f"mean difference {x} - {y} {points(test.difference)[0]} points, no interval (a task with one seed)"
    else:
        est, lo, hi = points(test.difference, iv.lo, iv.hi)
        ci = f"mean difference {x} - {y} {est} points, 95% CI {lo} to {hi} (Welch t over seeds)"
    if significant:
        better, worse = (x, y) if test.difference > 0 else (y, x)
        return f"{better} better than {worse} across {across} (the training seed the unit): {what}; {ci}."
    return f"{x} vs {y}: not established across {across} (the training seed the unit: {what}; {ci})."


def _method_notes(test: stats.SeedTest, significant: bool, alpha: float) -> list[str]:
    notes = []
    if test.floor > alpha:
        notes.append(f"with {test.seeds_x} and {test.seeds_y} seeds in {test.tasks} task"
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
                 holm_p: float, mid: float, exact: float, adjusted: bool, alpha: float) -> CheckpointPairs:
    units = list(tables.values())
    pooled = stats.PairedTable(*(sum(getattr(t, f) for t in units) for f in ("both", "a_only", "b_only", "neither")))
    difference = stats.clustered_difference(units)
    chi2, cmh_p = stats.cmh_test(_cmh_tables(units))
    discordant = sum(1 for t in units if t.a_only != t.b_only)
    differ = holm_p <= alpha and pooled.a_only != pooled.b_only
    est, lo, hi = points(difference.estimate, difference.lo, difference.hi)
    who = f"{x}'s {xs} vs {y}'s {ys} on these layouts"
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
        differ=differ, statement=statement, notes=tuple(notes))


def _rates(m: MethodScore) -> dict[str, list[float]]:
    return {t.task: [s.rate for s in t.seeds] for t in m.tasks}


def paired_across(trials: Sequence[Trial], methods: Sequence[MethodScore], alpha: float,
                  seed: int = 0) -> tuple[PairedAcross, ...]:
    """Every pair of methods (in the order of `methods`) that share a task: the method-level test
    over seeds, and the checkpoint-level test where some campaign ran both on one layout run."""
    found = []
    for i, mx in enumerate(methods):
        for my in methods[i + 1:]:
            xr, yr = _rates(mx), _rates(my)
            shared = [task for task in xr if task in yr]
            if shared:
                test = stats.seed_permutation_test([xr[t] for t in shared], [yr[t] for t in shared], rng=seed)
                found.append((mx, my, tuple(shared), test, unit_tables(trials, mx.method, my.method)))
    if not found:
        return ()
    method_p = stats.holm([test.p for *_, test, _ in found])
    raw = {k: stats.clustered_p_values([t.a_only - t.b_only for t in f[4].values()]) for k, f in enumerate(found)
           if f[4]}
    checkpoint_p = dict(zip(raw, stats.holm([mid for _, mid in raw.values()]), strict=True))
    out = []
    for k, ((mx, my, shared, test, tables), holm_p) in enumerate(zip(found, method_p, strict=True)):
        x, y = mx.method, my.method
        significant = holm_p <= alpha and test.difference != 0
        pairs = None
        if tables:
            xs = seed_words([s.seed for t in mx.tasks if t.task in shared for s in t.seeds])
            ys = seed_words([s.seed for t in my.tasks if t.task in shared for s in t.seeds])
            exact, mid = raw[k]
            pairs = _checkpoints(x, y, xs, ys, tables, checkpoint_p[k], mid, exact, len(raw) > 1, alpha)
        out.append(PairedAcross(
            x=x, y=y, tasks=shared, seeds=test, p=holm_p, significant=significant,
            verdict=_method_verdict(x, y, test, holm_p, len(found) > 1, significant),
            checkpoints=pairs, notes=tuple(_method_notes(test, significant, alpha))))
    return tuple(out)
