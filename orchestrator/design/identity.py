"""What a protocol's policy is, for comparing campaigns: its method, training seed and step
. The policy specs of `protocol.py` inherit these fields, so they are validated and
frozen with the rest of the protocol."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Identified(BaseModel):
    """What a policy is, for comparing campaigns (`orchestrator compare`), frozen with the
    protocol: the training `method` it comes from, the `training_seed` of its run and, for
    checkpoints of one run, its training `step`. Without `method` the policy's label is its
    method (one run)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    method: Annotated[str, Field(min_length=1, max_length=64)] | None = None
    training_seed: int | None = None
    step: Annotated[int, Field(ge=0)] | None = None

    @model_validator(mode="after")
    def _method_first(self) -> Identified:
        given = [name for name in ("training_seed", "step") if getattr(self, name) is not None]
        if given and self.method is None:
            raise ValueError(f"{' and '.join(given)} need{'s' if len(given) == 1 else ''} a method")
        return self


def policy_identity(label: str, spec: object) -> tuple[str, int | None, int | None]:
    """(method, training_seed, step) of a protocol's policy: its `method` (the label when it has
    none), seed and step. One identity is one trained checkpoint, whichever campaign runs it."""
    method = getattr(spec, "method", None)
    return (method or label, getattr(spec, "training_seed", None), getattr(spec, "step", None))
