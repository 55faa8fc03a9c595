"""Episodes of equal time: on a real-time rig an episode ends at the protocol's
duration in wall-clock time, as lerobot-rollout's does; steps a slow policy loses to overruns
are counted, never made up; both policies' videos have the same length and frame count.

The rig here is a minimal real-time stand-in (it answers at once with a small image), so the
only slow part is the policy: a 2 s episode at 20 Hz whose slow policy takes 80 ms a step. The
recorder, its H.264 encoders and the control loop are the real ones; the videos are decoded with
PyAV."""

from __future__ import annotations

import time

import av
import numpy as np

from orchestrator.design.protocol import Cube, Mark
from orchestrator.policies.base import EpisodeContext, Policy
from orchestrator.rigs.base import EpisodeFacts
from orchestrator.rigs.profile import CameraSpec
from orchestrator.run.control_loop import run_episode
from orchestrator.run.recording import EpisodeRecorder
from orchestrator.store.sqlite import new_episode_id
from support.fake_rig import StillRig

FPS, DURATION_S = 20, 2.0
KEYS = ("shoulder_pan.pos", "shoulder_lift.pos", "elbow_flex.pos", "wrist_flex.pos", "wrist_roll.pos", "gripper.pos")


class RealTimeRig(StillRig):
    realtime = True

    def observe(self, with_images=True):
        obs = {k: 0.0 for k in KEYS}
        obs["front"] = np.full((48, 64, 3), 90, dtype=np.uint8)
        return obs

    def act(self, action):
        return action

    def end_episode(self):
        return EpisodeFacts()


class SlowPolicy(Policy):
    needs_images = False

    def __init__(self, step_s: float):
        self.step_s = step_s

    def reset(self, context=None):
        pass

    def select_action(self, observation):
        time.sleep(self.step_s)   # the stimulus: the policy's step time (its work, not a wait)
        return {k: 0.0 for k in KEYS}

    def close(self):
        pass


def _episode(tmp_path, step_s: float):
    context = EpisodeContext(mark=Mark(id="M1", x=0.2, y=0.0), cube=Cube(), seed=1, fps=FPS,
                             duration_s=DURATION_S, task="")
    episode_id = new_episode_id()
    recorder = EpisodeRecorder(tmp_path, episode_id, {"front": CameraSpec(type="sim", width=64, height=48, fps=10)},
                               FPS, round(FPS * DURATION_S), realtime=True)
    started = time.perf_counter()
    _, timing = run_episode(RealTimeRig(), SlowPolicy(step_s), context, recorder)
    elapsed = time.perf_counter() - started
    recorded = recorder.finish()
    with np.load(tmp_path / recorded.files["timeseries"]) as z:
        t = z["t"]
    with av.open(str(tmp_path / recorded.files["front"])) as container:
        stream = container.streams.video[0]
        frames = [f for f in container.decode(video=0)]
        video_s = float(frames[-1].pts * stream.time_base) if frames else 0.0
    return timing, elapsed, t, len(frames), video_s


def test_a_slow_policy_gets_the_same_wall_clock_time_and_video_length(tmp_path):
    fast, fast_s, fast_t, fast_frames, fast_video = _episode(tmp_path / "fast", 0.0)
    slow, slow_s, slow_t, slow_frames, slow_video = _episode(tmp_path / "slow", 0.08)
    planned = round(FPS * DURATION_S)
    # Each of the slow policy's steps (80 ms) spans at least two 50 ms slots, so it loses at least
    # half of them (about 3 in 4 here); the fast one would have to average over a period a step
    # to lose as many (a loaded machine costs it a step or two).
    assert fast.steps + fast.lost_steps == planned == fast.planned_steps
    assert fast.lost_steps < planned // 2 <= slow.lost_steps, (fast.lost_steps, slow.lost_steps)
    assert slow.steps + slow.lost_steps == planned == slow.planned_steps
    # Both end at the protocol's duration in wall-clock time: never before it (the loop stops at the
    # first step that starts at or after it), and not at the old loop's 4x for the slow one: within
    # a last step and the teardown of it, bounded here by twice the duration (a loaded machine's
    # late step is a fraction of a second; the old loop's overrun was 6 s).
    for elapsed, t in ((fast_s, fast_t), (slow_s, slow_t)):
        assert DURATION_S - 1e-6 <= elapsed < 2 * DURATION_S, elapsed
        assert t[-1] < DURATION_S
    assert len(slow_t) == slow.steps                      # lost steps are not made up in the time series
    # the videos: the same frame count, the same length (held frames after the last real one)
    assert fast_frames == slow_frames == round(10 * DURATION_S)
    assert abs(fast_video - slow_video) <= 0.1 and slow_video < DURATION_S
