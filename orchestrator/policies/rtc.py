"""A LeRobot checkpoint run through lerobot-rollout's own inference engines: real-time chunking
(`--inference.type=rtc`) and action interpolation (`--interpolation_multiplier`).

`EnginePolicy(spec, protocol_dir, task, rig_features, fps=...)` loads the checkpoint exactly as
`LeRobotPolicy` does (`policies/lerobot.py`), then, for `inference: {type: rtc}`, as
`lerobot/rollout/context.py` `build_rollout_context` does: refuses a policy without RTC support
with LeRobot's own reason (`supports_rtc_inference`), sets `policy.config.rtc_config` to the
protocol's `RTCConfig` and calls `init_rtc_processor()` (the prefix guidance).

Each episode gets a new engine from LeRobot's `create_inference_engine` (an `RTCInferenceEngine`:
a background thread computes the next chunk with `predict_action_chunk(inference_delay,
prev_chunk_left_over)` while the current one executes, merged into LeRobot's `ActionQueue`; or a
`SyncInferenceEngine` when only interpolation is asked for). `reset()` builds and starts it
(`engine.reset(); engine.start(); engine.resume()`, as `RolloutStrategy._init_engine` and
`BaseStrategy.run`); each `select_action(observation)` is one tick of `BaseStrategy.run`: the
robot observation processor and `engine.notify_observation` when the interpolator needs a new
action (`_process_observation_and_notify`), then LeRobot's own `send_next_action` (next action
from the queue -> `ActionInterpolator` -> ordered action keys -> robot action processor).

With `use_torch_compile`, nothing is sent until the engine's compile warm-up inferences are done
(LeRobot's `_handle_warmup`). lerobot-rollout warms up once per run, its one engine living through
every episode; here each episode has its own engine, but the compiled function is the policy's
and is kept, so the warm-up runs once per policy load (again only if an episode ended before it
completed): later engines are made without LeRobot's compile warm-up (`use_torch_compile` is,
for the engine, only that warm-up).

When no action is ready (the first chunk is still being computed, the queue ran dry, or the
compile warm-up runs), lerobot-rollout sends nothing and the servos keep their last goal; here the step sends that
same goal again: the last action sent this episode, else the joint positions observed at the
episode's first step. Such steps are counted (`starved_steps`).

Stopping (`stop()`, called by the control loop on every way out of an episode, and by `close()`):
the engine's thread is told to stop and joined (LeRobot's `engine.stop()`), and the engine, its
queue and everything in flight are dropped: the next episode starts a new engine with an empty
queue, so no action computed before a stop can be sent after it. A thread that does not join
within LeRobot's timeout keeps its own (orphaned) queue, which nothing reads; the next `reset()`
waits for it once more and refuses to start (a policy fault) while it still runs.

Inference latency: each chunk's time from preprocessing to the queue merge (what LeRobot's
`LatencyTracker` measures) and the delay in steps LeRobot derived from it, per episode in
`inference_timing()`, with the count of LeRobot's delay-estimate warnings (kept off the terminal).
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from orchestrator.core.errors import BadInput
from orchestrator.policies.lerobot import LeRobotPolicy
from orchestrator.rigs.base import Action, Observation
from orchestrator.rigs.device_fault import DeviceFault

STOP_WAIT_S = 10.0   # after LeRobot's own 3 s join timeout, how long reset() waits for a stuck thread


def rtc_unsupported(where: str, policy_type: str) -> str:
    """lerobot-rollout's own refusal (`build_rollout_context`), word for word, in one line."""
    return (f"{where}: RTC inference is not supported by policy type '{policy_type}': the policy must "
            "implement RTC semantics and predict_action_chunk must accept inference_delay and "
            "prev_chunk_left_over. Use inference: {type: sync} instead.")


def rtc_config_folder(spec, protocol_dir: Path | str) -> tuple[str | None, str]:
    """The folder whose config.json says whether the policy supports RTC, found without
    downloading: a local checkpoint, or a Hub id's snapshot in the local Hugging Face cache
    (huggingface_hub's `try_to_load_from_cache`); else (None, why it cannot be read here)."""
    from orchestrator.policies.lerobot import resolve_checkpoint

    path, local = resolve_checkpoint(spec, protocol_dir)
    if local:
        return (path, "") if (Path(path) / "config.json").is_file() else (None, f"no config.json in {path}")
    from huggingface_hub import try_to_load_from_cache

    cached = try_to_load_from_cache(path, "config.json", revision=getattr(spec, "revision", None))
    if isinstance(cached, str):
        return str(Path(cached).parent), ""
    return None, f"{spec.path} is not in the local Hugging Face cache (validate never downloads)"


