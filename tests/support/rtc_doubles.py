"""The RTC stop tests' doubles: `FakeRig`, a paced rig with a still arm that fails at a chosen
step, and `rtc_policy`, the tiny SmolVLA (the `saved_vla` fixture) under LeRobot's RTC engine
with that rig's features, at `FPS`."""

from __future__ import annotations

import numpy as np
import pytest

from orchestrator.rigs.profile import STATE_KEYS
from support.fake_rig import StillRig

FPS = 15


class FakeRig(StillRig):
    """A paced rig with a still arm that fails (`fail`) at step `at`."""

    realtime = True

    def __init__(self, fail: BaseException | None = None, at: int = 6):
        self.fail, self.at, self.steps = fail, at, 0

    def observe(self, with_images=True):
        obs = {k: 0.0 for k in STATE_KEYS}
        obs |= {"front": np.zeros((96, 128, 3), np.uint8), "wrist": np.zeros((96, 128, 3), np.uint8)}
        return obs

    def act(self, action):
        self.steps += 1
        if self.fail is not None and self.steps == self.at:
            raise self.fail
        return action

    def end_episode(self):
        from orchestrator.rigs.base import EpisodeFacts

        return EpisodeFacts()


@pytest.fixture(scope="module")
def rtc_policy(saved_vla):
    from orchestrator.design.protocol import LeRobotPolicySpec
    from orchestrator.policies.lerobot import rig_observation_features  # noqa: F401 - the features' shape
    from orchestrator.policies.rtc import EnginePolicy

    features = {k: float for k in STATE_KEYS} | {"front": (96, 128, 3), "wrist": (96, 128, 3)}
    spec = LeRobotPolicySpec(type="lerobot", path=str(saved_vla), inference={"type": "rtc"})
    policy = EnginePolicy(spec, saved_vla.parent, "pick", features, fps=FPS)
    yield policy
    policy.close()
