"""The progress funnel per policy: of a policy's recorded episodes, how many
reached, grasped, lifted and held the cube, by each source that recorded a ladder
(`analysis.ladders`: the joints, physics, the judges), and the median time to each stage.

Definitions. For a source and a policy, the episodes are the policy's done trials whose episode
has a ladder from that source; a stage's rate is the share of those episodes whose furthest
stage is that stage or a later one (the ladder is monotone), with the mark as the unit: per mark
(successes, episodes), the interval `stats.clustered_wilson` (Wilson's interval on the effective
counts, t(K - 1); Wilson's when each mark has one episode of the policy). The median time is over
the episodes that reached the stage (seconds from the episode's start; the judges record none).
Each rate is a description with its own 95 % interval, not a test: no multiplicity correction
across stages or sources, and no decision of the tool uses the funnel yet.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from orchestrator.analysis.ladders import JUDGES, LADDER_SOURCES, stage_rank
from orchestrator.analysis.outcomes import OutcomeSet
from orchestrator.analysis.stats.clustered_rate import clustered_wilson
from orchestrator.analysis.stats.types import Interval
from orchestrator.store.records import AUTO_JUDGE, PHYSICS_JUDGE, STAGES

NOT_USED = ("The progress ladder is recorded for a test on partial credit to be pre-registered later; "
            "no decision (verdict, stopping rule, consensus) uses it yet.")
SOURCE_WORDS = {AUTO_JUDGE: "the joints (the auto rater's evidence: grasp point by forward kinematics, "
                            "closed on the cube)",
                PHYSICS_JUDGE: "physics (the simulator's contacts and cube)",
                JUDGES: "the judges (the stage each recorded with the `l` key; lower median over judges)"}


@dataclass(frozen=True)
class StageRate:
    stage: str
    reached: int                     # episodes that reached this stage or a later one
    episodes: int
    interval: Interval               # clustered over marks (`clustered_wilson`)
    median_s: float | None           # median time to the stage over those that reached it


@dataclass(frozen=True)
class FunnelRow:
    source: str                      # auto | physics | judges
    policy: str
    episodes: int
    marks: int
    stages: tuple[StageRate, ...]


@dataclass(frozen=True)
class FunnelSection:
    rows: tuple[FunnelRow, ...]
    note: str = NOT_USED


def _row(source: str, policy: str, ladders: dict, data: OutcomeSet) -> FunnelRow | None:
    mine = [o for o in data.outcomes if o.policy == policy and o.state == "done" and o.episode_id in ladders]
    if not mine:
        return None
    stages = []
    for k, stage in enumerate(STAGES, 1):
        per_mark: dict[str, list[int]] = {}
        times = []
        for o in mine:
            furthest, when = ladders[o.episode_id]
            hit = stage_rank(furthest) >= k
            counts = per_mark.setdefault(o.layout, [0, 0])
            counts[0] += hit
            counts[1] += 1
            if hit and when and when.get(stage) is not None:
                times.append(float(when[stage]))
        reached = sum(c[0] for c in per_mark.values())
        stages.append(StageRate(stage, reached, len(mine), clustered_wilson([(c[0], c[1]) for c in per_mark.values()]),
                                statistics.median(times) if times else None))
    return FunnelRow(source, policy, len(mine), len({o.layout for o in mine}), tuple(stages))


def build_funnel(data: OutcomeSet) -> FunnelSection | None:
    """The funnel rows of every source with a ladder, per policy (None: no ladder recorded)."""
    rows = [_row(source, policy, data.ladders[source], data)
            for source in LADDER_SOURCES if data.ladders.get(source) for policy in data.policies]
    kept = tuple(r for r in rows if r is not None)
    return FunnelSection(kept) if kept else None


def cell(s: StageRate) -> str:
    """`17/20 85% (64-95%), 2.4 s`: reached of episodes, the rate with its 95 % interval, the median time."""
    rate = f"{s.reached}/{s.episodes} {100 * s.reached / s.episodes:.0f}% " \
           f"({100 * s.interval.lo:.0f}-{100 * s.interval.hi:.0f}%)"
    return rate + (f", {s.median_s:.1f} s" if s.median_s is not None else "")


def funnel_tables(section: FunnelSection) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) per source, for the text, Markdown and HTML reports."""
    out = []
    for source in LADDER_SOURCES:
        rows = [r for r in section.rows if r.source == source]
        if rows:
            out.append((f"By {SOURCE_WORDS[source]}: episodes reaching each stage, 95% CI over marks, "
                        "median time from the episode's start",
                        ["policy", "episodes", *STAGES],
                        [[r.policy, f"{r.episodes} on {r.marks} marks", *(cell(s) for s in r.stages)] for r in rows]))
    return out


def funnel_json(section: FunnelSection | None) -> dict | None:
    """The report JSON's `progress_ladder`."""
    if section is None:
        return None
    return {"note": section.note, "unit": "mark", "interval": "wilson-clustered (t, mark as the unit), 95%",
            "rows": [{"source": r.source, "policy": r.policy, "episodes": r.episodes, "marks": r.marks,
                      "stages": {s.stage: {"reached": s.reached, "episodes": s.episodes, "rate": s.reached / s.episodes,
                                           "ci95": [s.interval.lo, s.interval.hi], "median_time_s": s.median_s}
                                 for s in r.stages}} for r in section.rows]}
