"""Keep LeRobot's per-step clamping warning off the operator's terminal while the rig records it.

LeRobot's `ensure_safe_goal_position` (lerobot/robots/utils.py) logs a WARNING with a dict of
every clamped joint on the root logger, each control step that `max_relative_target` clamps:
hundreds of lines in a short campaign (430 in a 4-trial twin run), burying the operator's
prompts. Those records are dropped in two places only: `LeRobotRig.act`, which counts every
clamped step per joint and stores it as the episode's `target_clipped:<joint>` safety events,
and the moves to rest, whose settle loop sends the rest pose itself and lets
`max_relative_target` step the arm towards it (clamping there is the intended speed limit).
Any other warning passes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

CLAMP_MESSAGE = "Relative goal position magnitude had to be clamped"


class _DropClampWarnings(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not (isinstance(record.msg, str) and record.msg.startswith(CLAMP_MESSAGE))


_FILTER = _DropClampWarnings()


@contextmanager
def quiet_clamp_warnings() -> Iterator[None]:
    """Drop LeRobot's clamping warning (logged on the root logger) for the block's duration."""
    root = logging.getLogger()
    root.addFilter(_FILTER)
    try:
        yield
    finally:
        root.removeFilter(_FILTER)
