"""`make_policy(label, spec, protocol, rig)`: the Policy object for a protocol's policy spec.

`type: scripted` -> `policies.scripted.ScriptedPickPolicy(aim_noise_mm)`;
`type: lerobot` -> `policies.lerobot.LeRobotPolicy` (imported lazily: it imports torch), given
the protocol's folder (local checkpoint paths are relative to it), the task, and the rig's
observation features (from the rig profile, so names and image shapes match the rig); with
`inference: {type: rtc}` or `interpolation_multiplier` > 1 -> `policies.rtc.EnginePolicy`
(lerobot-rollout's own inference engines);
`type: lerobot_server` -> `policies.remote.ServerPolicy` (LeRobot's policy server, over gRPC).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from orchestrator.core.errors import BadInput
from orchestrator.design.protocol import LeRobotPolicySpec, LeRobotServerPolicySpec, ScriptedPolicySpec

if TYPE_CHECKING:
    from orchestrator.design.protocol import LoadedProtocol


def make_policy(label: str, spec: Any, protocol: "LoadedProtocol | None" = None, rig: Any = None):
    """Build policy `label` of a protocol from its validated spec."""
    if isinstance(spec, ScriptedPolicySpec):
        from orchestrator.policies.scripted import ScriptedPickPolicy

        return ScriptedPickPolicy(aim_noise_mm=spec.aim_noise_mm, release_s=spec.release_s,
                                  lift_m=spec.lift_m, grip_pct=spec.grip_pct)
    if isinstance(spec, LeRobotPolicySpec):
        from pathlib import Path

        protocol_dir = protocol.path.parent if protocol is not None else Path.cwd()
        task = protocol.protocol.task if protocol is not None else ""
        features: Any = rig
        if rig is None or not hasattr(rig, "observation_features"):
            profile = getattr(rig, "profile", None)
            if profile is None:
                raise BadInput(f"policy {label}: a LeRobot policy needs the rig (for its features)")
            features = profile
        fps = protocol.protocol.episode.fps if protocol is not None else 30
        return lerobot_policy(spec, protocol_dir, task, features, fps=fps)
    if isinstance(spec, LeRobotServerPolicySpec):
        from orchestrator.policies.remote import ServerPolicy

        features = rig if rig is None or hasattr(rig, "observation_features") else getattr(rig, "profile", rig)
        if features is None:
            raise BadInput(f"policy {label}: a served policy needs the rig (for its features)")
        return ServerPolicy(spec, protocol.protocol.task if protocol is not None else "", features,
                            fps=protocol.protocol.episode.fps if protocol is not None else 30)
    raise BadInput(f"policy {label}: unknown policy type {getattr(spec, 'type', spec)!r}")


def lerobot_policy(spec: LeRobotPolicySpec, protocol_dir: Any, task: str, features: Any, *, fps: float,
                   robot_type: str | None = None):
    """The policy object of a `type: lerobot` spec: `LeRobotPolicy` for sync inference, else
    `EnginePolicy` (RTC, or interpolation: lerobot-rollout's own engines)."""
    if spec.inference.type == "rtc" or spec.interpolation_multiplier > 1:
        from orchestrator.policies.rtc import EnginePolicy

        return EnginePolicy(spec, protocol_dir, task, features, fps=fps, robot_type=robot_type)
    from orchestrator.policies.lerobot import LeRobotPolicy

    return LeRobotPolicy(spec, protocol_dir, task, features, robot_type=robot_type)
