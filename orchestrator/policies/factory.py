"""`make_policy(label, spec, protocol, rig)`: the Policy object for a protocol's policy spec.

The spec's `type` names a registered policy class (`policies.base.register_policy`):
`scripted` -> `policies.scripted.ScriptedPickPolicy`, `lerobot` -> `policies.lerobot.LeRobotPolicy`
(its module imports torch only when a checkpoint loads). Each class builds itself from the spec
(`Policy.from_spec`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from orchestrator.core.errors import BadInput
from orchestrator.policies.base import Policy, policy_class

if TYPE_CHECKING:
    from orchestrator.design.protocol import LoadedProtocol


def make_policy(label: str, spec: Any, protocol: "LoadedProtocol | None" = None, rig: Any = None) -> Policy:
    """Build policy `label` of a protocol from its validated spec."""
    kind = getattr(spec, "type", spec)
    try:
        cls = policy_class(str(kind))
    except KeyError:
        raise BadInput(f"policy {label}: unknown policy type {kind!r}") from None
    return cls.from_spec(label, spec, protocol, rig)
