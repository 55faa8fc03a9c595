"""The protocol's `reset` section: who puts the cube on the next trial's mark.

`reset: {mode: operator | auto, max_tries: 3}`, frozen with the rest of the protocol (it changes
who handles the start of every trial, so it is pre-registered):
- `operator` (the default): a person places the cube before each trial (on the simulator and the
  twin, the rig profile's simulated hand does);
- `auto`: the arm does, between trials (`run/reset.py`): the fixed camera finds the cube, a
  scripted top-down grasp picks it and places it on the next trial's mark, and the start check
  measures it; a placement outside the tolerance is picked and placed again, up to `max_tries`
  placements, before the operator is asked, with one line that says why. The first trial of a
  session starts from a cube placed by hand. It needs `start_check.mode: enforce` (the camera is
  what tells the arm where the cube is and whether it landed). The reset is no part of any
  episode: each episode still starts from rest with the cube on its mark.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


class ResetSpec(BaseModel):
    """See the module docstring."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    mode: Literal["operator", "auto"] = "operator"
    max_tries: Annotated[int, Field(ge=1, le=5)] = 3
