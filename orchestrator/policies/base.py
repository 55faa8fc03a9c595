"""The Policy interface: what the runner calls each control step, and the registry of policy types.

A policy is reset at the start of every episode with the trial's context, then maps each
observation (rig units, see `rigs.base`) to a joint-position action.

Policy types are registered by name, as LeRobot registers its robots and cameras: a class
decorated `@register_policy("scripted")` builds the protocol's `type: scripted` policies
(`from_spec`). The names are the protocol's (`design.protocol.POLICY_SPECS`, the one list of
types); the class of type T lives in `orchestrator/policies/T.py`, imported on first use
(`policy_class`), so a protocol without LeRobot policies never loads LeRobot.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from orchestrator.core.registry import Registry
from orchestrator.design.protocol import Cube, Mark
from orchestrator.rigs.base import Action, Observation


@dataclass(frozen=True)
class EpisodeContext:
    """Everything a policy may know about the episode it is about to run.

    `mark` is given to scripted policies (they aim at it); learned policies ignore it.
    `seed` is the trial's seed (from the stored schedule), so noise draws are reproducible.
    """

    mark: Mark
    cube: Cube
    seed: int
    fps: int
    duration_s: float
    task: str


class Policy(ABC):
    """A policy the runner drives. `needs_images`: whether `select_action` reads camera images
    (a simulator then renders every step)."""

    needs_images: bool = False
    type_name: str = ""        # set by `register_policy`

    @classmethod
    def from_spec(cls, label: str, spec: Any, protocol: Any = None, rig: Any = None) -> Policy:
        """Build policy `label` from its validated protocol spec (`protocol`: the LoadedProtocol,
        `rig`: the rig or its profile, for what the policy must match)."""
        raise NotImplementedError(f"{cls.__name__} does not say how to build it from a protocol")

    @abstractmethod
    def reset(self, context: EpisodeContext) -> None: ...

    @abstractmethod
    def select_action(self, observation: Observation) -> Action: ...

    @abstractmethod
    def close(self) -> None: ...


POLICY_TYPES: Registry[Policy] = Registry("policy type", Policy, "type_name")


def register_policy(type_name: str):
    """Class decorator: `cls` builds the protocol's policies of `type: type_name`."""
    return POLICY_TYPES.register(type_name)


def policy_class(type_name: str) -> type[Policy]:
    """The class registered for policy type `type_name`, importing its module
    (`orchestrator.policies.<type_name>`) on first use; KeyError for an unknown type."""
    if type_name not in POLICY_TYPES:
        module = f"orchestrator.policies.{type_name}"
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
    if type_name not in POLICY_TYPES:
        raise KeyError(type_name)
    return POLICY_TYPES[type_name]
