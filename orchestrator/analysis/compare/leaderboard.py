"""The leaderboard: Bradley-Terry ratings (`stats.bradley_terry`) of every checkpoint from every
pairwise paired comparison in the campaigns, as RoboArena ranks policies.

Within a campaign, two of its policies that ran the same layout run (layout, repeat), both of
known outcome, are compared there; a discordant layout is a win for the one that succeeded (a
concordant one says nothing of which is better). Checkpoints are named by what they are
(`trials.Identity`), so one checkpoint in several campaigns is one entry. The interval is the
basic bootstrap over the (campaign, mark) units, redrawn within each campaign; each row
counts the discordant layouts behind it. The board warns when the comparison graph (an edge
where two entries have a discordant layout between them) is not connected: ratings in different
parts are not comparable.

Two neighbours on the board are *separated* when a test on their own discordant layouts says so:
the cluster sign-flip over the (campaign, mark) units where they met (d_k: the higher one's wins
minus its losses there; `stats.clustered_p_values`), mid-p Holm-adjusted over the neighbours, at
most alpha. Their head-to-head interval is the Clopper-Pearson interval of the higher one's
share of their discordant layouts on the effective counts over marks (`bradley_terry.head_to_head`)
on the log-odds scale: under the model that share is sigma(theta_a - theta_b), and the interval
holds near 0 and 1, where the basic bootstrap of the ratings covered 0.71 (a leader that won 33 of 34 against
the runner-up was called "not separated", difference CI -0.10 to +4.80). A checkpoint with two or
fewer wins or losses is flagged: its rating rests on the penalty and its bootstrap interval is
not to be read as 95 %.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from itertools import combinations

import numpy as np

from orchestrator.analysis import stats
from orchestrator.analysis.compare.model import BoardRow, Leaderboard, Neighbours
from orchestrator.analysis.compare.trials import Identity, Trial
from orchestrator.analysis.report.format import fmt_p
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


def _logit(p: float) -> float:
    return float("-inf") if p <= 0 else float("inf") if p >= 1 else math.log(p / (1 - p))


def _neighbours(units: np.ndarray, order: list[int], names: list[str], theta: np.ndarray,
                alpha: float) -> tuple[Neighbours, ...]:
    """Each two neighbours' own test and head-to-head interval, Holm over the neighbours."""
    found = []
    for i, j in zip(order, order[1:], strict=False):
        won, lost = units[:, i, j], units[:, j, i]
        met = [(int(w), int(w + v)) for w, v in zip(won, lost, strict=True) if w + v]
        _, mid = stats.clustered_p_values([w - (n - w) for w, n in met]) if met else (1.0, 1.0)
        found.append((i, j, int(won.sum()), int(lost.sum()), len(met), mid, bradley_terry.head_to_head(met)))
    adjusted = stats.holm([f[5] for f in found])
    return tuple(Neighbours(a=names[i], b=names[j], rating_difference=float(theta[i] - theta[j]), wins=w, losses=v,
                            units=k, mid_p=mid, holm_p=h, separated=h <= alpha and w != v,
                            lo=_logit(share[1]), hi=_logit(share[2]))
                 for (i, j, w, v, k, mid, share), h in zip(found, adjusted, strict=True))


def _signed(x: float) -> str:
    return "+inf" if x == float("inf") else "-inf" if x == float("-inf") else f"{x:+.2f}"


def neighbour_note(n: Neighbours, count: int) -> str:
    """One line on two neighbours: the test on their own layouts and its decision."""
    said = "separated" if n.separated else "not separated"
    if n.wins + n.losses == 0:
        return f"{n.a} and {n.b} are not separated: they never met on a discordant layout"
    holm = f", Holm-adjusted over {count} neighbours {fmt_p(n.holm_p)}" if count > 1 else ""
    return (f"{n.a} and {n.b} are {said}: {n.a} won {n.wins} of their {n.wins + n.losses} discordant layouts "
            f"({n.units} (campaign, mark) units; sign-flip mid-p {fmt_p(n.mid_p)}{holm}); head-to-head log-odds "
            f"95% CI {_signed(n.lo)} to {_signed(n.hi)} (Clopper-Pearson over marks); rating difference "
            f"{n.rating_difference:+.2f}")


def leaderboard(trials: Sequence[Trial], reps: int, rng: np.random.Generator,
                alpha: float = 0.05) -> Leaderboard | None:
    """The board, best first; None when no two checkpoints have a discordant layout."""
    entries, units, strata = unit_wins(trials)
    if units.shape[0] == 0 or len(entries) < 2:
        return None
    ratings = bradley_terry.rate(units, strata, reps=reps, rng=rng)
    total = units.sum(axis=0)
    order = sorted(range(len(entries)), key=lambda i: (-ratings.theta[i], entries[i].name))
    rows = tuple(BoardRow(entries[i].name, float(ratings.theta[i]), float(ratings.lo[i]), float(ratings.hi[i]),
                          int(ratings.comparisons[i]), int(total[i].sum()), int(total[:, i].sum())) for i in order)
    parts = bradley_terry.components(total)
    components = tuple(tuple(entries[i].name for i in part) for part in parts)
    neighbours = _neighbours(units, order, [e.name for e in entries], ratings.theta, alpha)
    notes = []
    if len(components) > 1:
        notes.append("the comparison graph is not connected (" + "; ".join(", ".join(c) for c in components)
                     + "): ratings in different parts are not comparable")
    notes += [neighbour_note(n, len(neighbours)) for n in neighbours]
    for r in rows:
        if r.near_separation:
            notes.append(f"{r.name} has {r.wins} win{'s' if r.wins != 1 else ''} and {r.losses} loss"
                         f"{'es' if r.losses != 1 else ''}: its rating rests on the penalty (near separation), its "
                         "bootstrap interval is not a 95% interval; read the head-to-head lines")
    return Leaderboard(rows, components, neighbours, tuple(notes))
