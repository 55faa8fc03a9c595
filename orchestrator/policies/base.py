"""The Policy interface: what the runner calls each control step.

A policy is reset at the start of every episode with the trial's context, then maps each
observation (rig units, see `rigs.base`) to a joint-position action.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

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


@runtime_checkable
class Policy(Protocol):
    needs_images: bool

    def reset(self, context: EpisodeContext) -> None: ...
    def select_action(self, observation: Observation) -> Action: ...
    def close(self) -> None: ...