def rtc_refusal(spec, protocol_dir: Path | str) -> str | None:
    """For `validate`: LeRobot's refusal of RTC for a checkpoint whose config.json is here (local,
    or a Hub id in the local cache: `rtc_config_folder`), from LeRobot's own check
    (`supports_rtc_inference`) on the policy class, no weights loaded; None when it supports RTC,
    is not asked to, or cannot be read here (`rtc_unchecked` says why; doctor and run load it)."""
    if getattr(spec, "inference", None) is None or spec.inference.type != "rtc":
        return None
    from orchestrator.policies.lerobot import register_policy_types

    path, _ = rtc_config_folder(spec, protocol_dir)
    if path is None:
        return None
    try:
        from lerobot.configs.policies import PreTrainedConfig
        from lerobot.policies import get_policy_class
        from lerobot.rollout.inference.rtc import supports_rtc_inference

        register_policy_types()
        cfg = PreTrainedConfig.from_pretrained(path)
        cls = get_policy_class(cfg.type)
        bare = cls.__new__(cls)          # no weights: `supports_rtc()` reads only the config
        bare.__dict__["config"] = cfg
        supported = supports_rtc_inference(bare)
    except Exception:  # noqa: BLE001 - unreadable here: doctor and run decide with the loaded policy
        return None
    return None if supported else rtc_unsupported(f"policy checkpoint {spec.path}", cfg.type)


def rtc_unchecked(spec, protocol_dir: Path | str) -> str | None:
    """For `validate`: why an RTC policy's support could not be checked here (its config.json is
    neither local nor in the Hugging Face cache), else None."""
    if getattr(spec, "inference", None) is None or spec.inference.type != "rtc":
        return None
    path, why = rtc_config_folder(spec, protocol_dir)
    return None if path is not None else f"RTC support not checked here: {why}; doctor and run check it when they load it"


class _ChunkTimer:
    """The preprocessor, timed: each call opens a chunk's latency measurement; `merged()` (the
    queue's merge) closes it. Everything else is the pipeline's own (`steps`, `reset`, ...)."""

    def __init__(self, pipeline: Any):
        self._pipeline = pipeline
        self._started: float | None = None
        self.latencies_s: list[float] = []
        self.delays: list[int] = []

    def __call__(self, batch):
        self._started = time.perf_counter()
        return self._pipeline(batch)

    def __getattr__(self, name: str):
        return getattr(self._pipeline, name)

    def merged(self, real_delay: int) -> None:
        if self._started is not None:
            self.latencies_s.append(time.perf_counter() - self._started)
            self.delays.append(int(real_delay))
            self._started = None


class _DelayMismatches(logging.Filter):
    """LeRobot's `ActionQueue` warns, at each merge, when the steps consumed during an inference
    differ from the delay it estimated ("Indexes diff is not equal to real delay"): a line every
    few steps on the operator's terminal. Counted here (`delay_mismatches`) and kept off it."""

    PREFIX = "Indexes diff is not equal to real delay"

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and record.msg.startswith(self.PREFIX):
            self.count += 1
            return False
        return True


QUEUE_LOGGER = "lerobot.policies.rtc.action_queue"


class _Sent:
    """LeRobot's `send_next_action` sends to `ctx.hardware.robot_wrapper`; here that only keeps
    the action for the orchestrator's control loop, which sends it (clamped, logged) itself."""

    def __init__(self) -> None:
        self.action: dict[str, float] | None = None

    def send_action(self, action: dict) -> dict:
        self.action = {k: float(v) for k, v in action.items()}
        return action


