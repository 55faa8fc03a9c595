"""The one guarded motion: every move the arm makes by itself, outside an episode's control loop.

The move to start and to rest (`rigs/so101/rest_move.py`), every motion of the cube reset (pick,
carry, place, the squeeze after an episode: `Rig.move_along`) and the move that resumes after a
hand-guided step all run `guarded_loop`. Each control period (`fps`) it
1. calls `check()` (the operator's stop key; it raises to stop);
2. every `CHECK_EVERY_STEPS` steps, from the first (so a motion never starts on an alarm), and
   whenever `CHECK_EVERY_S` has passed since the last (steps slowed by a loaded host), calls
   `watch()` (the servos' Status and Torque_Enable, `servo_alarms.check_servos`; it raises);
3. asks the motion's `Aim` for its reference (where the joints should be now) and commands, per
   joint, the present position plus at most `MAX_LEAD_DEG` toward it: no goal is ever further
   than that from where the joint is, so a joint held back (a hand, the cube, the table) never
   has a goal far ahead to snap to when it is freed;
4. stops when a joint is **blocked**: more than `FOLLOW_DEG` from the goal last written and it
   moved less than `PROGRESS_DEG` toward it for `FOLLOW_S` of wall-clock time, from the first such
   goal's write to a read after it (`_Following`: a host starved before a goal went out, or
   between a read and the decision on it, is no time the joint had to move): the present pose is
   commanded (the arm holds) and `blocked(joints)` is raised. A joint that moves, however slowly, is not blocked
   (slowness is the servo's, a stop is the world's). After a loop step longer than `UNWATCHED_S`
   (a stalled host or bus; its read may predate the motion it missed) the decision waits for the
   next step's read, once: a joint held through a stall is blocked one step later, never later
   (a host whose every step is slow decides every other step), so a stall's time always counts;
5. reads the present positions again.
When the aim has arrived, the motion ends once every joint is within `tolerance_deg` of the aim's
last pose, or after `settle_s` (a joint still more than `MAX_LEAD_DEG` away is blocked).

Two aims. `RestAim` (the move to a pose): per joint a reference that travels toward the target at
`speed_deg_s` of measured time but never more than `MAX_LEAD_DEG` ahead of the joint. `PathAim`
(a scripted path, one row of joint targets per period of `path_fps`): a cursor that advances
along the path with measured time, but only as far as every joint is within `MAX_LEAD_DEG` of
the path's pose there: a joint that falls behind holds the whole path back, so the joints keep
to the path's shape (the reset's straight descents) instead of each going its own way. The
gripper closing on something (the path closes it past the cube's width, so the servo squeezes)
is not held to the path nor counted as blocked: a grasp is a joint stopped by what it grips.
Its goal is still at most `MAX_LEAD_DEG` (5 of its 0-100) past where it is; on the STS3215
that is 60-70 encoder ticks, past the error at which its torque limit caps the squeeze (LeRobot's
gripper: `Max_Torque_Limit` 50 %, P 16: half the stall torque at 25 ticks, `rigs/twin/sts3215.py`).

Units are LeRobot's (degrees; the gripper 0-100). `clock` is the `time` module on a real arm (the
default); a simulated rig passes a `StepClock` whose time advances one period per write (its
`act` steps the physics by a period), and tests a simulated clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence, Set
from typing import Protocol

Pose = dict[str, float]

MAX_LEAD_DEG = 5.0        # no goal further than this from the present position
FOLLOW_DEG = 3.0          # a joint this far from its goal...
PROGRESS_DEG = 1.0        # ...that moves less than this toward it...
FOLLOW_S = 0.3            # ...for this long is blocked
MAX_DT_S = 0.1            # a stalled loop (a slow read) does not advance the reference further
UNWATCHED_S = 0.1         # after a loop step longer than this (a stalled host or bus) a block waits one read
CHECK_EVERY_STEPS = 5     # Status and Torque_Enable read every this many steps, from the first...
CHECK_EVERY_S = 0.1       # ...and at least this often however long the steps take
GRIPPER = "gripper.pos"
CURSOR_HALVINGS = 8       # how finely a cursor held back by a joint finds how far it may go


def clip(x: float, bound: float) -> float:
    return max(-bound, min(bound, x))


class Clock(Protocol):
    def perf_counter(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class StepClock:
    """The time of a rig whose every write advances it one period (a simulated rig's `act`)."""

    def __init__(self, fps: int):
        self.period, self.now = 1.0 / fps, 0.0

    def perf_counter(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        return None

    def stepping(self, write: Callable[[Pose], object]) -> Callable[[Pose], object]:
        def step(goal: Pose) -> None:
            write(goal)
            self.now += self.period
        return step


class Aim(Protocol):
    """Where a motion wants the joints: `advance` moves its reference on by `dt` seconds given
    where the joints are; `arrived` once the reference is at the motion's end, `final`;
    `free(here)` names the joints not held to the reference now (the gripper gripping)."""

    keys: list[str]
    final: Pose

    def advance(self, here: Pose, dt: float) -> Pose: ...

    def arrived(self) -> bool: ...

    def free(self, here: Pose) -> set[str]: ...


class RestAim:
    """To `target` at `speed_deg_s` per joint, the reference never more than `MAX_LEAD_DEG`
    ahead of its joint (see the module docstring)."""

    def __init__(self, target: Pose, speed_deg_s: float):
        self.keys = list(target)
        self.final = {k: float(v) for k, v in target.items()}
        self.reference: Pose | None = None   # from where the joints are at the first step
        self.speed = speed_deg_s

    def advance(self, here: Pose, dt: float) -> Pose:
        if self.reference is None:
            self.keys = [k for k in self.keys if k in here]
            self.reference = {k: here[k] for k in self.keys}
        for k in self.keys:
            moved = self.reference[k] + clip(self.final[k] - self.reference[k], self.speed * dt)
            self.reference[k] = here[k] + clip(moved - here[k], MAX_LEAD_DEG)
        return dict(self.reference)

    def arrived(self) -> bool:
        return self.reference is not None and all(abs(self.reference[k] - self.final[k]) <= 1e-9
                                                  for k in self.keys)

    def free(self, here: Pose) -> set[str]:
        return set()


class PathAim:
    """Along `path` (poses, one per period of `path_fps`), the cursor held back by any joint
    more than `MAX_LEAD_DEG` from the path's pose (see the module docstring)."""

    def __init__(self, path: Sequence[Pose], path_fps: float):
        self.path = [dict(p) for p in path]
        self.keys = list(self.path[0]) if self.path else []
        self.final = {k: float(self.path[-1][k]) for k in self.keys} if self.path else {}
        self.fps = float(path_fps)
        self.cursor = 0.0
        self.last = float(max(0, len(self.path) - 1))

    def at(self, s: float) -> Pose:
        i = min(int(s), int(self.last))
        j = min(i + 1, int(self.last))
        u = s - i
        return {k: float(self.path[i][k]) * (1.0 - u) + float(self.path[j][k]) * u for k in self.keys}

    def free(self, here: Pose) -> set[str]:
        """The gripper while the path closes it past where it is (squeezing what it grips)."""
        if GRIPPER not in self.keys:
            return set()
        squeezing = GRIPPER in here and self.at(self.cursor)[GRIPPER] < here[GRIPPER] - FOLLOW_DEG
        return {GRIPPER} if squeezing else set()

    def _fits(self, s: float, here: Pose) -> bool:
        pose, free = self.at(s), self.free(here)
        return all(abs(pose[k] - here[k]) <= MAX_LEAD_DEG for k in self.keys if k in here and k not in free)

    def advance(self, here: Pose, dt: float) -> Pose:
        if not self.path:
            return dict(here)
        want = min(self.cursor + dt * self.fps, self.last)
        if self._fits(want, here):
            self.cursor = want
        else:
            lo, hi = self.cursor, want
            for _ in range(CURSOR_HALVINGS):
                mid = (lo + hi) / 2.0
                lo, hi = (mid, hi) if self._fits(mid, here) else (lo, mid)
            self.cursor = lo
        return self.at(self.cursor)

    def arrived(self) -> bool:
        return self.cursor >= self.last


class _Following:
    """Per joint, whether it follows the goal last written (`wrote`), as each read after it shows
    (`stuck`, given when the read was taken). A joint's time not following counts from the first
    goal written after it was last seen following (within `FOLLOW_DEG` of its goal, or
    `PROGRESS_DEG` nearer it) to the read: the host stalled before that goal went out, or between
    a read and the decision on it, is no time the joint had to move (on the twin, a gripper was
    called blocked 1 ms after the first goal that asked it to open, 0.32 s of starved servo reads
    before that goal counted against it)."""

    def __init__(self, here: Pose):
        self.mark = dict(here)
        self.goal: Pose | None = None
        self.asked: dict[str, float | None] = dict.fromkeys(here)   # None: following, the clock not started

    def wrote(self, goal: Pose, now: float) -> None:
        self.goal = dict(goal)
        for k, asked in self.asked.items():
            if asked is None:
                self.asked[k] = now

    def stuck(self, here: Pose, seen: float, free: Set[str] = frozenset()) -> list[str]:
        out: list[str] = []
        for k, ref in (self.goal or {}).items():
            error = ref - here[k]
            progress = (here[k] - self.mark[k]) * (1.0 if error >= 0 else -1.0)
            asked = self.asked[k]
            if k in free or abs(error) <= FOLLOW_DEG or progress >= PROGRESS_DEG or asked is None:
                self.mark[k], self.asked[k] = here[k], None
            elif seen - asked >= FOLLOW_S:
                out.append(k)
        return out


def _names(keys: list[str]) -> list[str]:
    return [k.removesuffix(".pos") for k in keys]


# long-function: guarded_loop: the one loop every motion runs; its steps are numbered in the module docstring
def guarded_loop(read: Callable[[], Pose], write: Callable[[Pose], object], aim: Aim, *, fps: float,
                 settle_s: float, tolerance_deg: float, check: Callable[[], None], watch: Callable[[], None],
                 blocked: Callable[[list[str]], BaseException], clock: Clock | None = None) -> None:
    """Run `aim` guarded (see the module docstring); raises `blocked(joints)` after holding."""
    clock = clock or time
    period = 1.0 / fps
    here = read()
    seen = last = clock.perf_counter()   # `seen`: when `here` was read
    keys = [k for k in aim.keys if k in here]
    following = _Following({k: here[k] for k in keys})
    settle_until = None
    n, watched, waited = 0, float("-inf"), False
    while True:
        t0 = clock.perf_counter()
        check()
        if n % CHECK_EVERY_STEPS == 0 or t0 - watched >= CHECK_EVERY_S:   # from the first step, too
            watch()
            watched = t0
        waits = t0 - last > UNWATCHED_S and not waited   # a stalled step: decide on the next read
        waited = waits
        reference = aim.advance(here, min(t0 - last, MAX_DT_S))
        last = t0
        goal = {k: here[k] + clip(reference[k] - here[k], MAX_LEAD_DEG) for k in keys}
        stuck = following.stuck(here, seen, aim.free(here))   # on the goal last written, as `here` shows it
        if stuck and not waits:
            write({k: here[k] for k in keys})
            raise blocked(_names(stuck))
        write(goal)
        following.wrote(goal, clock.perf_counter())
        clock.sleep(max(0.0, period - (clock.perf_counter() - t0)))
        here = read()
        seen = clock.perf_counter()
        n += 1
        if not aim.arrived():
            continue
        held = [k for k in keys if k not in aim.free(here)]
        if all(abs(here[k] - aim.final[k]) <= tolerance_deg for k in held):
            return
        now = clock.perf_counter()
        settle_until = settle_until or now + settle_s
        if now >= settle_until:
            far = [k for k in held if abs(here[k] - aim.final[k]) > MAX_LEAD_DEG]
            if far:
                write({k: here[k] for k in keys})
                raise blocked(_names(far))
            return


def follow_path(read: Callable[[], Pose], write: Callable[[Pose], object], path: Sequence[Pose], *,
                path_fps: float, fps: float, settle_s: float, tolerance_deg: float, check: Callable[[], None],
                watch: Callable[[], None], blocked: Callable[[list[str]], BaseException],
                clock: Clock | None = None) -> None:
    """The arm along `path` (one pose per period of `path_fps`), guarded (`PathAim`)."""
    if path:
        guarded_loop(read, write, PathAim(path, path_fps), fps=fps, settle_s=settle_s, tolerance_deg=tolerance_deg,
                     check=check, watch=watch, blocked=blocked, clock=clock)
