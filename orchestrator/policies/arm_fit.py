"""A LeRobot checkpoint checked against the arm it will drive, before anything moves: the one
function `arm_fit_refusals` that `doctor` (`run.preflight.check_policies`) and `run`'s start
(`run.sequential`, before the arm connects) both call. Each refusal is one line naming the
flag that accepts it (`rigs.so101.hardware_checks.OVERRIDES`); a checkpoint gets at most one,
its first cause in this order:

1. **Units** (`--allow-policy-units`): the normaliser's statistics of `observation.state`
   (preprocessor) and of `action` (postprocessor) in the rig's units (degrees, or -100..100 with
   `use_degrees: false`; the gripper 0-100 in both). Refused when a joint's [min, max] (or its
   mean, without min/max) lies more than `UNITS_MARGIN` of the calibrated span outside the
   calibrated range; when no arm joint moved in the data (the largest std below `MIN_ARM_STD`,
   or the largest span max - min below `MIN_ARM_SPAN`: data in radians spans at most 2 pi);
   or, checked apart on its own 0-100 scale, when the gripper's span (max - min, else 4 std)
   is below `MIN_GRIPPER_SPAN`. A checkpoint in radians (mean 0, std 0.5, range +-1.6) fits
   inside every calibrated range, the gripper's included, so the range alone passes it; its
   actions are then about 0, and the arm would be driven toward the all-zero pose.
2. **Warm-up** (`--allow-nan-warm-up`): the action of the warm-up forward pass (a still
   observation: zero state and black images) must be finite; a NaN action aborts every trial
   at its first step (`rigs.so101.calibrated_range.within_range`).
3. **First action** (`--allow-far-first-action`): the policy's first action on a still
   observation at the pose an episode starts from (the profile's rest pose, else the present
   pose read on the bare bus) must keep every arm joint within `FIRST_ACTION_BOUND` degrees of
   it and the gripper within `FIRST_GRIPPER_BOUND` of its 0-100: beyond, the first steps drive
   the arm at `max_relative_target` per step toward a pose far from where it is. The images are
   black (the cameras are not read here): a policy that needs the scene to move sensibly may
   be refused wrongly, and its flag then accepts it.

Policies run in lerobot-rollout's engines (RTC, interpolation) are checked for units and warm-up
(RTC's warm-up gives a chunk, not an action: units only).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from orchestrator.rigs.base import Rig
from orchestrator.rigs.so101.hardware_checks import OVERRIDES

UNITS_MARGIN = 0.10        # statistics may exceed the calibrated span by 10 % before they are refused
MIN_ARM_STD = 2.0          # rig units: the largest std of the arm's joints in a recording that moved
MIN_ARM_SPAN = 10.0        # rig units: the largest max - min of the arm's joints (radians span <= 6.3)
MIN_GRIPPER_SPAN = 10.0    # of the gripper's 0-100: a gripper that opened and closed in the data
FIRST_ACTION_BOUND = 30.0  # degrees (rig units) between an arm joint's first action and its start pose
FIRST_GRIPPER_BOUND = 50.0  # of the gripper's 0-100 (a policy may open it at once)
GRIPPER = "gripper.pos"
FEATURES = ("observation.state", "action")


def pipeline_stats(pipeline: Any, feature: str) -> dict[str, Any] | None:
    """The normaliser's statistics of `feature` in a processor pipeline, if any."""
    for step in getattr(pipeline, "steps", ()):
        stats = getattr(step, "stats", None)
        if isinstance(stats, Mapping) and feature in stats:
            return dict(stats[feature])
    return None


def _column(stats: Mapping[str, Any], name: str) -> list[float] | None:
    v = stats.get(name)
    if v is None:
        return None
    flat = v.reshape(-1).tolist() if hasattr(v, "reshape") else list(v)
    return [float(x) for x in flat]


def _fmt(x: float) -> str:
    return f"{x:.3g}" if abs(x) < 10 else f"{x:.0f}"


def range_findings(stats: Mapping[str, Any], keys: list[str], rig: Rig) -> list[str]:
    """Joints whose [min, max] (or mean) lies outside the calibrated range by more than the margin."""
    lo_col, hi_col, mean_col = _column(stats, "min"), _column(stats, "max"), _column(stats, "mean")
    found = []
    for i, key in enumerate(keys):
        try:
            calibrated = rig.calibrated_range(key.removesuffix(".pos"))
        except Exception:  # noqa: BLE001 - no calibration for this joint: nothing to compare
            continue
        if calibrated is None:
            continue
        lo, hi = sorted(calibrated)
        if lo_col is not None and hi_col is not None and i < len(lo_col):
            span = (lo_col[i], hi_col[i])
        elif mean_col is not None and i < len(mean_col):
            span = (mean_col[i], mean_col[i])
        else:
            continue
        margin = UNITS_MARGIN * (hi - lo)
        if span[0] < lo - margin or span[1] > hi + margin:
            found.append(f"{key} spans [{span[0]:.1f}, {span[1]:.1f}] against the calibrated [{lo:.1f}, {hi:.1f}]")
    return found


