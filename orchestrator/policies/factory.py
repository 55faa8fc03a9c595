"""`make_policy(label, spec, protocol, rig)`: the Policy object for a protocol's policy spec.

The spec's `type` names a registered policy class (`policies.base.register_policy`):
`scripted` -> `policies.scripted.ScriptedPickPolicy`, `lerobot` -> `policies.lerobot.LeRobotPolicy`
(its module imports torch only when a checkpoint loads), `lerobot_server` ->
`policies.lerobot_server.ServerPolicy` (LeRobot's policy server, over gRPC). Each class builds
itself from the spec (`Policy.from_spec`); a spec the registered class says runs in an engine
(`Policy.runs_in_an_engine`), a `lerobot` spec with `inference: {type: rtc}` or
`interpolation_multiplier` > 1 is built by `policies.rtc.EnginePolicy` (lerobot-rollout's own
inference engines), a `LeRobotPolicy` that is not registered apart.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from orchestrator.core.errors import BadInput
from orchestrator.policies.base import Policy, policy_class

if TYPE_CHECKING:
    from orchestrator.design.protocol import LoadedProtocol
    from orchestrator.policies.lerobot import LeRobotPolicy


def make_policy(label: str, spec: Any, protocol: LoadedProtocol | None = None, rig: Any = None) -> Policy:
    """Build policy `label` of a protocol from its validated spec."""
    kind = getattr(spec, "type", spec)
    try:
        cls = policy_class(str(kind))
    except KeyError:
        raise BadInput(f"policy {label}: unknown policy type {kind!r}") from None
    return _deployed(cls, spec).from_spec(label, spec, protocol, rig)


def lerobot_policy(spec: Any, protocol_dir: Any, task: str, features: Any, *, fps: float,
                   robot_type: str | None = None) -> LeRobotPolicy:
    """The policy object of a `type: lerobot` spec: `LeRobotPolicy` for sync inference, else
    `policies.rtc.EnginePolicy` (RTC, or interpolation: lerobot-rollout's own engines)."""
    from orchestrator.policies.lerobot import LeRobotPolicy

    cls: type[LeRobotPolicy] = LeRobotPolicy
    if LeRobotPolicy.runs_in_an_engine(spec):
        from orchestrator.policies.rtc import EnginePolicy

        cls = EnginePolicy
    return cls(spec, protocol_dir, task, features, fps=fps, robot_type=robot_type)


def _deployed(cls: type[Policy], spec: Any) -> type[Policy]:
    """The class that runs `spec` as it is deployed: a LeRobot policy deployed through
    lerobot-rollout's engines is an `EnginePolicy` (a `LeRobotPolicy`, not registered apart)."""
    if cls.runs_in_an_engine(spec):
        from orchestrator.policies.rtc import EnginePolicy

        return EnginePolicy
    return cls
