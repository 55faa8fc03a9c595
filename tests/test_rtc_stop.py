"""Safety under asynchronous inference: a stop drops every queued and in-flight
action, and LeRobot's RTC thread is stopped and joined on every way out of an episode.

On the twin (LeRobot's real SOFollower and Feetech bus over the twin's pseudo-terminal), the
tiny SmolVLA runs under `inference: {type: rtc}`; one chunk, the canary, is made slow and sets
every joint to a value no other action has, and the operator's stop key is hit while it is
being computed. The twin's wire log holds every Goal_Position the servos received; the canary
must never be among them, neither in the stopped episode nor in the next one. The positive control is a policy that only
pauses LeRobot's engine on a stop and clears its queue on the next reset (what a wrapper built on
`engine.pause()`/`engine.reset()` would do): the in-flight canary lands in the cleared queue and
is written to the bus in the next episode.
"""

from __future__ import annotations

import threading
import time

import pytest

from orchestrator.rigs.base import EmergencyStop
from orchestrator.rigs.profile import STATE_KEYS
from support import rtc_doubles
from support.campaign_files import TWIN_GRASP_MARK_XY, twin_rig
from support.rtc_doubles import FPS, FakeRig

rtc_policy = rtc_doubles.rtc_policy   # the fixture (support/rtc_doubles.py)

CANARY_DEG = 33.0          # every joint of the canary chunk (post-processed: 20 x the model's 1.65)
CANARY_CALL = 2            # the RTC thread's 2nd chunk of the first episode is the canary
CANARY_SLEEP_S = 0.3


def rtc_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "RTCInference" and t.is_alive()]


class Canary:
    """Wraps `predict_action_chunk`: chunk number CANARY_CALL of an armed episode sleeps and
    comes back as CANARY_DEG everywhere; `started`/`finished` say when."""

    def __init__(self, policy):
        self.real = policy.predict_action_chunk
        self.calls = 0
        self.armed = True
        self.started = threading.Event()
        self.finished_at: float | None = None

    def __call__(self, batch, **kwargs):
        chunk = self.real(batch, **kwargs)
        self.calls += 1
        if self.armed and self.calls == CANARY_CALL:
            self.started.set()
            time.sleep(CANARY_SLEEP_S)   # the stimulus: a long inference (the canary's)
            chunk = chunk * 0 + CANARY_DEG / 20.0   # the action statistics: mean 0, std 20
            self.finished_at = time.perf_counter()
        return chunk


class StopDuringCanary:
    """The operator: hits the stop key at the first step after the canary started computing."""

    def __init__(self, canary: Canary):
        self.canary = canary
        self.stopped_at: float | None = None

    def poll(self, elapsed_s):
        if self.stopped_at is None and self.canary.started.is_set():
            self.stopped_at, self.stopped_epoch = time.perf_counter(), time.time()
            raise EmergencyStop()


def paused_not_stopped(base):
    """The positive control: stop() only pauses the engine; reset() clears its queue and resumes it."""

    class PausedNotStopped(base):
        def stop(self):
            if self._engine is not None:
                self._engine.pause()

        def reset(self, context=None):
            if self._engine is None:
                return super().reset(context)
            self._engine.reset()
            self._interpolator.reset()
            self._hold, self._cached_obs = None, None
            self._engine.resume()

        def close(self):
            if self._engine is not None:
                self._engine.stop()
            self._engine = None

    return PausedNotStopped


@pytest.fixture(scope="module")
def twin(tmp_path_factory):
    """One twin for the module's two runs (a twin's start, its render process's included, is
    seconds on a busy machine), with its wire log; each run reads the log from its own start on."""
    from orchestrator.rigs.profile import load_rig
    from orchestrator.rigs.twin.client import start_twin

    folder = tmp_path_factory.mktemp("rtc_twin")
    # no max_relative_target clipping: actions reach the bus as computed
    rig_path = twin_rig(folder, fps=FPS, max_relative_target=None)
    log_path = folder / "wire.jsonl"
    with start_twin(load_rig(rig_path), wire_log=log_path) as running:
        yield running, log_path


