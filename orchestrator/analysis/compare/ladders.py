"""Checkpoint ladders: the policies that are ordered checkpoints (`step:`) of one training run
(one method and training seed), paired on the layout runs where several of them ran.

- The trend over the steps: the trend test with the (campaign, mark) as the unit
  (`stats.clustered_trend_test`): a block per (campaign, layout, repeat) holding every step of
  the run that ran there with a known outcome, each step scored by its rank on the ladder, the
  blocks of one mark summed and signs flipped per mark (the repeats of a mark share its own
  response to the step, so they are not independent evidence of a trend).
- Whether the last step still improves on the one before: the two paired on (campaign, layout,
  repeat), the (campaign, mark) the unit (`stats.clustered_p_values`, McNemar's exact and mid-p
  with one pair per mark), with the discordant layouts named.
The statements say "improves" or "worse" only when the mid-p is at most alpha.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from orchestrator.analysis import stats
from orchestrator.analysis.compare.model import Ladder, LadderStep
from orchestrator.analysis.compare.trials import Trial
from orchestrator.analysis.report.format import fmt_p


def _layout_name(campaign: str, layout: str, repeat: int, several: bool) -> str:
    return (f"{campaign}/" if several else "") + layout + (f"#{repeat}" if repeat else "")


def _last_step(outcome: dict[tuple, dict[int, bool]], last: int, previous: int, several: bool):
    """(later only, earlier only, exact, mid-p) of the last step against the one before."""
    later, earlier = [], []
    units: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for (campaign, layout, repeat), steps in sorted(outcome.items()):
        if last not in steps or previous not in steps or steps[last] == steps[previous]:
            continue
        name = _layout_name(campaign, layout, repeat, several)
        if steps[last]:
            later.append(name)
            units[(campaign, layout)][0] += 1
        else:
            earlier.append(name)
            units[(campaign, layout)][1] += 1
    exact, mid = stats.clustered_p_values([b - c for b, c in units.values()])
    return tuple(later), tuple(earlier), exact, mid


def _step(step: int, per_mark: list[list[int]]) -> LadderStep:
    """A step's k/n with the Wilson interval clustered over its (campaign, mark) units."""
    return LadderStep(step, sum(k for k, _ in per_mark), sum(n for _, n in per_mark),
                      stats.clustered_wilson([(k, n) for k, n in per_mark]))


SHOWN = 12     # discordant layouts named in a statement (the JSON lists them all)


def _names(layouts: tuple[str, ...]) -> str:
    if not layouts:
        return ""
    more = len(layouts) - SHOWN
    return f" ({', '.join(layouts[:SHOWN])}" + (f" and {more} more" if more > 0 else "") + ")"


def _statement(last: int, previous: int, later: tuple[str, ...], earlier: tuple[str, ...], mid: float,
               alpha: float) -> str:
    counts = (f"{len(later)} layout{'s' if len(later) != 1 else ''} only step {last} succeeded{_names(later)}, "
              f"{len(earlier)} only step {previous}{_names(earlier)}; mid-p {fmt_p(mid)}")
    if mid <= alpha and len(later) > len(earlier):
        return f"step {last} still improves on step {previous}: {counts}."
    if mid <= alpha and len(earlier) > len(later):
        return f"step {last} is worse than step {previous}: {counts}."
    return f"no evidence that step {last} still improves on step {previous}: {counts}."


def _trend_statement(trend: stats.TrendResult, steps: int, marks: int, alpha: float) -> str:
    direction = ("success rises with the step" if trend.statistic > trend.expected
                 else "success falls with the step")
    said = direction if trend.mid_p <= alpha else "no trend established"
    return (f"trend over the {steps} steps: sign-flip over {marks} (campaign, mark) units ({trend.units} with a "
            f"trend either way, {trend.blocks} informative layout runs): exact p {fmt_p(trend.exact_p)}, mid-p "
            f"{fmt_p(trend.mid_p)}: {said}")


def ladders(trials: Sequence[Trial], alpha: float) -> tuple[Ladder, ...]:
    """One ladder per (method, seed) with at least two steps that ran."""
    runs: dict[tuple[str, int | None], list[Trial]] = defaultdict(list)
    for t in trials:
        if t.identity.step is not None:
            runs[(t.identity.method, t.identity.seed)].append(t)
    out = []
    for (method, seed), mine in sorted(runs.items(), key=lambda kv: (kv[0][0], -1 if kv[0][1] is None else kv[0][1])):
        steps = sorted({t.identity.step for t in mine if t.identity.step is not None})
        if len(steps) < 2:
            continue
        rank = {s: i for i, s in enumerate(steps)}
        outcome: dict[tuple, dict[int, bool]] = defaultdict(dict)
        counts: dict[int, dict[tuple[str, str], list[int]]] = {s: defaultdict(lambda: [0, 0]) for s in steps}
        for t in mine:
            if t.success is None:
                continue
            outcome[(t.campaign, t.layout, t.repeat)][t.identity.step] = bool(t.success)  # type: ignore[index]
            cell = counts[t.identity.step][(t.campaign, t.layout)]                        # type: ignore[index]
            cell[0] += bool(t.success)
            cell[1] += 1
        units: dict[tuple[str, str], list[list[tuple[int, bool]]]] = defaultdict(list)
        for (campaign, layout, _), steps_run in outcome.items():
            if len(steps_run) > 1:
                units[(campaign, layout)].append([(rank[s], y) for s, y in steps_run.items()])
        trend = stats.clustered_trend_test(list(units.values()))
        last, previous = steps[-1], steps[-2]
        several = len({t.campaign for t in mine}) > 1
        later, earlier, exact, mid = _last_step(outcome, last, previous, several)
        out.append(Ladder(
            method=method, seed=seed,
            steps=tuple(_step(s, list(per_mark.values())) for s, per_mark in counts.items()),
            trend=trend, last=last, previous=previous, later_only=later, earlier_only=earlier,
            last_exact_p=exact, last_mid_p=mid, statement=_statement(last, previous, later, earlier, mid, alpha),
            trend_statement=_trend_statement(trend, len(steps), len(units), alpha)))
    return tuple(out)
