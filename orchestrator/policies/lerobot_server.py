"""A policy served from another machine by LeRobot's own policy server, driven with LeRobot's
robot-client code (`lerobot.async_inference`, gRPC), one orchestrator control step at a time.

LeRobot's `RobotClient` owns a robot (`make_robot_from_config(...).connect()` in its
constructor) and its own control loop, so it cannot be used as it is under the orchestrator's
control loop (which owns the arm, the pacing, the safety stops and the recording). Its methods do
not need the robot except through `get_observation`, `send_action` and `action_features`, so
`ServerPolicy` builds a `RobotClient` without calling its constructor and gives it a stand-in
robot whose observation is the control loop's and whose `send_action` only hands the action back
to the control loop. Each `select_action(observation)` is then one iteration of
`RobotClient.control_loop`: `control_loop_action()` when `actions_available()` (the next timed
action of the queue), `control_loop_observation(task)` when `_ready_to_send_observation()`
(the queue holds at most `chunk_size_threshold` of a chunk; `must_go` when it is empty).
Received chunks are merged with LeRobot's `_aggregate_action_queues` and `aggregate_fn_name`.

Different from LeRobot's client, on purpose:
- the receiver thread is the orchestrator's: LeRobot's `receive_actions` logs a gRPC error and
  retries forever (the arm would starve silently); here a failed call while the episode runs is
  a lost connection, and so is a reply that takes longer than `timeout_s` and no action for
  `timeout_s`: the next `select_action` raises a `DeviceFault` (kind `policy_server`), the runner
  aborts the attempt and holds the arm;
- when no action is ready, the step sends the last goal again (the last action sent this
  episode, else the pose observed at the first step), as `policies.rtc.EnginePolicy` does;
- each episode has its own channel, client and queue: `reset()` opens them and calls the
  server's `Ready` (which flushes its observation queue and timesteps); `stop()`, on every way
  out of an episode, closes the channel (which cancels the call in flight) and joins the receiver
  thread, so nothing computed before a stop is sent after it.

Once, at construction (before the arm is connected): `Ready` and `SendPolicyInstructions` with
LeRobot's `RemotePolicyConfig(policy_type, path, lerobot_features, actions_per_chunk, device,
rename_map)`; the server loads the policy then. A server that cannot be reached or refuses the
policy is a `BadInput` (one line). The server's messages are pickles (LeRobot's protocol): run
it only on a network you trust.

Latency: per chunk, from the observation's timestamp (taken when it is sent) to the chunk's
arrival (`inference_timing()`).
"""

from __future__ import annotations

import pickle  # nosec - LeRobot's policy server protocol is pickled dataclasses
import threading
import time
from collections.abc import Mapping
from queue import Queue
from types import SimpleNamespace
from typing import Any

import numpy as np

from orchestrator.core.errors import BadInput
from orchestrator.policies.base import Policy, register_policy
from orchestrator.rigs.base import Action, Observation, Rig
from orchestrator.rigs.device_fault import DeviceFault
from orchestrator.rigs.profile import STATE_KEYS, LoadedRig, RigProfile

SETUP_TIMEOUT_S = 600.0   # the server loads the checkpoint while answering SendPolicyInstructions
SERVER_CHECK = ("the policy server's process and the network to it (`python -m "
                "lerobot.async_inference.policy_server --host=... --port=...`), then `orchestrator doctor`")


def robot_client_class():
    """LeRobot's `RobotClient`, imported without its import-time side effects: its class body calls
    `helpers.get_logger`, which creates `./logs/robot_client_<time>.log` in the current directory
    and re-initialises the root logger (`init_logging`); here its logger is a plain named one."""
    import logging
    import sys

    module = sys.modules.get("lerobot.async_inference.robot_client")
    if module is not None:
        return module.RobotClient
    from lerobot.async_inference import helpers

    real = helpers.get_logger
    helpers.get_logger = lambda name, log_to_file=True: logging.getLogger(name)
    try:
        from lerobot.async_inference.robot_client import RobotClient
    finally:
        helpers.get_logger = real
    return RobotClient


def lost(address: str, cause: str) -> DeviceFault:
    return DeviceFault("policy_server", f"policy server {address}", cause, SERVER_CHECK)


class _StandIn:
    """The robot `RobotClient` talks to: the control loop's observation, actions handed back."""

    robot_type = "orchestrator"

    def __init__(self, action_keys: list[str]):
        self.action_features = {k: float for k in action_keys}
        self.observation: dict | None = None
        self.sent: dict | None = None

    def get_observation(self) -> dict:
        return dict(self.observation or {})

    def send_action(self, action: dict) -> dict:
        self.sent = {k: float(v) for k, v in action.items()}
        return action