def spread_findings(stats: Mapping[str, Any], keys: list[str]) -> list[str]:
    """The arm's joints that barely moved in the data, and the gripper apart (module docstring)."""
    std, lo, hi = _column(stats, "std"), _column(stats, "min"), _column(stats, "max")
    arm = [i for i, k in enumerate(keys) if k != GRIPPER]
    found = []
    if std is not None and arm and max(std[i] for i in arm) < MIN_ARM_STD:
        found.append(f"the arm's largest std is {_fmt(max(std[i] for i in arm))} (under {MIN_ARM_STD:g})")
    if lo is not None and hi is not None and arm and max(hi[i] - lo[i] for i in arm) < MIN_ARM_SPAN:
        found.append(f"the arm's largest span is {_fmt(max(hi[i] - lo[i] for i in arm))} (under {MIN_ARM_SPAN:g})")
    if GRIPPER in keys:
        g = keys.index(GRIPPER)
        span = hi[g] - lo[g] if lo is not None and hi is not None else 4 * std[g] if std is not None else None
        if span is not None and span < MIN_GRIPPER_SPAN:
            found.append(f"the gripper spans {_fmt(span)} of its 0-100 (under {MIN_GRIPPER_SPAN:g})")
    return found


def units_refusal(statistics: Mapping[str, tuple[Mapping[str, Any] | None, list[str]]], rig: Rig,
                  where: str) -> str | None:
    """One line when the statistics are not in the rig's units; `statistics` maps a feature
    (`observation.state`, `action`) to (its stats or None, its joint names in order)."""
    parts = []
    for feature, (stats, keys) in statistics.items():
        if not stats:
            continue
        found = range_findings(stats, keys, rig) + spread_findings(stats, keys)
        if found:
            parts.append(f"{feature}: {', '.join(found)}")
    if not parts:
        return None
    return (f"{where}: its statistics are not in the rig's units ({rig.joint_units}; gripper 0-100): "
            f"{'; '.join(parts)}: recorded in radians, other units (robot use_degrees) or another "
            f"calibration; pass {OVERRIDES['policy_units']} to run it anyway")


def warm_up_refusal(action: Mapping[str, float] | None, where: str) -> str | None:
    """One line when the warm-up action holds a non-finite value."""
    bad = {k: v for k, v in (action or {}).items() if not math.isfinite(float(v))}
    if not bad:
        return None
    values = ", ".join(f"{k}={v}" for k, v in bad.items())
    return (f"{where}: its warm-up action is not finite ({values}): every trial would abort at its first "
            f"step; pass {OVERRIDES['nan_warm_up']} to run it anyway")


def first_action_refusal(action: Mapping[str, float] | None, start: Mapping[str, float], source: str,
                         units: str, where: str) -> str | None:
    """One line naming the joint whose first action lies farthest beyond its bound from `start`."""
    worst = None
    action = action or {}
    for key, value in action.items():
        if key not in start:
            continue
        bound = FIRST_GRIPPER_BOUND if key == GRIPPER else FIRST_ACTION_BOUND
        distance = abs(float(value) - float(start[key]))
        if distance > bound and (worst is None or distance - bound > worst[1] - worst[2]):
            worst = (key, distance, bound)
    if worst is None:
        return None
    key, distance, bound = worst
    scale = "of the gripper's 0-100" if key == GRIPPER else units
    return (f"{where}: its first action at the episode's start pose ({source}) puts {key.removesuffix('.pos')} "
            f"{distance:.0f} {scale} from it (bound {bound:g}): the first steps would drive the arm toward "
            f"{float(action[key]):.1f} at max_relative_target per step; pass {OVERRIDES['first_action_far']} "
            "to run it anyway")


def arm_fit_refusals(policy: Any, rig: Rig, start: Mapping[str, float] | None, source: str,
                     allowed: Iterable[str] = ()) -> list[str]:
    """At most one line: the first refusal of `policy` (a loaded `LeRobotPolicy`) against `rig`
    whose flag is not in `allowed` (module docstring). `start` is the pose an episode starts
    from (`source` says which: the profile's rest pose, the present pose), None when unknown."""
    allowed = set(allowed)
    where = policy.where
    if "policy_units" not in allowed and (line := units_refusal(policy.statistics(), rig, where)):
        return [line]
    if "nan_warm_up" not in allowed and (line := warm_up_refusal(policy.warmup_action, where)):
        return [line]
    if start and "first_action_far" not in allowed:
        line = first_action_refusal(policy.first_action(start), start, source, rig.joint_units, where)
        if line:
            return [line]
    return []
