"""The simulated hand: where the cube lands when the simulator or the twin "places" it on a mark.

A real operator puts the cube near the mark, not on it. The rig profile's `placement` section
(`PlacementSpec`; simulator and twin only) sets that error so the start-state check can be
rehearsed without an arm: a fixed one (`offset_mm: [dx, dy]` in the layout frame, x forward and
y to the robot's left, and `yaw_deg`), a random one (`sigma_mm`, `sigma_deg`: normal errors in
each of dx, dy and the yaw, drawn from `seed`), or both added. Without the section the cube lands
exactly on the mark. The n-th placement of a rig process on a mark draws from
`random.Random(f"{seed}:{mark id}:{n}")`, so a campaign placed again draws again.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.design.protocol import Mark

# Where the simulated hand puts the cube for a still of the empty table (the session's reference):
# on the table, beyond the sheet and the arm's reach.
OFF_SHEET = Mark(id="off-sheet", x=0.75, y=0.60, yaw_deg=0.0)

class PlacementSpec(BaseModel):
    """See the module docstring."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    offset_mm: tuple[float, float] = (0.0, 0.0)
    yaw_deg: float = 0.0
    sigma_mm: Annotated[float, Field(ge=0, le=100)] = 0.0
    sigma_deg: Annotated[float, Field(ge=0, le=90)] = 0.0
    seed: int = 0


class SimulatedHand:
    """Places cubes with a `PlacementSpec`'s error (none when `spec` is None)."""

    def __init__(self, spec: PlacementSpec | None):
        self.spec = spec
        self._placed: Counter[str] = Counter()

    def place(self, mark: Mark) -> Mark:
        """The pose the cube lands in for `mark` (the mark itself without an error)."""
        spec = self.spec
        if spec is None:
            return mark
        n = self._placed[mark.id]
        self._placed[mark.id] += 1
        draw = random.Random(f"{spec.seed}:{mark.id}:{n}")
        dx = spec.offset_mm[0] + (draw.gauss(0.0, spec.sigma_mm) if spec.sigma_mm else 0.0)
        dy = spec.offset_mm[1] + (draw.gauss(0.0, spec.sigma_mm) if spec.sigma_mm else 0.0)
        dyaw = spec.yaw_deg + (draw.gauss(0.0, spec.sigma_deg) if spec.sigma_deg else 0.0)
        return mark.model_copy(update={"x": mark.x + dx / 1000.0, "y": mark.y + dy / 1000.0,
                                       "yaw_deg": mark.yaw_deg + dyaw})
