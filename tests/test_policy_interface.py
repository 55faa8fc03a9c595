"""The `Policy` interface is what the runner, the factory and preflight use: every member they call
is declared on `Policy` with a default that is right for a policy computing each action on the
control thread, every policy that may run asynchronously overrides `stop` (the member that drops
its queued actions before the arm moves), and the runner reaches that `stop` on every way out of
an episode. (That the runner never probes a policy or a rig with `getattr`/`hasattr` is
tests/test_rig_interface.py's probe test.)"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import pytest

from orchestrator.design.protocol import Cube, Mark
from orchestrator.policies.base import EpisodeContext, Policy
from orchestrator.rigs.base import EmergencyStop, EpisodeFacts
from orchestrator.rigs.profile import STATE_KEYS
from orchestrator.run.control_loop import run_episode
from orchestrator.run.recording import EpisodeRecorder
from support.fake_rig import StillRig
from support.repo import REPO

FPS = 30
CONTEXT = EpisodeContext(mark=Mark(id="M01", x=0.2, y=0.0), cube=Cube(), seed=0, fps=FPS, duration_s=0.2, task="")
QUEUED = 50   # actions an asynchronous policy holds ahead (more than an episode of CONTEXT runs)


def policy_classes() -> set[type[Policy]]:
    """Every `Policy` subclass defined in `orchestrator/policies` (each of its modules imported)."""
    for module in pkgutil.iter_modules([str(REPO / "orchestrator" / "policies")]):
        importlib.import_module(f"orchestrator.policies.{module.name}")
    found, todo = set(), list(Policy.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.__module__.startswith("orchestrator.policies."):
            found.add(cls)
    return found


def may_run_asynchronously(cls: type[Policy]) -> bool:
    """Whether `cls` says it is asynchronous, or may say so per object (`self.asynchronous = ...`)."""
    return cls.asynchronous is not False or re.search(r"self\.asynchronous\s*=[^=]", inspect.getsource(cls)) is not None


def keeps_the_default_stop(cls: type[Policy]) -> bool:
    return inspect.getattr_static(cls, "stop") is inspect.getattr_static(Policy, "stop")


class Scripted(Policy):
    """The least a policy declares: the three abstract methods."""

    def reset(self, context):
        pass

    def select_action(self, observation):
        return {k: 0.0 for k in STATE_KEYS}

    def close(self):
        pass


def test_the_defaults_hold_nothing_and_claim_nothing():
    policy = Scripted()
    assert policy.stop() is None and policy.inference_timing() is None
    assert policy.asynchronous is False and policy.needs_images is False
    assert tuple(policy.warnings) == () and policy.warmup_s == 0.0 and tuple(policy.ordered_action_keys) == ()
    assert Scripted.runs_in_an_engine(object()) is False


def test_every_policy_that_may_run_asynchronously_overrides_stop():
    from orchestrator.policies.lerobot import LeRobotPolicy
    from orchestrator.policies.lerobot_server import ServerPolicy
    from orchestrator.policies.rtc import EnginePolicy
    from orchestrator.policies.scripted import ScriptedPickPolicy

    classes = policy_classes()
    assert classes == {ScriptedPickPolicy, LeRobotPolicy, ServerPolicy, EnginePolicy}
    asynchronous = {cls for cls in classes if may_run_asynchronously(cls)}
    assert asynchronous == {ServerPolicy, EnginePolicy}
    assert [cls.__name__ for cls in asynchronous if keeps_the_default_stop(cls)] == []


def test_positive_control_an_asynchronous_policy_whose_stop_has_another_name():
    with pytest.raises(TypeError, match="keeps Policy.stop"):
        type("DropsByAnotherName", (Scripted,), {"asynchronous": True, "drop_queue": lambda self: None})
    with pytest.raises(TypeError, match="keeps Policy.stop"):   # inherited, its stop put back
        type("StopPutBack", (Queued,), {"stop": Policy.stop})

    class PerObject(Scripted):     # asynchronous per object: the class cannot be refused when defined
        def __init__(self):
            self.asynchronous = True

    assert may_run_asynchronously(PerObject) and keeps_the_default_stop(PerObject)


def test_the_factory_deploys_an_engine_spec_with_the_engine_policy():
    from orchestrator.design.protocol import LeRobotPolicySpec
    from orchestrator.policies.factory import _deployed
    from orchestrator.policies.lerobot import LeRobotPolicy
    from orchestrator.policies.rtc import EnginePolicy

    sync = LeRobotPolicySpec(type="lerobot", path="ckpt")
    rtc = LeRobotPolicySpec(type="lerobot", path="ckpt", inference={"type": "rtc"})
    interpolated = LeRobotPolicySpec(type="lerobot", path="ckpt", interpolation_multiplier=2)
    assert [LeRobotPolicy.runs_in_an_engine(s) for s in (sync, rtc, interpolated)] == [False, True, True]
    assert _deployed(LeRobotPolicy, sync) is LeRobotPolicy
    assert _deployed(LeRobotPolicy, rtc) is EnginePolicy and _deployed(LeRobotPolicy, interpolated) is EnginePolicy
    assert _deployed(Scripted, rtc) is Scripted        # the default: no engine


class Queued(Scripted):
    """An asynchronous policy: a queue of actions computed ahead (a canary value in every joint),
    served one a step; its `stop` drops them."""

    asynchronous = True

    def reset(self, context):
        self.queue = [{k: 33.0 for k in STATE_KEYS} for _ in range(QUEUED)]

    def select_action(self, observation):
        return self.queue.pop(0)

    def stop(self):
        self.queue.clear()


class StillSimRig(StillRig):
    realtime = False

    def __init__(self):
        self.sent = 0

    def observe(self, with_images=True):
        return {k: 0.0 for k in STATE_KEYS}

    def act(self, action):
        self.sent += 1
        return action

    def end_episode(self):
        return EpisodeFacts()


class StopAtStep:
    """The operator: the stop key at the episode's step `at`."""

    def __init__(self, at: int):
        self.at, self.polls = at, 0

    def poll(self, elapsed_s):
        self.polls += 1
        if self.polls == 2 * self.at:
            raise EmergencyStop()


def _episode(tmp_path, policy, operator=None):
    rig = StillSimRig()
    recorder = EpisodeRecorder(tmp_path, "ep", {}, FPS, round(FPS * CONTEXT.duration_s))
    try:
        run_episode(rig, policy, CONTEXT, recorder, operator)
    finally:
        recorder.discard()
    return rig


@pytest.mark.parametrize("way_out", ["stop key", "end"])
def test_a_stop_drops_an_asynchronous_policys_queue_through_stop(tmp_path, way_out):
    policy = Queued()
    if way_out == "stop key":
        with pytest.raises(EmergencyStop):
            _episode(tmp_path, policy, StopAtStep(3))
    else:
        rig = _episode(tmp_path, policy)
        assert rig.sent == round(FPS * CONTEXT.duration_s)
    assert policy.queue == []


def test_positive_control_a_drop_by_another_name_is_not_reached(tmp_path):
    class DropsByAnotherName(Scripted):   # asynchronous per object, so not refused when defined
        def __init__(self):
            self.asynchronous = True

        reset, select_action = Queued.reset, Queued.select_action

        def drop_queue(self):
            self.queue.clear()

    policy = DropsByAnotherName()
    with pytest.raises(EmergencyStop):
        _episode(tmp_path, policy, StopAtStep(3))
    assert len(policy.queue) == QUEUED - 3     # the canaries computed before the stop are still queued
