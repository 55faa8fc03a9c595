"""Nothing moves after an unclean end until a person says so (docs/design.md section 12).

Starting a process is not a confirmation: the operator may not be at the arm, or may be reaching
into the workspace to recover the cube the last session left in the jaws. On a real arm (and the
twin) the session's first motion, the move to rest after connecting, waits for the operator's
Enter (`Operator.approve`) when any of these holds:
- the last session ended unclean: interrupted (Ctrl-C, SIGTERM, SIGHUP), killed (no end
  recorded: `kill -9`, a power loss; the store's `sessions`, analysis/sessions.py), or failed;
- the arm is more than `FAR_FROM_REST_DEG` from its rest pose on any arm joint at connect;
- the jaws are closed on something: the gripper stands at a cube's width
  (`sim.holding.cube_sized_gap`), neither shut nor open.
The question names why, where the arm is (every joint that will move: now -> rest, in the
rig's units) and what will move, with the arm's state read from its torque registers; Enter
allows the move to rest (event `first_motion_allowed`), `q` ends the session with nothing
moved (torque goes off: support the arm). With none of the three, the move goes on as before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from orchestrator.rigs.profile import STATE_KEYS
from orchestrator.run.motion import ArmMotion, held_at_the_table, holds_something
from orchestrator.run.operator_protocol import StopRequested

FAR_FROM_REST_DEG = 10.0   # on any arm joint (the gripper's 0-100 is no angle: `holds_something`)
ARM_KEYS = STATE_KEYS[:5]
MOVES_DEG = 1.0    # a joint further than this from rest moves


def unclean_end(sessions: Sequence[Mapping[str, Any]]) -> str | None:
    """How the session before this one (the last of `sessions` is this one, `run_session`'s)
    ended when it ended unclean, in words ("the last session was interrupted"); None when it
    ended cleanly or there was none."""
    if len(sessions) < 2:
        return None
    last = sessions[-2]
    outcome = str(last.get("outcome") or "")
    if last.get("ended_at") is None:
        return "the last session was killed (no end recorded)"
    if outcome.startswith("interrupted"):
        return "the last session was interrupted"
    if outcome.startswith("failed"):
        return f"the last session failed ({outcome.removeprefix('failed: ')[:120]})"
    return None


def reasons_to_ask(sessions: Sequence[Mapping[str, Any]], here: Mapping[str, float], rest: Mapping[str, float],
                   cube_size_m: float) -> list[str]:
    """Why the first motion waits for a person (see the module docstring); empty: it does not."""
    out = [why] if (why := unclean_end(sessions)) else []
    far = [(k, abs(here[k] - v)) for k, v in rest.items()
           if k in here and k in ARM_KEYS and abs(here[k] - v) > FAR_FROM_REST_DEG]
    if far:
        joint, off = max(far, key=lambda kv: kv[1])
        out.append(f"the arm is {off:.0f} degrees from rest ({joint.removesuffix('.pos')})")
    if holds_something(here, cube_size_m):
        out.append("the jaws are closed on something")
    return out


def what_moves(here: Mapping[str, float], rest: Mapping[str, float], cube_size_m: float) -> str:
    """Every joint that the move to rest moves: `name now -> rest`; first the jaws, where the
    arm is, when they hold something at the table (`ArmMotion` opens them there)."""
    moves = [f"{k.removesuffix('.pos')} {here[k]:.0f} -> {v:.0f}" for k, v in rest.items()
             if k in here and abs(here[k] - v) > MOVES_DEG]
    first = "first the jaws open where they are (what they hold stays on the table), then " \
        if held_at_the_table(here, cube_size_m) else ""
    return first + (", ".join(moves) or "nothing (the arm is at rest)")


def first_motion_allowed(motion: ArmMotion, sessions: Sequence[Mapping[str, Any]], say: Callable[[str], None]) -> bool:
    """Ask the operator before the session's first motion when `reasons_to_ask` finds a reason
    (a real arm or the twin only: a simulated arm starts at rest in a fresh world; jaws at the
    width of `motion.cube_size_m`). False: they ended the session there, nothing moved."""
    rig, cube_size_m = motion.rig, motion.cube_size_m
    if not rig.realtime or cube_size_m is None:
        return True
    observed = rig.observe(with_images=False)
    here = {k: float(observed[k]) for k in STATE_KEYS if k in observed}
    rest = dict(rig.rest_target)
    reasons = reasons_to_ask(sessions, here, rest, cube_size_m)
    if not reasons:
        return True
    line = (f"{motion.arm_words()}, not moved yet: {'; '.join(reasons)}. The move to rest will move "
            f"{what_moves(here, rest, cube_size_m)}. Enter = move it to rest")
    try:
        motion.ask_to_move(line)
    except StopRequested:
        say("stopped by the operator before the arm moved; run again to resume")
        return False
    motion.record("first_motion_allowed", f"the operator allowed the first motion: {'; '.join(reasons)}")
    return True
