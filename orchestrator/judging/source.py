"""What the judge app is given: blinded episodes, the success test, and a place to put labels.

This module holds data types only. It imports nothing from the store, the protocol or the
schedule, so code written against it cannot reach the key (policy labels, seeds, run order).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

RESERVED_JUDGES = ("physics", "consensus", "auto")
# The stages a judge can record with a label (`l` steps through them), as `store.records` has them.
LADDER_STAGES = ("none", "reached", "grasped", "lifted", "held")
# Why a judge may send a trial back for a re-run (start-state audit; `x` then 1-3 in the app).
INVALID_START_REASONS = ("cube not on its mark", "cube knocked before the start", "arm not at rest")
INVALID_START = "invalid_start"   # the label a bundle records for it (never an outcome)
_JUDGE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,31}$")


def check_judge_name(name: str) -> str | None:
    """None if `name` can be a judge name, else why not (one line)."""
    if not _JUDGE_NAME.match(name or ""):
        return (f"judge name {name!r} must be a plain name: a letter, then up to 31 letters, "
                "digits, '_', '-' or '.'")
    if name.lower() in RESERVED_JUDGES:
        return f"judge name {name!r} is reserved (physics, consensus and auto are computed labels)"
    return None


@dataclass(frozen=True)
class Mark:
    """The marked cube position of an episode (metres, robot base frame)."""

    id: str
    x: float | None = None
    y: float | None = None

    def describe(self) -> str:
        if self.x is None or self.y is None:
            return f"Mark {self.id}"
        return f"Mark {self.id}\nx {self.x:+.3f} m, y {self.y:+.3f} m"


@dataclass(frozen=True)
class BlindEpisode:
    """One episode as a judge may see it: an opaque id, its videos, its mark, its length."""

    id: str
    videos: dict[str, Path]          # camera -> absolute path of the video file
    mark: Mark
    duration_s: float
    frames: int
    arm_still: bool = False          # the recorded joints never moved (flagged to the judge)
    stills: dict[str, Path] = field(default_factory=dict)   # camera -> start-state still (JPEG)
    camera_poses: dict[str, dict] = field(default_factory=dict)   # camera -> overlay.CameraPose fields

    @property
    def cameras(self) -> list[str]:
        return list(self.videos)


@dataclass(frozen=True)
class JudgingInfo:
    """What the judge is told about the task (from the protocol, with nothing about policies)."""

    ref: str                         # an opaque reference for the title (campaign or bundle id)
    success_test: str
    failure_modes: tuple[str, ...]
    min_height_m: float              # the success height (the judge's guide)
    kind: str = "campaign"           # "campaign" | "bundle"


@dataclass(frozen=True)
class LabelRecord:
    """A judge's label as stored (not retracted)."""

    id: str                          # store id (campaign) or bundle label id
    episode_id: str
    label: str                       # success | failure | unsure
    failure_mode: str | None = None
    note: str | None = None
    created_at: float = 0.0
    stage: str | None = None         # the furthest stage of the progress ladder the judge saw (`l`)


class JudgeSource(Protocol):
    """Where a judge's episodes come from and where their labels go.

    Every `add`/`retract` is durable when it returns (committed transaction, or appended and
    fsynced line), so quitting or a crash loses nothing.
    """

    info: JudgingInfo
    judge: str

    def episodes(self) -> list[BlindEpisode]:
        """All judgeable episodes, in this judge's own random order."""

    def history(self) -> list[LabelRecord]:
        """This judge's labels that are not retracted, oldest first."""

    def add(self, episode_id: str, label: str, failure_mode: str | None = None,
            note: str | None = None, stage: str | None = None) -> LabelRecord:
        """Record a label (with the stage of the progress ladder the judge saw, if given);
        returns it once it is durable."""

    def retract(self, label_id: str) -> None:
        """Undo a label (kept for the audit trail, no longer counted)."""

    def invalidate(self, episode_id: str, reason: str) -> None:
        """Invalid start: send the episode's trial back for a re-run with `reason` (one of
        `INVALID_START_REASONS`); the episode is never counted as an outcome."""

    def close(self) -> None:
        ...


def current_labels(history: list[LabelRecord]) -> dict[str, LabelRecord]:
    """The latest label per episode from a judge's history (oldest first)."""
    out: dict[str, LabelRecord] = {}
    for record in history:
        out[record.episode_id] = record
    return out

