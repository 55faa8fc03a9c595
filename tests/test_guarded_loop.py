"""The guarded motion's loop (rigs/guarded_motion.py) on a simulated clock: how often it reads the
servos when the host is slow, and that a path is followed at its own pace."""

from __future__ import annotations

import pytest

from orchestrator.rigs import guarded_motion

KEYS = ("shoulder_lift.pos", "elbow_flex.pos")


class SlowHost:
    """Joints that reach each goal at once; every read takes `read_s` of the simulated clock."""

    def __init__(self, read_s: float):
        self.now, self.read_s = 0.0, read_s
        self.pose = dict.fromkeys(KEYS, 0.0)
        self.watches: list[float] = []

    def perf_counter(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += max(0.0, seconds)

    def read(self) -> dict[str, float]:
        self.now += self.read_s
        return dict(self.pose)

    def write(self, goal: dict[str, float]) -> None:
        self.pose.update(goal)


def _follow(host: SlowHost) -> None:
    path = [dict.fromkeys(KEYS, 0.5 * i) for i in range(1, 61)]   # 30 degrees in 2 s at 30 Hz
    guarded_motion.follow_path(host.read, host.write, path, path_fps=30, fps=50, settle_s=1.0, tolerance_deg=2.0,
                               check=lambda: None, watch=lambda: host.watches.append(host.now), blocked=RuntimeError,
                               clock=host)


def _gaps(host: SlowHost) -> list[float]:
    assert len(host.watches) >= 5, host.watches   # the path ran, the servos were read along it
    return [b - a for a, b in zip(host.watches, host.watches[1:], strict=False)]


def test_the_servos_are_read_at_least_every_tenth_of_a_second_on_a_slow_host():
    host = SlowHost(read_s=0.06)   # a step of 80 ms (the 20 ms period, then a 60 ms read): five are 0.4 s
    _follow(host)
    assert max(_gaps(host)) <= guarded_motion.CHECK_EVERY_S + 0.08 + 1e-9, _gaps(host)   # within a step of 0.1 s
    assert host.pose == dict.fromkeys(KEYS, 30.0)


def test_positive_control_every_fifth_step_alone_leaves_a_slow_host_unread_for_longer(monkeypatch):
    monkeypatch.setattr(guarded_motion, "CHECK_EVERY_S", float("inf"))
    host = SlowHost(read_s=0.06)
    _follow(host)
    assert max(_gaps(host)) == pytest.approx(5 * 0.08, abs=1e-6)


def test_a_path_is_followed_at_its_own_pace_when_the_joints_keep_up():
    host = SlowHost(read_s=0.001)
    _follow(host)
    assert 1.95 <= host.now <= 2.1 and host.pose == dict.fromkeys(KEYS, 30.0)   # 60 rows at 30 Hz: 2 s


class HeldOnASlowHost(SlowHost):
    """Every read takes `read_s`; the elbow follows its goals until `held_at` (simulated
    seconds), then a hand holds it."""

    def __init__(self, read_s: float, held_at: float):
        super().__init__(read_s)
        self.held_at = held_at

    def write(self, goal: dict[str, float]) -> None:
        self.pose.update({k: v for k, v in goal.items() if k != "elbow_flex.pos" or self.now < self.held_at})
        assert self.now < self.held_at + 5.0, "still pushing against the hand 5 s after it took hold"


@pytest.mark.parametrize("read_s", [0.02, 0.15, 0.25])
def test_a_held_joint_is_blocked_on_a_slow_host_within_follow_s_and_one_step(read_s):
    """A hand holds the elbow 0.5 s into a path. Whatever each step takes (a loaded host: 20, 150,
    250 ms), the motion stops within `FOLLOW_S` plus three steps and a half of the moment the
    path is `FOLLOW_DEG` past the held joint: the first goal it cannot follow goes out at the next
    step, the read that shows `FOLLOW_S` gone by comes a step after that at most, and a block waits
    one read after a stalled step, never more (measured on this clock: 3.0 and 3.2 steps at 150
    and 250 ms; the rule before judged the goal about to be written, a step earlier, which counted
    a stalled host's time before a goal went out against the joint: `test_rest_move.py`). Before
    that, steps over 0.1 s were not counted: at 150 and 250 ms a held joint was never blocked and
    the motion pushed on to its settle."""
    host = HeldOnASlowHost(read_s, held_at=0.5)
    with pytest.raises(RuntimeError) as stop:
        _follow(host)
    assert "elbow_flex" in str(stop.value)
    behind = host.held_at + guarded_motion.FOLLOW_DEG / 15.0   # the path (15 deg/s) is 3 degrees past the hand
    step = 0.02 + read_s   # the 50 Hz period, then the read
    assert host.now - behind <= guarded_motion.FOLLOW_S + 3.5 * step, host.now


def test_one_stalled_step_in_which_nothing_moved_is_not_a_block():
    """The other side of the rule: one 0.6 s step in which the joints did not move (the machine
    and the twin starved together), then they follow again: no block (the decision waited for
    the next read, which showed progress)."""

    class OneStall(SlowHost):
        reads = 0

        def read(self):
            self.reads += 1
            if self.reads == 10:
                self.now += 0.6
            return super().read()

    host = OneStall(0.005)
    _follow(host)
    assert host.reads > 10 and abs(host.pose["elbow_flex.pos"] - 30.0) < 1e-9
