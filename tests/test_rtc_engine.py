"""The RTC policy's action stream is LeRobot's (issue 26): what `EnginePolicy` hands the control
loop is, step by step, what LeRobot's `ActionQueue` gave out (through LeRobot's own
`send_next_action`: interpolator, ordered action keys, robot action processor), and a step
gets the last goal again exactly when LeRobot's queue had nothing (lerobot-rollout sends nothing
then)."""

from __future__ import annotations

import pytest

from orchestrator.rigs.profile import STATE_KEYS
from support.requires import require_module
from test_rtc_stop import FPS, FakeRig, rtc_policy  # noqa: F401 - the module's tiny-SmolVLA policy fixture

require_module("lerobot")


def test_every_action_sent_is_the_next_one_lerobots_queue_gave_out(rtc_policy, tmp_path, monkeypatch):  # noqa: F811
    from lerobot.policies.rtc.action_queue import ActionQueue

    from orchestrator.design.protocol import Cube, Mark
    from orchestrator.policies.base import EpisodeContext
    from orchestrator.run.control_loop import run_episode
    from orchestrator.run.recording import EpisodeRecorder

    given: list = []
    real_get = ActionQueue.get

    def logged(self):
        action = real_get(self)
        given.append(None if action is None else [float(x) for x in action])
        return action

    monkeypatch.setattr(ActionQueue, "get", logged)
    returned: list = []
    real_select = type(rtc_policy).select_action
    monkeypatch.setattr(type(rtc_policy), "select_action",
                        lambda self, obs: returned.append(real_select(self, obs)) or returned[-1])
    context = EpisodeContext(mark=Mark(id="M01", x=0.16, y=0.0), cube=Cube(), seed=0, fps=FPS, duration_s=2.0, task="")
    recorder = EpisodeRecorder(tmp_path / "c", "ep", {}, FPS, 2 * FPS, realtime=True)
    run_episode(FakeRig(), rtc_policy, context, recorder)
    recorder.discard()
    assert len(given) == len(returned) == 2 * FPS            # one queue read per control step
    keys = rtc_policy.ordered_action_keys
    assert keys == list(STATE_KEYS)
    hold = {k: 0.0 for k in keys}                             # FakeRig's still arm
    last = hold
    served = 0
    for from_queue, sent in zip(given, returned):
        if from_queue is None:
            assert sent == pytest.approx(last)                # nothing ready: the last goal again
        else:
            assert [sent[k] for k in keys] == pytest.approx(from_queue, abs=1e-6)
            last, served = sent, served + 1
    assert served >= FPS, served                              # most steps came from LeRobot's queue
    assert rtc_policy.inference_timing()["starved_steps"] == 2 * FPS - served
