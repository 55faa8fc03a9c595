"""`make_rig(rig, protocol)`: the Rig object for a rig profile.

`robot.type: sim_so101` -> `rigs.sim.SimRig` (MuJoCo, configured with the protocol's fps and
success test); anything else -> `rigs.lerobot.LeRobotRig` (a real arm through LeRobot, imported
lazily so simulation never imports torch). Safe to call inside a worker process: it only
builds plain objects; MuJoCo starts at `connect()`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from orchestrator.rigs.profile import LoadedRig, RigProfile

if TYPE_CHECKING:
    from orchestrator.design.protocol import LoadedProtocol


def make_rig(rig: LoadedRig | RigProfile, protocol: "LoadedProtocol | None" = None, **options: Any):
    """Build the rig for `rig` (a loaded profile or a bare `RigProfile`).

    `protocol` (a `LoadedProtocol`) gives the simulated rig its control rate and success test;
    without it the simulation uses 30 fps and the default 4 cm / 1 s test. `options` go to
    the rig's constructor (e.g. `render=RenderSettings(...)` for the simulation).
    """
    profile = rig.profile if isinstance(rig, LoadedRig) else rig
    if profile.simulated:
        from orchestrator.rigs.sim import SimRig

        kwargs: dict[str, Any] = {}
        if protocol is not None:
            kwargs = {"fps": protocol.protocol.episode.fps, "success": protocol.protocol.success}
        return SimRig(profile, **kwargs, **options)
    if getattr(rig, "twin", None) is not None:
        from orchestrator.rigs.twin.rig import TwinRig

        return TwinRig(rig, **options)
    from orchestrator.rigs.lerobot import LeRobotRig

    return LeRobotRig(rig, **options)
