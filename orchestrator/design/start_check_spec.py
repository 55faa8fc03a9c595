"""The protocol's `start_check` section: is the cube on its mark before each trial?

`start_check: {camera: front, tolerance_mm: 5, tolerance_deg: 10, mode: enforce | advise | off}`,
frozen with the rest of the protocol (it changes which trials may start, so it is pre-registered):
- `enforce`: a trial starts only when the fixed camera `camera` sees exactly one cube within
  `tolerance_mm` of the trial's mark (centre distance) and `tolerance_deg` of its yaw (modulo the
  cube's 90-degree symmetry), nothing else on the sheet, and the camera where the session's
  reference has it; otherwise the operator corrects the cube and the check runs again, or
  overrides it, which is recorded;
- `advise`: the same measurement, shown and recorded, never holding a trial;
- `off` (the default): no measurement.
Every measured offset is stored with its trial attempt, and the report shows them per policy.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

MODES = ("enforce", "advise", "off")


class StartCheckSpec(BaseModel):
    """See the module docstring."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    camera: Annotated[str, Field(min_length=1)] = "front"
    tolerance_mm: Annotated[float, Field(gt=0, le=50)] = 5.0
    tolerance_deg: Annotated[float, Field(gt=0, le=45)] = 10.0
    mode: Literal["enforce", "advise", "off"] = "off"
