"""Where the arm's own reset puts the cube down against where it aimed, measured on one rig: the
rig profile's `reset_slip` section, so that a session's first resets aim right without a
session's history (`run/reset.py`, `LandingBias`).

A cube carried in the jaws does not land where the jaws were aimed: in the simulation it turns
and slides in the closing jaws and lags in them while the arm swings across (docs/benchmarks.md,
"Resets without learning time"). The miss of a try is modelled in the frame of the mark seen
from the arm's base (`along`: away from the base on the line from the shoulder-pan axis through
the mark; `across`: square to it, to the robot's left), in millimetres:
- a pick 2 cm or more from the mark (`far`): `far_mm` = (along, across), plus
  `across_mm_per_swing_deg` times the degrees the shoulder pan turns from the pick to the mark
  (positive: to the robot's left), plus `across_mm_per_yaw_deg` times the degrees the cube stood
  turned, when picked, against the line from the base through it (reduced by the cube's
  symmetry to (-45, 45]);
- a pick within 2 cm of the mark (`near`): `near_mm`.
A cube put down from the jaws after an episode (`from hand`) is not modelled: where the policy
gripped it varies. `measured` says where the figures came from (the command, the commit, how
many tries); a profile without the section models nothing, and the session learns its own.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict

MODELLED_KINDS = ("far", "near")


def turned_against_radius_deg(x: float, y: float, yaw_deg: float) -> float:
    """The cube's yaw at (x, y) against the line from the base through it, reduced by the cube's
    90-degree symmetry to (-45, 45]."""
    turned = (yaw_deg - math.degrees(math.atan2(y, x))) % 90.0
    return turned - 90.0 if turned > 45.0 else turned


class ResetSlip(BaseModel):
    """See the module docstring."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    far_mm: tuple[float, float] = (0.0, 0.0)
    across_mm_per_swing_deg: float = 0.0
    across_mm_per_yaw_deg: float = 0.0
    near_mm: tuple[float, float] = (0.0, 0.0)
    measured: str = ""

    def expected_m(self, kind: str, pick: tuple[float, float, float], mark: tuple[float, float]) -> tuple[float, float]:
        """The modelled miss (dx, dy) in metres in the layout frame of a try of `kind` that picks
        the cube at `pick` (x, y, yaw degrees) and aims it at `mark` (x, y); (0, 0) for a kind
        not modelled."""
        if kind == "far":
            swing = math.degrees(math.atan2(mark[1], mark[0]) - math.atan2(pick[1], pick[0]))
            along, across = self.far_mm
            across += (self.across_mm_per_swing_deg * swing
                       + self.across_mm_per_yaw_deg * turned_against_radius_deg(*pick))
        elif kind == "near":
            along, across = self.near_mm
        else:
            return (0.0, 0.0)
        theta = math.atan2(mark[1], mark[0])
        return ((along * math.cos(theta) - across * math.sin(theta)) / 1000.0,
                (along * math.sin(theta) + across * math.cos(theta)) / 1000.0)
