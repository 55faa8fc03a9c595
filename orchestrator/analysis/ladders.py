"""The progress ladders a campaign store holds, read for the report: per
source, per episode, the furthest stage reached and (for the machine judges) the time of each.

Sources (`LADDER_SOURCES`, in the report's order):
- `auto`: the joints, by the `auto` rater's definitions (`judging/auto/ladder.py`), stored
  beside its label;
- `physics`: the simulator's contacts and cube (`sim/success.py`), beside the physics label
  (simulated and twin campaigns);
- `judges`: the stage the human judges recorded with their labels (one key in the judge app);
  with several judges, the lower median of their stages (a stage counts when at least half of
  them saw it; those who recorded none are left out). No times.
The ladder is recorded for a test on partial credit to be pre-registered later; no decision uses it.
"""

from __future__ import annotations

from typing import Any

from orchestrator.store.records import AUTO_JUDGE, NO_STAGE, PHYSICS_JUDGE, STAGES

JUDGES = "judges"
LADDER_SOURCES = (AUTO_JUDGE, PHYSICS_JUDGE, JUDGES)

Ladder = tuple[str, dict[str, float | None] | None]   # (furthest stage or NO_STAGE, stage -> time s)


def stage_rank(stage: str | None) -> int:
    """0 for none, 1 for reached ... 4 for held."""
    return STAGES.index(stage) + 1 if stage in STAGES else 0


def lower_median_stage(stages: list[str]) -> str:
    """The lower median of several judges' stages (a stage at least half of them saw)."""
    ranks = sorted(stage_rank(s) for s in stages)
    rank = ranks[(len(ranks) - 1) // 2]
    return STAGES[rank - 1] if rank else NO_STAGE


def progress_ladders(store: Any) -> dict[str, dict[str, Ladder]]:
    """{source: {episode id: (stage, times)}} for every source with at least one ladder."""
    out: dict[str, dict[str, Ladder]] = {}
    for judge in (AUTO_JUDGE, PHYSICS_JUDGE):
        rows = {ep: (j.stage, j.stage_times) for ep, j in store.latest_labels(judge).items() if j.stage}
        if rows:
            out[judge] = rows
    seen: dict[str, list[str]] = {}
    for judge in store.judges():
        if judge in (AUTO_JUDGE, PHYSICS_JUDGE):
            continue
        for ep, j in store.latest_labels(judge).items():
            if j.stage:
                seen.setdefault(ep, []).append(j.stage)
    if seen:
        out[JUDGES] = {ep: (lower_median_stage(stages), None) for ep, stages in seen.items()}
    return out
