"""Joint angles for planted trajectories: the arm's pose whose grasp point (`sim.fk.grasp_point`,
plain numpy) is at a target, solved by least squares (no MuJoCo)."""

from __future__ import annotations

import numpy as np
from scipy.optimize import least_squares

from orchestrator.sim import fk


def pose_at(target: np.ndarray) -> np.ndarray:
    """The five arm joints (degrees) putting the grasp point at `target` (m, layout frame)."""
    solved = least_squares(lambda q: fk.grasp_point(np.append(q, 0.0)[None])[0] - target,
                           np.array([0.0, 20.0, 20.0, 60.0, 0.0]), xtol=1e-12)
    assert np.linalg.norm(solved.fun) < 1e-4
    return solved.x
