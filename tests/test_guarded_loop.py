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
