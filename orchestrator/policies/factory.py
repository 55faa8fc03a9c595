"""`make_policy(label, spec, protocol, rig)`: the Policy object for a protocol's policy spec.

`type: scripted` -> `policies.scripted.ScriptedPickPolicy(aim_noise_mm)`;
`type: lerobot` -> `policies.lerobot.LeRobotPolicy` (imported lazily: it imports torch), given
the protocol's folder (local checkpoint paths are relative to it), the task, and the rig's
observation features (from the rig profile, so names and image shapes match the rig).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from orchestrator.core.errors import BadInput
from orchestrator.design.protocol import LeRobotPolicySpec, ScriptedPolicySpec

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

        from orchestrator.policies.lerobot import LeRobotPolicy

        protocol_dir = protocol.path.parent if protocol is not None else Path.cwd()
        task = protocol.protocol.task if protocol is not None else ""
        features: Any = rig
        if rig is None or not hasattr(rig, "observation_features"):
            profile = getattr(rig, "profile", None)
            if profile is None:
                raise BadInput(f"policy {label}: a LeRobot policy needs the rig (for its features)")
            features = profile
        return LeRobotPolicy(spec, protocol_dir, task, features)
    raise BadInput(f"policy {label}: unknown policy type {getattr(spec, 'type', spec)!r}")
