"""The RTC policy's action stream is LeRobot's: what `EnginePolicy` hands the control
loop is, step by step, what LeRobot's `ActionQueue` gave out (through LeRobot's own
`send_next_action`: interpolator, ordered action keys, robot action processor), and a step
gets the last goal again exactly when LeRobot's queue had nothing (lerobot-rollout sends nothing
then)."""

from __future__ import annotations

import time

import pytest

from orchestrator.rigs.profile import STATE_KEYS
from support import rtc_doubles
from support.rtc_doubles import FPS, FakeRig

rtc_policy = rtc_doubles.rtc_policy   # the fixture (support/rtc_doubles.py)


def test_every_action_sent_is_the_next_one_lerobots_queue_gave_out(rtc_policy, tmp_path, monkeypatch):
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

    def select(self, obs):
        returned.append(real_select(self, obs))
        if len(returned) == 10:   # one stall of 3 periods: the loop must drop ticks, as under load
            time.sleep(3 / FPS)   # the stimulus: a stall of 3 periods
        return returned[-1]

    monkeypatch.setattr(type(rtc_policy), "select_action", select)
    context = EpisodeContext(mark=Mark(id="M01", x=0.16, y=0.0), cube=Cube(), seed=0, fps=FPS, duration_s=2.0, task="")
    recorder = EpisodeRecorder(tmp_path / "c", "ep", {}, FPS, 2 * FPS, realtime=True)
    _, timing = run_episode(FakeRig(), rtc_policy, context, recorder)
    recorder.discard()
    # One queue read per control step the loop ran. FakeRig is real-time, so the loop runs on the
    # wall clock and drops a tick it is late for (never made up, tests/test_arm_safety.py): under
    # a CPU hog it ran 28 of the 30 planned steps, and the planted stall above drops some here.
    steps = timing.steps
    assert steps + timing.lost_steps == timing.planned_steps == 2 * FPS, timing
    assert timing.lost_steps >= 2, timing
    assert steps >= FPS, timing                               # a sample worth checking step by step
    assert len(given) == len(returned) == steps
    keys = rtc_policy.ordered_action_keys
    assert keys == list(STATE_KEYS)
    hold = {k: 0.0 for k in keys}                             # FakeRig's still arm
    last = hold
    served = 0
    for from_queue, sent in zip(given, returned, strict=True):
        if from_queue is None:
            assert sent == pytest.approx(last)                # nothing ready: the last goal again
        else:
            assert [sent[k] for k in keys] == pytest.approx(from_queue, abs=1e-6)
            last, served = sent, served + 1
    assert served >= FPS, served                              # most steps came from LeRobot's queue
    assert rtc_policy.inference_timing()["starved_steps"] == steps - served


def test_interpolation_multiplier_sends_lerobots_interpolated_commands(saved_vla, tmp_path):
    """`interpolation_multiplier: 2` under sync inference: LeRobot's `ActionInterpolator` between
    policy actions, the policy asked once every two control steps (after the first)."""
    from orchestrator.design.protocol import Cube, LeRobotPolicySpec, Mark
    from orchestrator.policies.base import EpisodeContext
    from orchestrator.policies.rtc import EnginePolicy
    from orchestrator.run.control_loop import run_episode
    from orchestrator.run.recording import EpisodeRecorder

    features = {k: float for k in STATE_KEYS} | {"front": (96, 128, 3), "wrist": (96, 128, 3)}
    spec = LeRobotPolicySpec(type="lerobot", path=str(saved_vla), interpolation_multiplier=2)
    policy = EnginePolicy(spec, saved_vla.parent, "pick", features, fps=FPS)
    assert policy.policy_fps == FPS / 2 and not policy.asynchronous
    calls = []
    real = policy.policy.select_action
    policy.policy.select_action = lambda batch, **kw: calls.append(1) or real(batch, **kw)
    sent = []
    real_select = policy.select_action
    policy.select_action = lambda obs: sent.append(real_select(obs)) or sent[-1]
    context = EpisodeContext(mark=Mark(id="M01", x=0.16, y=0.0), cube=Cube(), seed=0, fps=FPS, duration_s=1.0, task="")
    recorder = EpisodeRecorder(tmp_path / "c", "ep", {}, FPS, FPS, realtime=False)
    rig = FakeRig()
    rig.realtime = False   # simulated time: every planned step runs (none lost when the machine is loaded)
    try:
        run_episode(rig, policy, context, recorder)
    finally:
        recorder.discard()
        policy.close()
    assert len(sent) == FPS and len(calls) == 1 + (FPS - 1) // 2 + (FPS - 1) % 2
    checked = 0
    for k in range(1, FPS - 1, 2):    # odd steps: the midpoint of the policy actions around them
        for key in STATE_KEYS:
            assert sent[k][key] == pytest.approx((sent[k - 1][key] + sent[k + 1][key]) / 2, abs=1e-4)
        checked += 1
    assert checked == (FPS - 1) // 2
    assert any(abs(sent[k][STATE_KEYS[0]] - sent[k + 1][STATE_KEYS[0]]) > 1e-3 for k in range(FPS - 1))


