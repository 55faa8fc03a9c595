"""The paired test of method X against method Y across tasks, where campaigns ran both on the
same marks.

Pairs are formed within a campaign on (training seed, layout, repeat): X's and Y's checkpoints
of one seed (the ones that score, `scores.scored_identities`) on one layout run, both of known
outcome. The unit is the (campaign, mark): its pairs share the mark's difficulty, so the test
counts units, stratified by campaign (a unit lies in one campaign). With d_k = b_k - c_k the
unit's X-only minus Y-only pairs, the test is today's clustered sign-flip
(`stats.clustered_p_values`): under H0 X and Y are exchangeable within every unit, all 2^K sign
patterns of the d_k are equally likely; exact and mid-p are two-sided (doubled upper tail); it is
McNemar's exact and mid-p when each unit holds one pair. The primary is the mid-p, Holm-adjusted
over the pairs of methods; the interval is Newcombe's with the design effect over the units
(`stats.clustered_difference`). Cochran-Mantel-Haenszel over the units' method x success tables
is quoted as a reference (`stats.cmh_test`). The verdict says "better" only when the adjusted
mid-p is at most alpha, as the single-campaign report does.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from orchestrator.analysis import stats
from orchestrator.analysis.compare.model import MethodScore, PairedAcross
from orchestrator.analysis.compare.scores import scored_identities
from orchestrator.analysis.compare.trials import Trial
from orchestrator.analysis.report.format import fmt_p, points


def unit_tables(trials: Sequence[Trial], x: str, y: str) -> dict[tuple[str, str], stats.PairedTable]:
    """{(campaign, mark): paired table of X (as A) against Y (as B)} over the pairs there."""
    chosen = scored_identities(trials)
    outcome: dict[tuple, bool] = {}
    for t in trials:
        if t.success is None or t.identity.method not in (x, y):
            continue
        if chosen[(t.task, t.identity.method, t.identity.seed)] != t.identity:
            continue
        outcome[(t.campaign, t.identity.method, t.identity.seed, t.layout, t.repeat)] = bool(t.success)
    cells: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for (campaign, method, seed, layout, repeat), sx in outcome.items():
        if method != x:
            continue
        sy = outcome.get((campaign, y, seed, layout, repeat))
        if sy is None:
            continue
        cells[(campaign, layout)][(not sx) * 2 + (not sy)] += 1
    return {unit: stats.PairedTable(*c) for unit, c in sorted(cells.items())}


def _cmh_tables(tables: Sequence[stats.PairedTable]) -> list[list[list[int]]]:
    return [[[t.both + t.a_only, t.b_only + t.neither], [t.both + t.b_only, t.a_only + t.neither]] for t in tables]


def _verdict(x: str, y: str, table: stats.PairedTable, p: float, adjusted: bool, units: int, tasks: int,
             difference: stats.Interval, alpha: float, significant: bool) -> str:
    if table.n == 0:
        return f"{x} vs {y}: no campaign paired them on a layout; nothing can be said."
    est, lo, hi = points(difference.estimate, difference.lo, difference.hi)
    what = f"sign-flip mid-p{' (Holm-adjusted)' if adjusted else ''} {fmt_p(p)} over {units} (campaign, mark) units"
    ci = f"difference {x} - {y} {est} points, 95% CI {lo} to {hi}"
    across = f"{tasks} task{'s' if tasks != 1 else ''}"
    if significant:
        better, worse = (x, y) if table.a_only > table.b_only else (y, x)
        return f"{better} better than {worse} across {across}: {what}; {ci}."
    return f"{x} vs {y}: not established across {across} ({what}; {ci})."


def _notes(difference: stats.Interval, significant: bool, discordant: int, alpha: float) -> tuple[str, ...]:
    notes = []
    reaches_zero = difference.lo <= 0 <= difference.hi
    if significant and reaches_zero:
        notes.append("the test says better but the clustered 95% interval still reaches 0: a borderline result")
    if not significant and not reaches_zero:
        notes.append("the clustered 95% interval excludes 0 but the test does not reject: the pre-registered "
                     "test decides, so nothing is established")
    if discordant < stats.min_discordant_for_alpha(alpha, "mcnemar_midp"):
        notes.append(f"only {discordant} discordant unit{'s' if discordant != 1 else ''}: too few for any split "
                     f"to reach p <= {alpha:g}")
    return tuple(notes)


def paired_across(trials: Sequence[Trial], methods: Sequence[MethodScore], alpha: float) -> tuple[PairedAcross, ...]:
    """Every pair of methods (in the order of `methods`) that some campaign paired."""
    found = []
    for i, mx in enumerate(methods):
        for my in methods[i + 1:]:
            tables = unit_tables(trials, mx.method, my.method)
            if tables:
                found.append((mx.method, my.method, tables))
    if not found:
        return ()
    raw = [stats.clustered_p_values([t.a_only - t.b_only for t in tables.values()]) for _, _, tables in found]
    adjusted = stats.holm([mid for _, mid in raw])
    task_of = {t.campaign: t.task for t in trials}
    out = []
    for (x, y, tables), (exact, mid), holm_p in zip(found, raw, adjusted, strict=True):
        units = list(tables.values())
        pooled = stats.PairedTable(*(sum(getattr(t, f) for t in units) for f in ("both", "a_only", "b_only", "neither")))
        difference = stats.clustered_difference(units)
        chi2, cmh_p = stats.cmh_test(_cmh_tables(units))
        significant = holm_p <= alpha and pooled.a_only != pooled.b_only
        discordant = sum(1 for t in units if t.a_only != t.b_only)
        tasks = tuple(dict.fromkeys(task_of[c] for c, _ in tables))
        out.append(PairedAcross(
            x=x, y=y, tasks=tasks, campaigns=len({c for c, _ in tables}), table=pooled, units=len(units),
            discordant_units=discordant, exact_p=exact, mid_p=mid, holm_mid_p=holm_p, cmh_chi2=chi2, cmh_p=cmh_p,
            difference=difference, significant=significant,
            verdict=_verdict(x, y, pooled, holm_p, len(found) > 1, len(units), len(tasks), difference, alpha,
                             significant),
            notes=_notes(difference, significant, discordant, alpha)))
    return tuple(out)
