"""The `auto` rater's labels in the campaign store (judge `auto`, source `auto`).

The runner rates each episode as it is committed (`rate_recorded`, same transaction as the
physics label), with its progress ladder (`ladder.py`) beside the label; `rate_missing` rates
the episodes of an existing campaign that have no `auto` label (or no ladder) yet (`orchestrator judge CAMPAIGN --judge auto`). The label's note is the rater's one
line of reasons. Whether `auto` counts in the consensus is the protocol's `judging.auto`
(default `advisory`: never counted; `counted`: one more judge).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.core.errors import RuntimeFailure
from orchestrator.design.judge_facts import facts_of
from orchestrator.judging.auto.ladder import ladder_file
from orchestrator.judging.auto.rater import AutoVerdict, arm_moved, rate_file
from orchestrator.store.episode_files import EpisodeFiles, read_series
from orchestrator.store.records import furthest_stage
from orchestrator.store.sqlite import AUTO_JUDGE, CampaignStore


def verdict_label(verdict: AutoVerdict) -> tuple[str, str]:
    if verdict.unsure:
        return "unsure", verdict.reason
    return ("success" if verdict.success else "failure"), verdict.reason


def rate_recorded(series: Path, cube_size_m: float, success: Any, mark: Any = None,
                  simulated: bool = False) -> tuple[str, str, dict[str, float | None] | None]:
    """(label, reason, progress ladder) for a just-recorded episode's time series under a
    `Success` test; the ladder (`ladder.py`) needs the trial's `mark` (x, y), else None;
    `simulated`: recorded in the simulated scene, whose wrist camera the rater can measure
    (`rater.rate_file`)."""
    height, hold = float(success.min_height_m), float(success.hold_s)
    label, reason = verdict_label(rate_file(Path(series), cube_size_m, height, hold, simulated=simulated))
    steps = None if mark is None else ladder_file(Path(series), cube_size_m, height, hold, (mark.x, mark.y))
    return label, reason, steps


def campaign_test(store: CampaignStore) -> tuple[float, float, float]:
    """(cube size m, min_height_m, hold_s) from the campaign's frozen protocol and layout."""
    facts = facts_of(store.frozen_protocol())
    return facts.cube_size_m, facts.min_height_m, facts.hold_s


def rate_missing(store: CampaignStore) -> tuple[int, int]:
    """Rate every episode without a live `auto` label, or whose label has no progress ladder (a
    campaign recorded before the ladder: it is rated again, the new label written and the old one
    retracted); returns (rated now, already rated with a ladder)."""
    cube, height, hold = campaign_test(store)
    layout = store.frozen_protocol().layout
    marks = {t.episode_id: layout.mark(t.mark_id) for t in store.trials() if t.episode_id}
    have = store.latest_labels(AUTO_JUDGE)
    rated = 0
    for episode in sorted(store.episodes(), key=lambda e: e["id"]):
        episode_id = episode["id"]
        old = have.get(episode_id)
        if old is not None and old.stage_times is not None:
            continue
        series = EpisodeFiles.from_dict(episode["files"]).timeseries
        if not series or not (store.directory / series).is_file():
            continue
        label, reason, steps = rate_recorded(store.directory / series, cube, _Test(height, hold), marks[episode_id],
                                             simulated=episode["physics_success"] is not None)
        store.add_judgment(episode_id, AUTO_JUDGE, label, note=reason, source="auto",
                           stage=furthest_stage(steps), stage_times=steps)
        if old is not None:
            store.retract_judgment(old.id)
        rated += 1
    return rated, sum(1 for j in have.values() if j.stage_times is not None)


@dataclass(frozen=True)
class _Test:
    """The protocol's success test as `rate_recorded` reads it."""

    min_height_m: float
    hold_s: float


def series_arm_moved(series: Path) -> bool | None:
    """Whether the arm moved in a recorded episode (None: no readable time series)."""
    try:
        return arm_moved(read_series(series)["state"])
    except RuntimeFailure:
        return None


def still_episodes(directory: Path, episodes) -> tuple[str, ...]:
    """Ids of the episodes (store rows with `files`) whose arm never moved (`rater.arm_moved`)."""
    out = []
    for episode in episodes:
        series = EpisodeFiles.from_dict(episode["files"]).timeseries
        if series and series_arm_moved(Path(directory) / series) is False:
            out.append(str(episode["id"]))
    return tuple(sorted(out))