def test_use_torch_compile_compiles_predict_action_chunk_as_lerobot_rollout_does(saved_acts, tmp_path):
    """`use_torch_compile: true` wraps `predict_action_chunk` in `torch.compile` with the protocol's
    backend (LeRobot's own `_wrap_predict_action_chunk_with_torch_compile`); the warm-up pass runs
    through it. (The eager backend: inductor would compile C++ for minutes on this CPU.)"""
    from orchestrator.design.protocol import LeRobotPolicySpec
    from orchestrator.policies.lerobot import LeRobotPolicy

    features = {k: float for k in STATE_KEYS} | {"front": (96, 128, 3), "wrist": (96, 128, 3)}
    plain = LeRobotPolicy(LeRobotPolicySpec(type="lerobot", path=str(saved_acts["twin"])), tmp_path, "", features)
    assert not hasattr(plain.policy.predict_action_chunk, "_torchdynamo_orig_callable")   # the control
    spec = LeRobotPolicySpec(type="lerobot", path=str(saved_acts["twin"]), use_torch_compile=True,
                             torch_compile_backend="eager")
    compiled = LeRobotPolicy(spec, tmp_path, "", features)
    assert hasattr(compiled.policy.predict_action_chunk, "_torchdynamo_orig_callable")
    obs = FakeRig().observe()
    compiled.reset()
    plain.reset()
    for _ in range(3):
        assert compiled.select_action(obs) == pytest.approx(plain.select_action(obs), abs=1e-4)


def test_the_compile_warm_up_runs_once_per_policy_load_not_every_episode(saved_vla, tmp_path, monkeypatch):
    """`use_torch_compile` under RTC: the first episode sends nothing until LeRobot's
    `compile_warmup_inferences` chunks are done (then drops them); the compiled function is kept,
    so the next episode's first action comes from its first chunk. (Compiling itself is left out,
    `torch.compile` the identity: SmolVLA's own `compile_model` would run inductor's max-autotune
    for minutes; the warm-up is the engine's, whatever compiled.)"""
    import torch

    from orchestrator.design.protocol import Cube, LeRobotPolicySpec, Mark
    from orchestrator.policies.base import EpisodeContext
    from orchestrator.policies.rtc import EnginePolicy
    from orchestrator.run.control_loop import run_episode
    from orchestrator.run.recording import EpisodeRecorder

    monkeypatch.setattr(torch, "compile", lambda fn=None, **kwargs: fn if fn is not None else (lambda f: f))
    features = {k: float for k in STATE_KEYS} | {"front": (96, 128, 3), "wrist": (96, 128, 3)}
    spec = LeRobotPolicySpec(type="lerobot", path=str(saved_vla), use_torch_compile=True,
                             compile_warmup_inferences=1, inference={"type": "rtc", "queue_threshold": 4})
    policy = EnginePolicy(spec, saved_vla.parent, "pick", features, fps=FPS)
    chunks = []
    real_chunk = policy.policy.predict_action_chunk
    policy.policy.predict_action_chunk = lambda batch, **kw: chunks.append(1) or real_chunk(batch, **kw)
    resets: list[int] = []         # LeRobot's engine.reset() per episode: the new engine's, then the warm-up's flush
    real_policy_reset = policy.policy.reset
    policy.policy.reset = lambda: (resets.__setitem__(-1, resets[-1] + 1), real_policy_reset())[1]
    first_sent: list[int] = []     # chunks computed this episode when its first action went out
    real_select = policy.select_action

    def select(obs):
        action = real_select(obs)
        if len(first_sent) < episode[0] and any(v != 0.0 for v in action.values()):   # FakeRig's arm is at 0
            first_sent.append(len(chunks))
        return action

    policy.select_action = select
    context = EpisodeContext(mark=Mark(id="M01", x=0.16, y=0.0), cube=Cube(), seed=0, fps=FPS, duration_s=1.5, task="")
    episode = [0]
    try:
        for n in (1, 2):
            chunks.clear()
            resets.append(0)
            episode[0] = n
            recorder = EpisodeRecorder(tmp_path / "c", f"ep{n}", {}, FPS, round(1.5 * FPS), realtime=True)
            run_episode(FakeRig(), policy, context, recorder)
            recorder.discard()
    finally:
        policy.close()
    # The warm-up's flush (lerobot-rollout's `_handle_warmup`: engine.reset()) only in the first
    # episode; its warm-up chunk is never sent. A chunk is computed only when at most 4 actions
    # are queued (a chunk is 20), so unless a forward pass takes over a second (the delay then
    # empties the queue), the second episode sends from its first chunk.
    assert resets == [2, 1], resets
    assert len(first_sent) == 2 and first_sent[0] >= 2, first_sent
    assert first_sent[1] == 1 or max(policy.inference_timing().get("delay_max_steps", 0), 0) > 10, first_sent