class EnginePolicy(LeRobotPolicy):
    """A LeRobot checkpoint under lerobot-rollout's RTC (or interpolating sync) engine."""

    def __init__(self, spec, protocol_dir: Path | str, task: str, rig_features: Any, *, fps: float,
                 robot_type: str | None = None):
        self.rtc = spec.inference.type == "rtc"
        self.asynchronous = self.rtc
        self.multiplier = int(spec.interpolation_multiplier)
        self.policy_fps = float(fps) / self.multiplier   # lerobot-rollout's --fps
        self._engine = None
        self._stuck: threading.Thread | None = None
        self._timer: _ChunkTimer | None = None
        self._compile_warmed = False   # the warm-up ran once for this load of the policy
        self.starved_steps = 0
        super().__init__(spec, protocol_dir, task, rig_features, robot_type=robot_type)

    def prepare_deployment(self, policy: Any, cfg: Any) -> None:
        if not self.rtc:
            return
        from lerobot.rollout.inference.rtc import supports_rtc_inference

        if not supports_rtc_inference(policy):
            raise BadInput(rtc_unsupported(self.where, cfg.type))
        policy.config.rtc_config = self.rtc_config()
        if hasattr(policy, "init_rtc_processor"):
            policy.init_rtc_processor()

    def rtc_config(self):
        """The protocol's `inference.rtc` as LeRobot's `RTCConfig`."""
        from lerobot.configs import RTCAttentionSchedule
        from lerobot.policies.rtc.configuration_rtc import RTCConfig

        rtc = self.spec.inference.rtc
        return RTCConfig(execution_horizon=rtc.execution_horizon, max_guidance_weight=rtc.max_guidance_weight,
                         prefix_attention_schedule=RTCAttentionSchedule(rtc.prefix_attention_schedule))

    def _warm_up(self, obs_features) -> float:
        """As `LeRobotPolicy._warm_up`; under RTC one chunk as the engine asks for it, on a still
        observation. Also keeps the rig's features as the engine wants them (`hw_features`)."""
        import torch
        from lerobot.policies.utils import prepare_observation_for_inference
        from lerobot.utils.feature_utils import build_dataset_frame, hw_to_dataset_features

        obs_hw = {k: v for k, v in obs_features.items()
                  if isinstance(v, tuple) or (v is float and k.endswith((".pos", ".vel")))}
        self.hw_features = hw_to_dataset_features(obs_hw, "observation")   # as build_rollout_context
        if not self.rtc:
            seconds = super()._warm_up(obs_features)
            self.stop()   # the warm-up's reset() made an engine
            return seconds
        still = {k: (np.zeros(v, dtype=np.uint8) if isinstance(v, tuple) else 0.0) for k, v in obs_features.items()}
        start = time.perf_counter()
        try:
            with torch.inference_mode():
                frame = build_dataset_frame(self.hw_features, self.robot_observation_processor(still),
                                            prefix="observation")
                batch = prepare_observation_for_inference(frame, self.device, self.task, self.robot_type)
                batch["task"] = [self.task]
                chunk = self.policy.predict_action_chunk(self.preprocessor(batch), inference_delay=0,
                                                         prev_chunk_left_over=None)
                self.postprocessor(chunk)
        except Exception as exc:  # noqa: BLE001 - what lerobot-rollout's RTC thread would hit first
            from orchestrator.rigs.device_fault import one_line

            raise BadInput(f"{self.where}: fails on an observation shaped like the rig's: {one_line(exc)}") from None
        finally:
            self.policy.reset()
            self.preprocessor.reset()
            self.postprocessor.reset()
        return time.perf_counter() - start

    def first_action(self, pose: Any) -> None:
        """None: an engine's first action comes from its own thread (`policies.arm_fit` checks
        an engine's statistics and warm-up only)."""
        return None

    # ------------------------------------------------------------ Policy protocol
    def reset(self, context: Any = None) -> None:
        """A new engine for the episode (the previous one stopped), started and resumed."""
        from lerobot.rollout.inference.factory import RTCInferenceConfig, SyncInferenceConfig, create_inference_engine
        from lerobot.utils.action_interpolator import ActionInterpolator

        self.stop()
        if self._stuck is not None:
            self._stuck.join(STOP_WAIT_S)
            if self._stuck.is_alive():
                raise DeviceFault.policy(RuntimeError(
                    "the previous episode's RTC inference thread is still running (a forward pass that does "
                    "not end); not starting another"))
            self._stuck = None
        task = getattr(context, "task", None)
        self._episode_task = getattr(self.spec, "task", None) or task or self.task
        inference = self.spec.inference
        config = (RTCInferenceConfig(rtc=self.rtc_config(), queue_threshold=inference.queue_threshold)
                  if self.rtc else SyncInferenceConfig())
        self._timer = _ChunkTimer(self.preprocessor)
        warm_up = bool(self.spec.use_torch_compile) and not self._compile_warmed
        robot = SimpleNamespace(robot_type=self.robot_type,
                                action_features={k: float for k in self.ordered_action_keys})
        engine = create_inference_engine(
            config, policy=self.policy, preprocessor=self._timer, postprocessor=self.postprocessor,
            robot_wrapper=robot, hw_features=self.hw_features, dataset_features=self.dataset_features,
            ordered_action_keys=self.ordered_action_keys, task=self._episode_task, fps=self.policy_fps,
            device=str(self.device), use_torch_compile=warm_up,
            compile_warmup_inferences=self.spec.compile_warmup_inferences)
        self._interpolator = ActionInterpolator(multiplier=self.multiplier)
        self._sent = _Sent()
        self._ctx = SimpleNamespace(
            policy=SimpleNamespace(inference=engine),
            data=SimpleNamespace(dataset_features=self.dataset_features, ordered_action_keys=self.ordered_action_keys),
            processors=SimpleNamespace(robot_action_processor=self.robot_action_processor),
            hardware=SimpleNamespace(robot_wrapper=self._sent))
        self._mismatches = _DelayMismatches()
        logging.getLogger(QUEUE_LOGGER).addFilter(self._mismatches)
        self._cached_obs = None
        self._warming = warm_up
        self._hold: dict[str, float] | None = None
        self.starved_steps = 0
        engine.reset()
        engine.start()
        queue = getattr(engine, "action_queue", None)   # RTC only
        if queue is not None:   # time each chunk up to its merge into LeRobot's queue
            merge, timer = queue.merge, self._timer

            def timed_merge(original, processed, real_delay, *args, **kwargs):
                timer.merged(real_delay)
                return merge(original, processed, real_delay, *args, **kwargs)

            queue.merge = timed_merge
        engine.resume()
        self._engine = engine

    def select_action(self, observation: Observation) -> Action:
        engine = self._engine
        if engine is None:
            raise DeviceFault.policy(RuntimeError("the policy was stopped; reset() starts the next episode"))
        if engine.failed:
            raise DeviceFault.policy(RuntimeError("LeRobot's RTC inference thread failed (see the log)"))
        try:
            from lerobot.rollout.strategies.core import send_next_action

            if self._hold is None:
                self._hold = {k: float(observation[k]) for k in self.ordered_action_keys if k in observation}
            if self._cached_obs is None or self._interpolator.needs_new_action():
                self._cached_obs = self.robot_observation_processor(observation)
                engine.notify_observation(self._cached_obs)
            self._sent.action = None
            if not self._compile_warming(engine):
                send_next_action(self._cached_obs, observation, self._ctx, self._interpolator)
        except Exception as exc:  # noqa: BLE001 - any failure inside LeRobot's pipeline
            raise DeviceFault.policy(exc) from exc
        if self._sent.action is None:
            self.starved_steps += 1
            return dict(self._hold)
        self._hold = dict(self._sent.action)
        return self._sent.action

    def _compile_warming(self, engine) -> bool:
        """lerobot-rollout's `_handle_warmup`: with torch.compile, nothing is sent until the engine's
        warm-up inferences are done; then the engine and the interpolator are reset (the warm-up's
        chunks dropped) and the engine resumed. True while warming up."""
        if not self._warming:
            return False
        if not engine.ready:
            return True
        engine.reset()
        self._interpolator.reset()
        engine.resume()
        self._warming = False
        self._compile_warmed = True
        return False

    def stop(self) -> None:
        """Stop and join the engine's thread; drop the engine, its queue and what is in flight."""
        engine, self._engine = self._engine, None
        if engine is None:
            return
        thread = getattr(engine, "_rtc_thread", None)
        engine.stop()
        if thread is not None and thread.is_alive():
            self._stuck = thread
        logging.getLogger(QUEUE_LOGGER).removeFilter(self._mismatches)

    def inference_timing(self) -> dict[str, Any]:
        """This episode's inference: mode, chunks computed, latency p50/p99/max (ms, preprocessing
        to queue merge), LeRobot's delay in steps (max), the steps that found no action ready and the
        merges whose consumed steps differed from LeRobot's delay estimate."""
        timer = self._timer
        lat = list(timer.latencies_s) if timer is not None else []
        out: dict[str, Any] = {"mode": self.spec.inference.type, "chunks": len(lat),
                               "starved_steps": self.starved_steps}
        if self.rtc and getattr(self, "_mismatches", None) is not None:
            out["delay_mismatches"] = self._mismatches.count
        if timer is not None and lat:
            out |= {"latency_p50_ms": round(float(np.percentile(lat, 50)) * 1000, 3),
                    "latency_p99_ms": round(float(np.percentile(lat, 99)) * 1000, 3),
                    "latency_max_ms": round(max(lat) * 1000, 3),
                    "delay_max_steps": max(timer.delays)}
        return out

    def close(self) -> None:
        self.stop()
        super().close()