@register_policy("lerobot_server")
class ServerPolicy(Policy):
    """A `type: lerobot_server` policy (see the module docstring)."""

    needs_images = True
    asynchronous = True

    @classmethod
    def from_spec(cls, label, spec, protocol=None, rig=None) -> ServerPolicy:
        """The rig's observation features (`Rig.observation_features`) are what the server is
        told the observations hold; the protocol's task and fps."""
        features = rig
        if features is None:
            raise BadInput(f"policy {label}: a served policy needs the rig (for its features)")
        return cls(spec, protocol.protocol.task if protocol is not None else "", features,
                   fps=protocol.protocol.episode.fps if protocol is not None else 30)

    def __init__(self, spec, task: str, rig_features: Mapping[str, Any] | RigProfile | LoadedRig | Rig, *,
                 fps: float):
        import grpc
        from lerobot.async_inference.configs import get_aggregate_function
        from lerobot.async_inference.constants import SUPPORTED_POLICIES
        from lerobot.async_inference.helpers import RemotePolicyConfig
        from lerobot.transport import services_pb2, services_pb2_grpc
        from lerobot.transport.utils import grpc_channel_options
        from lerobot.utils.constants import OBS_STR
        from lerobot.utils.feature_utils import hw_to_dataset_features

        self.spec, self.fps = spec, float(fps)
        self.task = spec.task or task or ""
        self.address = spec.address
        where = f"policy server {spec.address}"
        if spec.policy_type not in SUPPORTED_POLICIES:
            raise BadInput(f"{where}: policy_type {spec.policy_type!r} is not one LeRobot's policy server runs "
                           f"({', '.join(SUPPORTED_POLICIES)})")
        try:
            self.aggregate_fn = get_aggregate_function(spec.aggregate_fn_name)
        except ValueError as exc:
            raise BadInput(f"{where}: {exc}") from None
        from orchestrator.policies.lerobot import features_of

        features = features_of(rig_features)[0]
        self.action_keys = [k for k in STATE_KEYS if k in features]
        self.lerobot_features = hw_to_dataset_features(features, OBS_STR, use_video=False)
        self.policy_config = RemotePolicyConfig(spec.policy_type, spec.path, self.lerobot_features,
                                                spec.actions_per_chunk, spec.device, dict(spec.rename_map))
        self._grpc, self._pb, self._pb_grpc = grpc, services_pb2, services_pb2_grpc
        robot_client_class()   # imported here, on the main thread
        self._options = grpc_channel_options(initial_backoff=f"{1.0 / self.fps:.4f}s")
        started = time.perf_counter()
        channel = grpc.insecure_channel(spec.address, self._options)
        try:
            stub = services_pb2_grpc.AsyncInferenceStub(channel)
            stub.Ready(services_pb2.Empty(), timeout=spec.timeout_s)
            stub.SendPolicyInstructions(services_pb2.PolicySetup(data=pickle.dumps(self.policy_config)),
                                        timeout=SETUP_TIMEOUT_S)
        except grpc.RpcError as exc:
            raise BadInput(f"{where}: {exc.code().name}: {exc.details()} (is "
                           "`python -m lerobot.async_inference.policy_server` running there?)") from None
        finally:
            channel.close()
        self.warmup_s = time.perf_counter() - started
        self._client = None
        self._receiver: threading.Thread | None = None
        self._lost: str | None = None
        self.latencies_s: list[float] = []
        self.action_ages_s: list[float] = []
        self._observed_at: dict[int, float] = {}
        self.starved_steps = self.served_steps = 0

    # ------------------------------------------------------------ Policy protocol
    def reset(self, context: Any = None) -> None:
        """A new channel, client and queue for the episode; the server's `Ready` flushes its side."""
        from lerobot.async_inference.helpers import FPSTracker

        RobotClient = robot_client_class()
        self.stop()
        task = getattr(context, "task", None)
        self._episode_task = self.spec.task or task or self.task
        channel = self._grpc.insecure_channel(self.address, self._options)
        client = RobotClient.__new__(RobotClient)   # its constructor would connect a robot of its own
        standin = _StandIn(self.action_keys)
        client.__dict__.update(
            config=SimpleNamespace(fps=self.fps, environment_dt=1.0 / self.fps, aggregate_fn=self.aggregate_fn,
                                   client_device="cpu", chunk_size_threshold=self.spec.chunk_size_threshold),
            robot=standin, server_address=self.address, policy_config=self.policy_config, channel=channel,
            stub=self._pb_grpc.AsyncInferenceStub(channel), shutdown_event=threading.Event(),
            latest_action_lock=threading.Lock(), latest_action=-1, action_chunk_size=-1,
            _chunk_size_threshold=self.spec.chunk_size_threshold, action_queue=Queue(),
            action_queue_lock=threading.Lock(), action_queue_size=[], start_barrier=threading.Barrier(1),
            fps_tracker=FPSTracker(target_fps=self.fps), must_go=threading.Event())
        client.must_go.set()
        sent_ok = client.send_observation

        def send_observation(obs):   # LeRobot's control_loop_observation drops this result
            ok = sent_ok(obs)
            if not ok and client.running:
                self._lost = "sending an observation failed"
            return ok

        client.send_observation = send_observation
        self._lost = None
        self.latencies_s, self.starved_steps, self.served_steps = [], 0, 0
        self.action_ages_s = []      # per served step whose chunk's observation time is known
        self._observed_at = {}       # timestep -> when the newest chunk holding it was observed
        self._hold: dict[str, float] | None = None
        try:
            client.stub.Ready(self._pb.Empty(), timeout=self.spec.timeout_s)
        except self._grpc.RpcError as exc:
            channel.close()
            raise lost(self.address, f"{exc.code().name}: {exc.details()}") from None
        self._client, self._standin = client, standin
        self._last_action_at = time.perf_counter()
        self._receiver = threading.Thread(target=self._receive, args=(client,), name="PolicyServerReceiver",
                                          daemon=True)
        self._receiver.start()

    def _receive(self, client) -> None:
        """The receiver thread: GetActions until the episode stops; a failure is a lost server."""
        RobotClient = robot_client_class()
        while client.running:
            try:
                reply = client.stub.GetActions(self._pb.Empty(), timeout=self.spec.timeout_s)
            except self._grpc.RpcError as exc:
                if client.running:
                    self._lost = f"{exc.code().name}: {exc.details()}"
                return
            if not reply.data or not client.running:
                continue
            timed_actions = pickle.loads(reply.data)  # nosec - LeRobot's protocol
            if timed_actions:
                observed_at = timed_actions[0].get_timestamp()   # the observation the chunk answers
                self.latencies_s.append(time.time() - observed_at)
                for ta in timed_actions:
                    self._observed_at[ta.get_timestep()] = observed_at
            client.action_chunk_size = max(client.action_chunk_size, len(timed_actions))
            RobotClient._aggregate_action_queues(client, timed_actions, client.config.aggregate_fn)
            client.must_go.set()

    def select_action(self, observation: Observation) -> Action:
        client = self._client
        if client is None:
            raise DeviceFault.policy(RuntimeError("the policy was stopped; reset() starts the next episode"))
        if self._lost is not None:
            raise lost(self.address, self._lost)
        if self._hold is None:
            self._hold = {k: float(observation[k]) for k in self.action_keys if k in observation}
        standin = self._standin
        standin.observation, standin.sent = observation, None
        try:
            if client.actions_available():
                client.control_loop_action()
            if client._ready_to_send_observation():
                client.control_loop_observation(self._episode_task)
        except Exception as exc:  # noqa: BLE001 - LeRobot's client code failed
            raise DeviceFault.policy(exc) from exc
        if self._lost is not None:
            raise lost(self.address, self._lost)
        now = time.perf_counter()
        if standin.sent is None:
            self.starved_steps += 1
            if now - self._last_action_at > self.spec.timeout_s:
                raise lost(self.address, f"no action for {now - self._last_action_at:.1f} s")
            return dict(self._hold)
        self._last_action_at = now
        self.served_steps += 1
        observed_at = self._observed_at.pop(client.latest_action, None)
        if observed_at is not None:
            self.action_ages_s.append(time.time() - observed_at)
        self._hold = {k: standin.sent[k] for k in self.action_keys if k in standin.sent}
        return dict(standin.sent)

    def stop(self) -> None:
        """Close the episode's channel (cancelling the call in flight), join the receiver, drop the queue."""
        client, self._client = self._client, None
        if client is None:
            return
        client.shutdown_event.set()
        client.channel.close()
        if self._receiver is not None:
            self._receiver.join(self.spec.timeout_s + 1.0)
            self._receiver = None

    def inference_timing(self) -> dict[str, Any]:
        """Per chunk, `latency_*`: from the observation it answers to its arrival here (the round
        trip). Per step, `action_age_*`: from the observation an action was computed from to the
        step that sent it (the round trip plus the time it waited in the queue); `served_steps`
        steps sent a served action, `starved_steps` held the last goal instead. A served step is
        counted even when its age is unknown (LeRobot's queue can serve a timestep whose chunk
        entry was already taken), so the two counts always add up to the steps."""
        lat, ages = list(self.latencies_s), list(self.action_ages_s)
        out: dict[str, Any] = {"mode": "server", "chunks": len(lat), "starved_steps": self.starved_steps,
                               "served_steps": self.served_steps}
        for name, values in (("latency", lat), ("action_age", ages)):
            if values:
                out |= {f"{name}_p50_ms": round(float(np.percentile(values, 50)) * 1000, 3),
                        f"{name}_p99_ms": round(float(np.percentile(values, 99)) * 1000, 3),
                        f"{name}_max_ms": round(max(values) * 1000, 3)}
        return out

    def close(self) -> None:
        self.stop()

