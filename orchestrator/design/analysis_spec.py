"""The protocol's `analysis` section: the test that decides, its level, the stopping rule and
whether two methods' training seeds of one number are a pair, all pre-registered and frozen with
the rest of the protocol (each changes which data a claim rests on).

`analysis: {primary: mcnemar_midp, alpha: 0.05, stopping: none, seed_pairing: none}`:
- `primary`: `mcnemar_midp` (default) or `mcnemar_exact`;
- `stopping`: `none` or `{kind: evalue, max_layouts: N}` (anytime-valid, Ville's inequality;
  docs/statistics.md);
- `seed_pairing`: `none` (default) or `by_number`. Two methods' runs with the same
  `training_seed` are unrelated trainings unless they share that seed's randomness (data order,
  initialisation, environment seeds: common random numbers). `by_number` pre-registers that they
  do, and `orchestrator compare` then pairs X's seed s with Y's seed s (a sign-flip over the
  pairs, and on a layout run only X seed s against Y seed s) when every campaign that ran either
  method says so; otherwise seed numbers pair nothing.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EValueStopping(_Strict):
    """Anytime-valid stopping on discordant pairs, pre-registered (Ville's inequality)."""

    kind: Literal["evalue"]
    max_layouts: Annotated[int, Field(ge=1)]


SeedPairing = Literal["none", "by_number"]


class Analysis(_Strict):
    primary: Literal["mcnemar_midp", "mcnemar_exact"] = "mcnemar_midp"
    alpha: Annotated[float, Field(gt=0, lt=1)] = 0.05
    stopping: Literal["none"] | EValueStopping = "none"
    seed_pairing: SeedPairing = "none"
