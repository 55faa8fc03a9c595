"""`make_rig(rig, protocol)`: the Rig object for a rig profile.

Three kinds of rig are registered (`rigs.base.register_rig`), each in its own module, imported
only when a profile needs it: `sim` (`robot.type: sim_so101`: MuJoCo, configured with the
protocol's fps and success test), `twin` (a real-arm profile run with `--twin`: LeRobot over the
wire-level twin), `lerobot` (any other robot type: a real arm through LeRobot, which imports torch
only when it connects). Safe to call inside a worker process: it only builds plain objects;
MuJoCo starts at `connect()`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from orchestrator.rigs.base import RIG_KINDS, Rig
from orchestrator.rigs.profile import LoadedRig, RigProfile

if TYPE_CHECKING:
    from orchestrator.design.protocol import LoadedProtocol

# Where each kind is registered (imported on first use: `lerobot` and `twin` bring LeRobot).
RIG_MODULES = {"sim": "orchestrator.rigs.sim", "twin": "orchestrator.rigs.twin.rig",
               "lerobot": "orchestrator.rigs.so101.rig"}


def rig_kind(rig: LoadedRig | RigProfile) -> str:
    """The kind of rig to build: a loaded profile's declared `kind` (`twin` once a running twin
    is paired with it, `--twin`), a bare profile's `device_kind` (`sim` or `lerobot`; its
    `twin:` section is the twin's settings, not a running twin)."""
    return rig.kind if isinstance(rig, LoadedRig) else rig.device_kind


def rig_class(kind: str) -> type[Rig]:
    if kind not in RIG_KINDS:
        importlib.import_module(RIG_MODULES[kind])
    return RIG_KINDS[kind]


def make_rig(rig: LoadedRig | RigProfile, protocol: LoadedProtocol | None = None, **options: Any) -> Rig:
    """Build the rig for `rig` (a loaded profile or a bare `RigProfile`).

    `protocol` (a `LoadedProtocol`) gives the simulated rig its control rate and success test;
    without it the simulation uses 30 fps and the default 4 cm / 1 s test. `options` go to
    the rig's constructor (e.g. `render=RenderSettings(...)` for the simulation).
    """
    return rig_class(rig_kind(rig)).from_profile(rig, protocol, **options)