def two_episodes(policy_class, checkpoint, tmp_path, twin):
    """A stopped RTC episode and the next one on the twin (`twin`: the module's twin and its wire
    log); (the wire log of this run, the canary's raw goal per arm servo, the canary, the operator,
    RTC threads alive after the stop)."""
    from orchestrator.design.protocol import Cube, LeRobotPolicySpec, Mark
    from orchestrator.policies.base import EpisodeContext
    from orchestrator.rigs.factory import make_rig
    from orchestrator.run.control_loop import run_episode
    from orchestrator.run.recording import EpisodeRecorder
    from support.wirelog import WireLog

    running, log_path = twin
    spec = LeRobotPolicySpec(type="lerobot", path=str(checkpoint),
                             inference={"type": "rtc", "rtc": {"execution_horizon": 5}, "queue_threshold": 4})
    started = time.time()
    rig = make_rig(running.rig)
    policy = policy_class(spec, tmp_path, "pick", rig, fps=FPS)
    canary = Canary(policy.policy)
    policy.policy.predict_action_chunk = canary
    operator = StopDuringCanary(canary)
    rig.connect()
    try:
        bus = rig.robot.bus
        arm = [bus.motors[k.removesuffix(".pos")].id for k in STATE_KEYS if not k.startswith("gripper")]
        canary_raw = bus._unnormalize(dict.fromkeys(arm, CANARY_DEG))
        context = EpisodeContext(mark=Mark(id="M01", x=TWIN_GRASP_MARK_XY[0], y=TWIN_GRASP_MARK_XY[1]), cube=Cube(), seed=0, fps=FPS,
                                 duration_s=3.0, task="pick")
        recorder = EpisodeRecorder(tmp_path / "c", "ep1", {}, FPS, round(FPS * 3.0), realtime=True)
        with pytest.raises(EmergencyStop):
            run_episode(rig, policy, context, recorder, operator)
        recorder.discard()
        alive = rtc_threads()
        canary.armed = False
        recorder = EpisodeRecorder(tmp_path / "c", "ep2", {}, FPS, FPS, realtime=True)
        run_episode(rig, policy, EpisodeContext(**{**context.__dict__, "duration_s": 1.0}), recorder)
        recorder.discard()
    finally:
        policy.close()
        rig.disconnect()   # its torque-off writes are read back: every packet before them is logged
    log = WireLog.read(log_path)
    return WireLog([line for line in log.lines if line.get("t", started) >= started]), canary_raw, canary, operator, alive


def canary_packets(log, canary_raw: dict[int, int]) -> list[float]:
    """Times of the Goal_Position writes the servos received that carry the canary on every arm
    servo (one sync write: one time), within a tick."""
    by_time: dict[float, dict[int, int]] = {}
    for t, servo, value in log.goals():
        by_time.setdefault(t, {})[servo] = value
    return [t for t, goals in by_time.items()
            if all(abs(goals.get(servo, -99) - raw) <= 1 for servo, raw in canary_raw.items())]


@pytest.mark.timeout(300)
def test_a_stop_during_rtc_inference_sends_nothing_computed_before_it(saved_vla, tmp_path, twin):
    from orchestrator.policies.rtc import EnginePolicy

    log, canary_raw, canary, operator, alive = two_episodes(EnginePolicy, saved_vla, tmp_path, twin)
    assert operator.stopped_at is not None and canary.finished_at is not None
    assert canary.finished_at > operator.stopped_at          # the canary was in flight at the stop
    assert alive == []                                       # the thread was joined before the arm moved
    after = {t for t, _, _ in log.goals(after=operator.stopped_epoch)}
    assert len(after) >= FPS // 2, len(after)                # the next episode did write goals
    assert len({t for t, _, _ in log.goals()}) >= len(after) + 5   # ... and so did the stopped one
    assert canary_packets(log, canary_raw) == []
    assert rtc_threads() == []


@pytest.mark.timeout(300)
def test_positive_control_a_paused_engine_lets_the_in_flight_canary_through(saved_vla, tmp_path, twin):
    from orchestrator.policies.rtc import EnginePolicy

    log, canary_raw, canary, operator, _ = two_episodes(paused_not_stopped(EnginePolicy), saved_vla, tmp_path, twin)
    assert canary.finished_at > operator.stopped_at
    leaked = canary_packets(log, canary_raw)
    assert leaked and min(leaked) > operator.stopped_epoch, leaked
    assert rtc_threads() == []


# ------------------------------------------------------------ every way out joins the thread
@pytest.mark.parametrize("way_out", ["end", "emergency_stop", "ctrl-c", "device_fault"])
def test_the_rtc_thread_is_joined_on_every_way_out(rtc_policy, tmp_path, way_out):
    from orchestrator.design.protocol import Cube, Mark
    from orchestrator.policies.base import EpisodeContext
    from orchestrator.rigs.device_fault import DeviceFault
    from orchestrator.run.control_loop import run_episode
    from orchestrator.run.recording import EpisodeRecorder

    fail = {"end": None, "emergency_stop": EmergencyStop(), "ctrl-c": KeyboardInterrupt(),
            "device_fault": DeviceFault.policy(RuntimeError("bus gone"))}[way_out]
    rig = FakeRig(fail)
    context = EpisodeContext(mark=Mark(id="M01", x=TWIN_GRASP_MARK_XY[0], y=TWIN_GRASP_MARK_XY[1]), cube=Cube(), seed=0, fps=FPS, duration_s=1.0, task="")
    recorder = EpisodeRecorder(tmp_path / "c", "ep", {}, FPS, FPS, realtime=True)
    seen = []
    rtc_policy.select_action = (lambda real: lambda obs: (seen.append(len(rtc_threads())), real(obs))[1])(
        type(rtc_policy).select_action.__get__(rtc_policy))
    try:
        if fail is None:
            run_episode(rig, rtc_policy, context, recorder)
        else:
            with pytest.raises(type(fail)):
                run_episode(rig, rtc_policy, context, recorder)
    finally:
        del rtc_policy.select_action
        recorder.discard()
    assert seen and max(seen) == 1                 # the thread ran during the episode ...
    assert rtc_threads() == []                     # ... and was joined on the way out
    assert rtc_policy._engine is None              # its queue dropped with it
