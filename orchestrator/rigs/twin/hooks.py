"""The twin's hooks (`rigs/extensions.py`): the profile's `twin:` section is checked by the fault
plan's rules, and a `type: twin` camera becomes LeRobot's `TwinCameraConfig` (imported only when
one is built: it imports LeRobot)."""

from __future__ import annotations

from typing import Any

from orchestrator.rigs.extensions import CAMERA_CONFIGS, SECTION_CHECKS
from orchestrator.rigs.twin.fault_plan import section_problems


def twin_camera_config(camera: Any, common: dict[str, Any]) -> Any:
    from orchestrator.rigs.twin.twincamera import TwinCameraConfig

    return TwinCameraConfig(index_or_path=str(camera.index_or_path), **common)


SECTION_CHECKS["twin"] = section_problems
CAMERA_CONFIGS["twin"] = twin_camera_config
