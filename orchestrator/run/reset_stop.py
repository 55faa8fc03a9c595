"""A stop during the arm's reset asks what next (docs/design.md section 12).

An operator stops a reset because something is wrong. The reset's motions (`ArmMotion.follow`:
the pick, the carry, the place, the squeeze of a cube still in the jaws) raise `MotionStopped`
with the arm held; here the stop is recorded (`reset_stopped`, one of the operator's
interventions, analysis/start_records.py), the arm goes to rest once the operator confirms,
and the operator says what next (`Operator.after_reset_stop`): "reset again (Enter), place it
yourself (p), end (q)". The reset never goes on by itself after a stop.
"""

from __future__ import annotations

from collections.abc import Callable

from orchestrator.run.motion import MotionStopped
from orchestrator.run.operator_protocol import Operator, TrialCue
from orchestrator.run.reset import CubeReset


def put_cube(trial, mark, cue: TrialCue, operator: Operator, reset: CubeReset) -> bool:
    """`reset.put_cube`; after a stop during the arm's reset (`what_next`) the arm resets the
    cube again, or the operator places it after the trial's cue (then True: the cue's own
    countdown was the last thing before the start check)."""
    cued = False
    while True:
        try:
            reset.put_cube(trial, mark)
            return cued
        except MotionStopped as stopped:
            what_next(stopped, reset, operator, trial.slot, mark.id)
        if not reset.arm_places:
            operator.before_trial(cue)
            cued = True


def what_next(stopped: MotionStopped, reset: CubeReset, operator: Operator, slot: int, mark_id: str) -> None:
    """After `stopped`: recorded, to rest once the operator confirms, then the operator's answer:
    the arm resets the cube again, or they place it themselves (the next cube is theirs, cued as
    a session's first), or they end the session (`StopRequested`, from either question)."""
    reset.store.log_event("reset_stopped", f"{stopped} before {mark_id}", slot=slot, data={"mark": mark_id})
    reset.motion.to_rest()
    if operator.after_reset_stop() == "place":
        reset.placed_before = False


def put_down_held(reset: CubeReset, mark, operator: Operator, slot: int) -> Callable[[], object]:
    """After a trial that ran to its end: a cube still in the jaws goes straight to `mark` (the
    next trial's), before the move to rest (`CubeReset.put_down_held`); a stop there is a stop
    during the reset (`what_next`)."""
    def put_down() -> None:
        try:
            reset.put_down_held(mark)
        except MotionStopped as stopped:
            what_next(stopped, reset, operator, slot, mark.id)

    return put_down
