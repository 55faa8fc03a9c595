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
from collections.abc import Sequence
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
    """A policy the runner drives.

    Besides the abstract methods, the runner (`run/control_loop.py`), the factory
    (`policies/factory.py`) and preflight (`run/preflight.py`) use the members below, each with a
    default that is right for a policy that computes every action on the control thread from the
    observation it is given (the scripted pick), as LeRobot's `InferenceEngine` gives its optional
    hooks (`pause`, `resume`, `notify_observation`) a no-op default so rollout strategies call them
    unconditionally. Nothing is probed with `getattr`/`hasattr` (tests/test_policy_interface.py).

    - `needs_images`: whether `select_action` reads camera images (a simulator then renders every
      step).
    - `asynchronous`: actions are computed on a thread or a server of the policy's own, in
      wall-clock time, so the runner paces the loop even on a simulated rig. A policy that is
      asynchronous must override `stop`: a class that says `asynchronous = True` and keeps the
      default `stop` is refused when it is defined (`__init_subclass__`), and one whose
      `asynchronous` is a property is held to it by the interface test.
    - `stop()`: called on every way out of an episode (its end, the stop key, Ctrl-C, a fault),
      before the arm is moved: stop the background work and drop every queued and in-flight
      action, so nothing computed before a stop is sent after it. Default: nothing is queued.
    - `inference_timing()`: an asynchronous policy's own figures for the episode just run (the
      report's control-loop section); None: nothing to add to the loop's own timing.
    - `runs_in_an_engine(spec)`: whether `spec` is deployed through lerobot-rollout's inference
      engines (RTC, or interpolation), which `policies.rtc.EnginePolicy` runs (the factory picks).
    - `warnings`, `warmup_s`, `ordered_action_keys`: what preflight shows of a loaded policy:
      its load's warnings (as lerobot-rollout gives them), the seconds its warm-up took, the
      action keys it writes in order. Defaults: none, 0 s, none declared.
    """

    needs_images: bool = False
    asynchronous: bool = False
    type_name: str = ""        # set by `register_policy`
    warnings: Sequence[str] = ()
    warmup_s: float = 0.0
    ordered_action_keys: Sequence[str] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.asynchronous is True and cls.stop is Policy.stop:
            raise TypeError(f"{cls.__name__} is asynchronous but keeps Policy.stop, which drops nothing: "
                            "override stop() to drop its queued and in-flight actions")

    @classmethod
    def from_spec(cls, label: str, spec: Any, protocol: Any = None, rig: Any = None) -> Policy:
        """Build policy `label` from its validated protocol spec (`protocol`: the LoadedProtocol,
        `rig`: the rig or its profile, for what the policy must match)."""
        raise NotImplementedError(f"{cls.__name__} does not say how to build it from a protocol")

    @staticmethod
    def runs_in_an_engine(spec: Any) -> bool:
        """Whether `spec` runs through lerobot-rollout's engines (`policies.rtc.EnginePolicy`)."""
        return False

    @abstractmethod
    def reset(self, context: EpisodeContext) -> None: ...

    @abstractmethod
    def select_action(self, observation: Observation) -> Action: ...

    @abstractmethod
    def close(self) -> None: ...

    def stop(self) -> None:  # noqa: B027 - the optional hook's default: nothing is queued
        """Stop background inference and drop every queued and in-flight action."""

    def inference_timing(self) -> dict[str, Any] | None:
        """The policy's own inference figures for the episode just run, or None."""
        return None


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
