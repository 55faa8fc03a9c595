"""What a campaign store's rows say, as values: the trial states and labels, the judges that are
not people, how an abort settles its trial, an episode's opaque id, the record a runner commits
when an episode completes, one label as read back (`sqlite.CampaignStore` writes and reads
them, on SQLite and PostgreSQL alike), and the kind of rig a campaign ran on."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

TRIAL_STATES = ("pending", "running", "done", "aborted")
LABELS = ("success", "failure", "unsure")
# The progress ladder of an episode (`judging/auto/ladder.py` defines each stage):
# the furthest stage reached is stored beside a label (`judgments.stage`, `NO_STAGE` when none was),
# with each stage's time for the machine judges (`judgments.stage_times`, JSON: stage -> s or null).
STAGES = ("reached", "grasped", "lifted", "held")
NO_STAGE = "none"
PHYSICS_JUDGE = "physics"
AUTO_JUDGE = "auto"
# How an aborted attempt settles its trial (attempts.settles; NULL: re-run), and the abort class
# of an interruption (Ctrl-C, a killed process), re-run without limit.
SETTLES_FAILURE = "failure"
SETTLES_EXCLUDED = "excluded"
INTERRUPTED_CLASS = "interrupted"


# The kinds of rig a campaign runs on (`rigs.profile.campaign_rig_kind` reads it from the store).
RIG_SIMULATED, RIG_TWIN, RIG_REAL_ARM = "simulated", "twin", "real_arm"
SIMULATED_ROBOT_TYPE = "sim_so101"
RIG_KIND_WORDS = {RIG_SIMULATED: "simulated SO-101 (MuJoCo, stepped in simulated time)",
                  RIG_TWIN: "rehearsal twin (a real-arm profile on the wire-level simulated SO-101, "
                            "paced in wall-clock time as on the arm)",
                  RIG_REAL_ARM: "real SO-101 arm"}


def new_episode_id() -> str:
    """An opaque episode id: 64 random bits, hex. Not sequential, not derived from time/policy."""
    return "ep_" + secrets.token_hex(8)


@dataclass(frozen=True)
class EpisodeRecord:
    """What the runner commits when an episode completes."""

    episode_id: str
    frames: int
    duration_s: float
    cameras: list[str]
    files: dict[str, str]          # logical name -> path relative to the campaign dir
    digests: dict[str, tuple[int, str]] | None = None  # relative path -> (bytes, sha256)
    physics_success: bool | None = None
    max_lift_m: float | None = None
    time_to_success_s: float | None = None
    safety_events: tuple[str, ...] = ()
    timing: dict[str, Any] | None = None
    auto: tuple[str, str] | None = None   # the `auto` rater's (label, reason), judge AUTO_JUDGE
    auto_ladder: dict[str, float | None] | None = None      # its progress ladder: stage -> time (s)
    physics_ladder: dict[str, float | None] | None = None   # the simulator's (`sim.success`)
    longest_hold_s: float | None = None   # the simulator's longest hold (`sim.success`): in the physics label's note


# The physics label's note: the simulator's truth behind its label (`sim.success.LiftHoldTracker`: the cube
# bottom's highest point, and the longest time it stayed at the success height with both jaws on it), so a
# rule of the `auto` rater is checked against the truth per episode (bench/auto_rater.py). Written by
# `physics_note`, read back by `physics_truth`.
_PHYSICS_NOTE = "physics: cube bottom up to {lift:.2f} mm; longest hold {hold:.3f} s"


def physics_note(max_lift_m: float | None, longest_hold_s: float | None) -> str | None:
    """The physics label's note (None without the simulator's longest hold: older rigs, hardware)."""
    if max_lift_m is None or longest_hold_s is None:
        return None
    return _PHYSICS_NOTE.format(lift=1000.0 * max_lift_m, hold=longest_hold_s)


def physics_truth(note: str | None) -> tuple[float, float] | None:
    """(highest cube bottom, m; longest hold, s) from a physics label's note, None when it has none."""
    prefix, middle = "physics: cube bottom up to ", " mm; longest hold "
    if not note or not note.startswith(prefix) or middle not in note or not note.endswith(" s"):
        return None
    lift, hold = note[len(prefix):-2].split(middle)
    return float(lift) / 1000.0, float(hold)


@dataclass(frozen=True)
class Judgment:
    id: int
    episode_id: str
    judge: str
    label: str
    failure_mode: str | None
    note: str | None
    created_at: float
    source: str
    stage: str | None = None                            # the furthest stage of `STAGES` seen, or NO_STAGE
    stage_times: dict[str, float | None] | None = None  # machine judges: when each stage was reached


def furthest_stage(times: dict[str, float | None] | None) -> str:
    """The furthest stage of a ladder (stage -> time or None), `NO_STAGE` when none was reached."""
    reached = [s for s in STAGES if (times or {}).get(s) is not None]
    return reached[-1] if reached else NO_STAGE
