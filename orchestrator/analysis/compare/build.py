"""`build_comparison`: the frozen comparison of several campaigns, the only place the compare
statistics are called. Held-out strata (`held_out: true` in a layout, or the CSV's column) are
analysed apart: every section is computed once on the other trials and once on the held-out
ones."""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.analysis.compare.combine import Inputs
from orchestrator.analysis.compare.ladders import ladders
from orchestrator.analysis.compare.leaderboard import leaderboard
from orchestrator.analysis.compare.model import SCHEMA, Comparison, Section
from orchestrator.analysis.compare.paired import paired_across, seed_paired_methods
from orchestrator.analysis.compare.scores import Rng, improvements, method_scores, profiles, rng_for
from orchestrator.analysis.compare.trials import Trial
from orchestrator.analysis.stats import aggregate, bradley_terry


def _section(label: str, trials: Sequence[Trial], reps: int, profile_reps: int, board_reps: int, alpha: float,
             rng: Rng, seed_paired: frozenset[str] = frozenset()) -> Section:
    methods, notes = method_scores(trials, reps, lambda *n: rng(label, *n))
    paired = paired_across(trials, methods, alpha, seed_paired=seed_paired)
    pairs = {(p.x, p.y) for p in paired if p.checkpoints is not None}
    unpaired = [f"{x.method} and {y.method}" for i, x in enumerate(methods) for y in methods[i + 1:]
                if (x.method, y.method) not in pairs]
    if unpaired:
        notes.append("no campaign ran " + "; ".join(unpaired) + " on one layout run: no checkpoint-level "
                     "comparison for them")
    return Section(label=label, methods=methods,
                   improvements=improvements(methods, reps, lambda *n: rng(label, *n)),
                   profiles=profiles(methods, profile_reps, lambda *n: rng(label, *n)),
                   paired=paired, ladders=ladders(trials, alpha),
                   leaderboard=leaderboard(trials, board_reps, rng(label, "leaderboard"), alpha),
                   notes=tuple(notes))


def build_comparison(inputs: Inputs, reps: int = aggregate.REPS, seed: int = 0, alpha: float = 0.05,
                     profile_reps: int = aggregate.PROFILE_REPS, board_reps: int = bradley_terry.REPS) -> Comparison:
    """Every section of the comparison, seeded: the same inputs and seed give the same numbers."""
    rng = rng_for(seed)
    held = [t for t in inputs.trials if t.held_out]
    rest = [t for t in inputs.trials if not t.held_out]
    notes = [f"{c.key}: {w}" for c in inputs.campaigns for w in c.warnings]
    by_seed = seed_paired_methods(inputs.campaigns)
    main = _section("in distribution" if held else "all strata", rest, reps, profile_reps, board_reps, alpha, rng,
                    by_seed)
    held_out = (_section("held-out strata", held, reps, profile_reps, board_reps, alpha, rng, by_seed)
                if any(t.success is not None for t in held) else None)
    return Comparison(schema=SCHEMA, campaigns=inputs.campaigns, main=main, held_out=held_out, reps=reps,
                      profile_reps=profile_reps, board_reps=board_reps, seed=seed, alpha=alpha, notes=tuple(notes))
