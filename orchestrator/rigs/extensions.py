"""What a rig package beside the adapters adds to the profile and the LeRobot config, through
hooks instead of imports: a profile section's checker (the twin's `twin:` section) and a camera
type's LeRobot config (the twin's `type: twin` camera).

A package registers its hooks when its `HOOK_MODULES` module is imported; `section_check` and
`camera_config` import those modules by name on first use (as `factory.RIG_MODULES` does for
rig kinds, and LeRobot's registries for device types), so `rigs` never imports the twin, and the
twin, which builds on the simulated rig and the SO-101 adapter, imports `rigs`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

HOOK_MODULES = ("orchestrator.rigs.twin.hooks",)

# section name -> checker(section, camera names, where) -> located problems
SECTION_CHECKS: dict[str, Callable[[dict[str, Any], tuple[str, ...], str], list[str]]] = {}
# camera type -> builder(the profile's camera, the common config fields) -> a LeRobot CameraConfig
CAMERA_CONFIGS: dict[str, Callable[[Any, dict[str, Any]], Any]] = {}


def _load() -> None:
    for name in HOOK_MODULES:
        importlib.import_module(name)


def section_check(name: str) -> Callable[[dict[str, Any], tuple[str, ...], str], list[str]] | None:
    """The checker registered for the profile section `name`, if any."""
    _load()
    return SECTION_CHECKS.get(name)


def camera_config(camera_type: str) -> Callable[[Any, dict[str, Any]], Any] | None:
    """The LeRobot config builder registered for cameras of `camera_type`, if any."""
    _load()
    return CAMERA_CONFIGS.get(camera_type)
