"""The leaderboard: Bradley-Terry ratings (`stats.bradley_terry`) of every checkpoint from every
pairwise paired comparison in the campaigns, as RoboArena ranks policies.

Within a campaign, two of its policies that ran the same layout run (layout, repeat), both of
known outcome, are compared there; a discordant layout is a win for the one that succeeded (a
concordant one says nothing of which is better). Checkpoints are named by what they are
(`trials.Identity`), so one checkpoint in several campaigns is one entry. The interval is the
basic bootstrap over the (campaign, mark) units, redrawn within each campaign; each row
counts the discordant layouts behind it. The board warns when the comparison graph (an edge
where two entries have a discordant layout between them) is not connected: ratings in different
parts are not comparable. Two neighbours on the board are separated when the bootstrap interval
of their difference excludes 0.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from itertools import combinations

import numpy as np

from orchestrator.analysis.compare.model import BoardRow, Leaderboard
from orchestrator.analysis.compare.trials import Identity, Trial
from orchestrator.analysis.stats import bradley_terry


def unit_wins(trials: Sequence[Trial]) -> tuple[list[Identity], np.ndarray, list[str]]:
    """(entries, U x P x P wins per (campaign, mark) unit, each unit's campaign)."""
    entries = sorted({t.identity for t in trials}, key=lambda i: (i.method, -1 if i.seed is None else i.seed,
                                                                   -1 if i.step is None else i.step))
    index = {e: i for i, e in enumerate(entries)}
    runs: dict[tuple[str, str, int], dict[Identity, bool]] = defaultdict(dict)
    for t in trials:
        if t.success is not None:
            runs[(t.campaign, t.layout, t.repeat)][t.identity] = bool(t.success)
    units: dict[tuple[str, str], np.ndarray] = {}
    for (campaign, layout, _), outcome in runs.items():
        for a, b in combinations(outcome, 2):
            if outcome[a] == outcome[b]:
                continue
            win, lose = (a, b) if outcome[a] else (b, a)
            cell = units.setdefault((campaign, layout), np.zeros((len(entries), len(entries))))
            cell[index[win], index[lose]] += 1
    keys = sorted(units)
    stack = np.array([units[k] for k in keys]) if keys else np.zeros((0, len(entries), len(entries)))
    return entries, stack, [c for c, _ in keys]


def leaderboard(trials: Sequence[Trial], reps: int, rng: np.random.Generator) -> Leaderboard | None:
    """The board, best first; None when no two checkpoints have a discordant layout."""
    entries, units, strata = unit_wins(trials)
    if units.shape[0] == 0 or len(entries) < 2:
        return None
    ratings = bradley_terry.rate(units, strata, reps=reps, rng=rng)
    order = sorted(range(len(entries)), key=lambda i: (-ratings.theta[i], entries[i].name))
    rows = tuple(BoardRow(entries[i].name, float(ratings.theta[i]), float(ratings.lo[i]), float(ratings.hi[i]),
                          int(ratings.comparisons[i])) for i in order)
    parts = bradley_terry.components(units.sum(axis=0))
    components = tuple(tuple(entries[i].name for i in part) for part in parts)
    neighbours = []
    for i, j in zip(order, order[1:], strict=False):
        diff, lo, hi = ratings.difference(i, j)
        neighbours.append((entries[i].name, entries[j].name, diff, lo, hi, not lo <= 0 <= hi))
    notes = []
    if len(components) > 1:
        notes.append("the comparison graph is not connected (" + "; ".join(", ".join(c) for c in components)
                     + "): ratings in different parts are not comparable")
    for a, b, diff, lo, hi, separated in neighbours:
        if not separated:
            notes.append(f"{a} and {b} are not separated: difference {diff:+.2f}, 95% CI {lo:+.2f} to {hi:+.2f}")
    return Leaderboard(rows, components, tuple(neighbours), tuple(notes))
