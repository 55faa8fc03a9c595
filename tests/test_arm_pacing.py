"""Pacing on a real arm, measured on the byte-level fake SO-101 (`fakes/feetech.py`, LeRobot's
SOFollower, FeetechMotorsBus and scservo_sdk unchanged): a 2 s inference is never caught up.

The one test of tests/test_arm_safety.py whose assertions are wall-clock intervals between the
writes the servos received: it stays in the real-time xdist group (tests/support/lanes.py), run
one after another on one worker, while the rest of that file, whose assertions are on what was
written in which order, runs beside the other tests."""

from __future__ import annotations

import time

import numpy as np
import pytest

from orchestrator.rigs.profile import STATE_KEYS, load_rig
from support.arm_bench import FPS, arm_bench
from support.arm_doubles import Hold


@pytest.fixture
def bench(tmp_path, monkeypatch):
    """A fake SO-101 (video cameras), its profile, and a two-mark protocol with scripted policies."""
    return arm_bench(tmp_path, monkeypatch)


def test_a_two_second_stall_is_never_caught_up(bench):
    """After a 2 s inference the next actions go out a full period apart (lerobot-rollout's
    `max(0, period - dt)`), not back to back; the overrun is recorded with its step."""
    from orchestrator.design.protocol import Cube, Mark
    from orchestrator.policies.base import EpisodeContext
    from orchestrator.rigs.so101.rig import LeRobotRig
    from orchestrator.run.control_loop import run_episode
    from orchestrator.run.recording import EpisodeRecorder

    tmp_path, arm, rig_path, _ = bench
    rig = LeRobotRig(load_rig(rig_path))
    rig.connect()
    try:
        # 3 s: the episode ends on wall-clock time, so the steps after the stall need time left
        context = EpisodeContext(mark=Mark(id="M01", x=0.16, y=0.0), cube=Cube(), seed=0, fps=FPS,
                                 duration_s=3.0, task="")
        recorder = EpisodeRecorder(tmp_path / "c", "ep", {}, FPS, 90, realtime=True)
        stall_end = {}

        class Stall(Hold):
            def select_action(self, obs):
                action = super().select_action(obs)
                if self.calls == 4:
                    stall_end["t"] = time.perf_counter()
                return {**action, "shoulder_pan.pos": obs["shoulder_pan.pos"] + 20.0}  # clipped to +5

        # when each step's observation began and its action had gone out (perf_counter): the
        # clock time the loop records for step k falls between step k-1's action and step k's read
        observed, acted = [], []
        observe, act = rig.observe, rig.act

        def timed_observe(*args, **kwargs):
            observed.append(time.perf_counter())
            return observe(*args, **kwargs)

        def timed_act(action):
            sent = act(action)
            acted.append(time.perf_counter())
            return sent

        rig.observe, rig.act = timed_observe, timed_act
        _, timing = run_episode(rig, Stall(stall_at=3, stall_s=2.0), context, recorder)
        series = np.load(tmp_path / "c" / recorder.finish().files["timeseries"])
    finally:
        rig.disconnect()
    # item 10: measured clock times (the stall is in them), the policy's action and the sent one.
    # Step 4's recorded time minus step 3's lies between step 3's read-to-action span (the 2 s
    # stall inside it) and the span from step 2's action to step 4's read, both measured here:
    # bounds from this run's own clock, not a guess at the machine's delays.
    gap = float(series["t"][4] - series["t"][3])
    assert len(observed) == len(acted) == len(series["t"]), (len(observed), len(acted), len(series["t"]))
    low, high = acted[3] - observed[3], observed[4] - acted[2]
    assert series["t"][0] < 0.01 and 2.0 <= low and low - 1e-6 <= gap <= high + 1e-6, (low, gap, high)
    pan = list(STATE_KEYS).index("shoulder_pan.pos")
    assert np.allclose(series["action"][:, pan] - series["state"][:, pan], 20.0, atol=0.01)
    assert np.allclose(series["sent_action"][:, pan] - series["state"][:, pan], 5.0, atol=0.3)
    period = 1.0 / FPS
    after = arm.goal_write_times(since=stall_end["t"] - 1e-3)
    # the stalled step's action, then one per period slot left (the slots the stall took are lost)
    assert len(after) >= 10, after
    # Caught up, the 60 slots the stall took would go out back to back (a few ms apart). Checked on
    # spans of 5 intervals, not on single ones: one step the machine's load delays shortens the
    # next interval (lerobot-rollout's `max(0, period - dt)`), and a single interval fell to 9.9 ms
    # at load 22 (the others 25-46 ms: 30 fps). A span of 5 is at least half of 5 periods.
    spans = np.asarray(after[5:]) - np.asarray(after[:-5])
    assert spans.min() >= 5 * period / 2, f"5 intervals after the stall in {spans.min() * 1000:.1f} ms"
    # The stall's step is recorded as overrun by its 2 s. Its slot is step 3's unless a step before it
    # overran on a loaded machine (seen: step 0 at load 25): the slots, from the recorded times,
    # as the loop numbers them (a slot a late step's clock time falls in).
    slots: list[int] = []
    for t in series["t"]:
        slots.append(max(slots[-1] + 1 if slots else 0, int(float(t) / period + 1e-9)))
    assert [s for s, ms in timing.overrun_steps if ms >= 2000] == [slots[3]], (timing.overrun_steps, slots[:5])
    assert timing.overruns == len(timing.overrun_steps)
