"""A joint's calibrated range on a LeRobot motor bus, in LeRobot's units (degrees, the gripper
0-100): the calibration file's `range_min` and `range_max` through the bus's own normalisation.
The real-arm rig clips actions to it (minus a margin) and checks the rest pose against it."""

from __future__ import annotations

import math
from typing import Any


def calibrated_range(bus: Any, motor: str) -> tuple[float, float]:
    """(range_min, range_max) of `motor`, normalised as LeRobot normalises positions."""
    cal = bus.calibration[motor]
    mid = bus.motors[motor].id
    lo = bus._normalize({mid: cal.range_min})[mid]
    hi = bus._normalize({mid: cal.range_max})[mid]
    return float(lo), float(hi)


def within_range(action: dict[str, float], limits: dict[str, tuple[float, float]],
                 clipped: dict[str, int]) -> dict[str, float]:
    """`action` with each joint clipped to its `limits` (`action_limits`), counting each clipped
    joint in `clipped`; a non-finite target is the policy's fault (`DeviceFault` of kind `policy`)."""
    from orchestrator.rigs.device_fault import POLICY_CHECK, DeviceFault

    out = dict(action)
    for key, value in action.items():
        if (bounds := limits.get(key)) is None:
            continue
        if not math.isfinite(float(value)):
            raise DeviceFault("policy", "policy", f"non-finite action {key}={value}", POLICY_CHECK)
        bounded = min(max(float(value), bounds[0]), bounds[1])
        if bounded != float(value):
            out[key] = bounded
            clipped[key] = clipped.get(key, 0) + 1
    return out


def _calibrated(bus: Any) -> bool:
    return bus is not None and bool(getattr(bus, "calibration", None))


def action_limits(bus: Any, margin: float) -> dict[str, tuple[float, float]]:
    """`<joint>.pos: (lo, hi)` for each calibrated motor: its range minus `margin` on each side
    (none without a calibrated bus)."""
    if not _calibrated(bus):
        return {}
    limits = {}
    for motor in bus.motors:
        if motor in bus.calibration:
            lo, hi = sorted(calibrated_range(bus, motor))
            limits[f"{motor}.pos"] = (lo + margin, hi - margin)
    return limits


def rest_pose_ranges(bus: Any, rest: dict[str, float]) -> list[tuple[str, float, float, float]]:
    """(key, rest value, lo, hi) for each joint of `rest` the bus has a calibration for, low end
    first (none without a calibrated bus)."""
    if not rest or not _calibrated(bus):
        return []
    out = []
    for key, value in rest.items():
        motor = key.removesuffix(".pos")
        if motor in bus.calibration and motor in bus.motors:
            lo, hi = sorted(calibrated_range(bus, motor))
            out.append((key, value, lo, hi))
    return out
