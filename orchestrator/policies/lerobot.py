"""A LeRobot checkpoint as a policy, run step by step exactly as `lerobot-rollout` runs it.

`LeRobotPolicy(spec, protocol_dir, task, rig_features)` loads the checkpoint (`spec.path`: a Hub
repo id, or a local directory relative to the protocol's folder; `spec.revision`,
`spec.device`) the way `lerobot-rollout` does (`lerobot/rollout/context.py`):
`PreTrainedConfig.from_pretrained` -> `get_policy_class(type).from_pretrained(path, config=...)`
-> `.to(device).eval()`; `make_pre_post_processors(cfg, pretrained_path=path,
pretrained_revision=..., preprocessor_overrides={device_processor, rename_observations})`;
the robot-side processors from `make_default_processors()`; dataset features built from the
rig's observation/action features with `aggregate_pipeline_dataset_features`.

Each `select_action(observation)` is the sync rollout tick (`rollout/strategies/core.py`
`send_next_action` + `rollout/inference/sync.py` `SyncInferenceEngine.get_action`):
robot observation processor -> `build_dataset_frame` -> `prepare_observation_for_inference(obs,
device, task, robot_type)` -> preprocessor -> `policy.select_action` -> postprocessor ->
`make_robot_action` (ordered action keys) -> robot action processor -> `{"<joint>.pos": float}`.
`reset()` resets the policy and both processors at every episode (`SyncInferenceEngine.reset`).

Refused before the campaign (`BadInput`, one line each): a checkpoint that cannot be found or
loaded, an unavailable device, checkpoint features that do not match the rig (camera names,
image shapes, state and action sizes), and, offline, backbone weights torchvision would have
to download (named, with where to put them: `$TORCH_HOME`).

A policy that raises mid-episode surfaces as `faults.DeviceFault` (kind `policy`).

`rig_features` is LeRobot's `robot.observation_features` shape: `{"shoulder_pan.pos": float,
..., "front": (H, W, 3)}`, a rig profile (`rig_observation_features(profile)` builds that shape
without importing torch), or a `Rig` (its `observation_features`, `action_features`, `robot_type`
and calibrated ranges), e.g. a `LeRobotRig`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from contextlib import contextmanager, nullcontext
from copy import copy
from pathlib import Path
from typing import Any

from orchestrator.core.errors import BadInput
from orchestrator.design.protocol import LeRobotPolicySpec
from orchestrator.policies.base import Policy, register_policy
from orchestrator.policies.checkpoint import (
    apply_overrides,
    feature_problems,
    resolve_device,
    state_stats,
    state_units_problems,
)
from orchestrator.rigs.base import Action, Observation, Rig
from orchestrator.rigs.device_fault import DeviceFault, one_line
from orchestrator.rigs.profile import LoadedRig, RigProfile, profile_observation_features

logger = logging.getLogger(__name__)

# What lerobot-rollout passes as robot_type for an SO-101 (`SO101Follower.name` in LeRobot 0.6).
SO101_ROBOT_TYPE = "so_follower"


def rig_observation_features(profile: RigProfile | LoadedRig) -> dict[str, Any]:
    """LeRobot-style observation features of a rig profile: joints (float) and cameras (H, W, 3)."""
    return profile_observation_features(profile.profile if isinstance(profile, LoadedRig) else profile)


def features_of(rig_features: Mapping[str, Any] | RigProfile | LoadedRig | Rig
                ) -> tuple[dict[str, Any], dict[str, Any] | None, Rig | None]:
    """(observation features, action features or None, the rig or None) of what a policy is
    built against: features, a rig profile, or a rig."""
    if isinstance(rig_features, Mapping):
        return dict(rig_features), None, None
    if isinstance(rig_features, (RigProfile, LoadedRig)):
        return rig_observation_features(rig_features), None, None
    return dict(rig_features.observation_features), dict(rig_features.action_features or {}) or None, rig_features


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def _is_local(path: str) -> bool:
    """A Hub repo id is `owner/name`; anything else that looks like a path is a local folder."""
    return path.startswith((".", "/", "~")) or path.rstrip("/").count("/") >= 2


def register_policy_types() -> None:
    """Register every LeRobot policy config type before a checkpoint's config.json is parsed.

    `PreTrainedConfig.from_pretrained` looks the `type` up in the draccus choice registry, which
    is filled only when the policy config modules are imported (`lerobot.policies` imports them
    all) and, for plugins, when `lerobot_policy_*` packages are imported
    (`register_third_party_plugins`, as lerobot's own scripts do). Without this a fresh process
    fails with "Policy type 'act' ... is not registered".
    """
    import lerobot.policies  # noqa: F401 - registers act, diffusion, smolvla, ...
    from lerobot.utils.import_utils import register_third_party_plugins

    register_third_party_plugins()


def resolve_checkpoint(spec: LeRobotPolicySpec, protocol_dir: Path | str) -> tuple[str, bool]:
    """(`path or repo id` to hand LeRobot, is_local). Local paths resolve from the protocol's folder."""
    raw = spec.path
    candidate = (Path(protocol_dir) / Path(raw).expanduser()).resolve()
    if _is_local(raw) or candidate.is_dir():
        return str(candidate), True
    return raw, False


def backbone_weights_problem(cfg: Any, where: str) -> str | None:
    """The one-line message when the config names torchvision backbone weights that are not in the
    torch hub cache (they would be downloaded when the policy is built), else None."""
    weights = getattr(cfg, "pretrained_backbone_weights", None)
    if not weights:
        return None
    import torch

    checkpoints = Path(torch.hub.get_dir()) / "checkpoints"
    filename = None
    try:
        import torchvision

        url = torchvision.models.get_weight(str(weights)).url
        filename = url.rsplit("/", 1)[-1]
    except Exception:  # noqa: BLE001 - unknown enum: still say which weights
        pass
    if filename and (checkpoints / filename).is_file():
        return None
    torch_home = os.environ.get("TORCH_HOME", "")
    return (f"{where}: its config names backbone weights {weights}"
            + (f" ({filename})" if filename else "")
            + f", which torchvision downloads when the policy is built, and they are not in {checkpoints}; "
            f"copy {filename or 'the weights file'} there (or set $TORCH_HOME, now "
            f"{torch_home or 'unset'}, to a folder whose hub/checkpoints/ holds it), or set "
            '"pretrained_backbone_weights": null in the checkpoint\'s config.json '
            "(the checkpoint's own weights replace them when it loads)")


@contextmanager
def transformers_quiet():
    """transformers' weight-loading reports and progress bars off while a checkpoint loads (errors
    still raise). A language policy loads its text encoder from a full model (e.g. `CLIPTextModel`
    from a CLIP checkpoint), and transformers then prints a table of every unused weight: hundreds
    of stderr lines on every `run` and `doctor`. Nothing when transformers is not installed."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        yield
        return
    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def compile_predict_action_chunk(policy: Any, spec: Any) -> bool:
    """lerobot-rollout's `--use_torch_compile`: `predict_action_chunk` wrapped in `torch.compile`
    (`rollout/context.py`; pi0 and pi0.5 compile inside the model, from `compile_model`)."""
    if policy.type in ("pi0", "pi05"):
        return True
    from lerobot.rollout.context import _wrap_predict_action_chunk_with_torch_compile

    return _wrap_predict_action_chunk_with_torch_compile(
        policy, backend=spec.torch_compile_backend, mode=spec.torch_compile_mode)


def _resolve_action_key_order(policy_names: list[str] | None, dataset_names: list[str]) -> list[str]:
    """As `lerobot.rollout.context._resolve_action_key_order`."""
    if not policy_names:
        return dataset_names
    policy_names = list(policy_names)
    if len(policy_names) != len(dataset_names) or set(policy_names) != set(dataset_names):
        logger.warning("policy action_feature_names do not match the rig; using the rig's order")
        return dataset_names
    return policy_names


@register_policy("lerobot")
class LeRobotPolicy(Policy):
    """A LeRobot checkpoint behind the `Policy` interface (see the module docstring)."""

    needs_images = True
    asynchronous = False   # actions computed on the control thread (lerobot-rollout's sync engine)

    @classmethod
    def from_spec(cls, label, spec, protocol=None, rig=None) -> LeRobotPolicy:
        """Checkpoint paths are relative to the protocol's folder; the rig's observation
        features (`Rig.observation_features`) make names and image shapes match the rig."""
        protocol_dir = protocol.path.parent if protocol is not None else Path.cwd()
        task = protocol.protocol.task if protocol is not None else ""
        if rig is None:
            raise BadInput(f"policy {label}: a LeRobot policy needs the rig (for its features)")
        fps = protocol.protocol.episode.fps if protocol is not None else 30
        return cls(spec, protocol_dir, task, rig, fps=fps)

    @staticmethod
    def runs_in_an_engine(spec: Any) -> bool:
        """Whether `spec` is deployed through lerobot-rollout's engines (RTC, or interpolation):
        `policies.rtc.EnginePolicy` runs it, not this class (`policies.factory` picks)."""
        inference = getattr(spec, "inference", None)
        return getattr(inference, "type", "sync") == "rtc" or getattr(spec, "interpolation_multiplier", 1) > 1

    # long-function: __init__: loads a checkpoint in LeRobot's own order (config, device, feature
    # check, weights, processors), each step refusing with one line that names it; left for
    # the owner of this module to split.
    def __init__(self, spec: LeRobotPolicySpec, protocol_dir: Path | str, task: str,
                 rig_features: Mapping[str, Any] | RigProfile | LoadedRig | Rig, *,
                 robot_type: str | None = None, fps: float | None = None):
        if type(self) is LeRobotPolicy and self.runs_in_an_engine(spec):
            raise ValueError("an RTC or interpolated policy is an EnginePolicy (policies.factory builds it)")
        self.spec = spec
        self.task = getattr(spec, "task", None) or task or ""  # a task per policy, else the protocol's
        self.path, self.local = resolve_checkpoint(spec, protocol_dir)
        where = f"policy checkpoint {spec.path}"
        self.where = where

        obs_features, act_features, rig = features_of(rig_features)
        if robot_type is None:
            robot_type = (rig.robot_type if rig is not None else None) or SO101_ROBOT_TYPE
        self.robot_type = robot_type

        if self.local and not (Path(self.path) / "config.json").is_file():
            raise BadInput(f"{where}: no config.json in {self.path} (expected a LeRobot checkpoint folder "
                           "saved with save_pretrained, e.g. .../checkpoints/last/pretrained_model)")

        if not self.local and _offline():
            from huggingface_hub import try_to_load_from_cache

            cached = try_to_load_from_cache(self.path, "config.json", revision=spec.revision)
            if not isinstance(cached, str):
                raise BadInput(f"{where}: not in the local Hugging Face cache and HF_HUB_OFFLINE=1: download it "
                               f"once online (`hf download {spec.path}"
                               f"{' --revision ' + spec.revision if spec.revision else ''}`) or use a local folder")

        import torch
        from lerobot.configs.policies import PreTrainedConfig

        register_policy_types()
        try:
            cfg = PreTrainedConfig.from_pretrained(self.path, revision=spec.revision)
        except Exception as exc:  # noqa: BLE001 - one line with what to do
            hint = ""
            if not self.local:
                hint = (f"; it is not in the local Hugging Face cache{' and HF_HUB_OFFLINE=1' if _offline() else ''}"
                        f": download it once online (`hf download {spec.path}"
                        f"{' --revision ' + spec.revision if spec.revision else ''}`) or use a local folder")
            raise BadInput(f"{where}: cannot load its config: {one_line(exc)}{hint}") from None
        cfg.pretrained_path = self.path

        apply_overrides(cfg, spec, where)
        device = resolve_device(spec.device, getattr(cfg, "device", None), where)
        cfg.device = device
        self.device = torch.device(device)

        self.rename_map = dict(getattr(spec, "rename_map", None) or {})
        problems, self.warnings = feature_problems(cfg, obs_features, act_features, where, self.rename_map)
        if problems:
            raise BadInput(problems)
        for line in self.warnings:
            logger.warning(line)
        backbone = backbone_weights_problem(cfg, where)
        if backbone and _offline():
            raise BadInput(backbone)
        with transformers_quiet():
            self._load(cfg, spec, device, backbone, obs_features, act_features)
        units = state_units_problems(state_stats(self.preprocessor),
                                     [k for k in obs_features if obs_features[k] is float], rig, where)
        if units:
            raise BadInput(units)
        self.warmup_s = self._warm_up(obs_features)

    def _load(self, cfg, spec, device, backbone, obs_features, act_features) -> None:
        """The policy, its processors and the rollout features, as lerobot-rollout builds them."""
        where = self.where
        from lerobot.datasets import aggregate_pipeline_dataset_features, create_initial_features
        from lerobot.policies import get_policy_class, make_pre_post_processors
        from lerobot.processor import make_default_processors
        from lerobot.processor.relative_action_processor import RelativeActionsProcessorStep
        from lerobot.utils.feature_utils import combine_feature_dicts

        try:
            policy = get_policy_class(cfg.type).from_pretrained(self.path, config=cfg, revision=spec.revision)
        except Exception as exc:  # noqa: BLE001
            if backbone:
                raise BadInput(backbone) from None
            raise BadInput(f"{where}: cannot load the policy: {one_line(exc)}") from None
        self.prepare_deployment(policy, cfg)
        policy = policy.to(device)
        policy.eval()
        if getattr(spec, "use_torch_compile", False):
            compile_predict_action_chunk(policy, spec)
        try:
            pre, post = make_pre_post_processors(
                policy_cfg=cfg, pretrained_path=self.path, pretrained_revision=spec.revision,
                dataset_stats=None,
                preprocessor_overrides={"device_processor": {"device": device},
                                        "rename_observations_processor": {"rename_map": self.rename_map}})
        except Exception as exc:  # noqa: BLE001
            raise BadInput(f"{where}: cannot load its pre/post processors: {one_line(exc)}") from None
        if not self.asynchronous and any(isinstance(step, RelativeActionsProcessorStep) and step.enabled
                                         for step in getattr(pre, "steps", ())):
            raise BadInput(f"{where}: uses relative actions, which lerobot-rollout's synchronous "
                           "inference does not support")

        teleop_action_processor, robot_action_processor, robot_observation_processor = make_default_processors()
        obs_hw = {k: v for k, v in obs_features.items()
                  if isinstance(v, tuple) or (v is float and k.endswith((".pos", ".vel")))}
        act_hw = {k: v for k, v in (act_features or {k: float for k in obs_hw if obs_hw[k] is float}).items()
                  if k.endswith((".pos", ".vel"))}
        action_ds = aggregate_pipeline_dataset_features(
            pipeline=teleop_action_processor, initial_features=create_initial_features(action=act_hw),
            use_videos=True)
        observation_ds = aggregate_pipeline_dataset_features(
            pipeline=robot_observation_processor,
            initial_features=create_initial_features(observation=obs_hw), use_videos=True)
        self.dataset_features = combine_feature_dicts(action_ds, observation_ds)
        names = getattr(cfg, "action_feature_names", None)
        self.ordered_action_keys = _resolve_action_key_order(list(names) if names else None, list(act_hw))

        self.config = cfg
        self.policy = policy
        self.preprocessor = pre
        self.postprocessor = post
        self.robot_observation_processor = robot_observation_processor
        self.robot_action_processor = robot_action_processor
        self._episode_task = self.task

    def prepare_deployment(self, policy: Any, cfg: Any) -> None:
        """Settings of the loaded policy for how it is deployed, before it moves to its device
        (nothing for sync inference; RTC sets its config here, as lerobot-rollout does)."""

    def _warm_up(self, obs_features: Mapping[str, Any]) -> float:
        """One forward pass on a still observation shaped like the rig's (zeros), then a reset:
        the first episode does not pay for CUDA/kernel warm-up, and a checkpoint that cannot run
        on this rig's inputs is refused before the arm is connected. Returns its seconds."""
        import time

        import numpy as np

        still = {k: (np.zeros(v, dtype=np.uint8) if isinstance(v, tuple) else 0.0)
                 for k, v in obs_features.items()}
        self._still = still
        start = time.perf_counter()
        try:
            self._step(still)
        except Exception as exc:  # noqa: BLE001 - what lerobot-rollout would hit at its first step
            raise BadInput(f"{self.where}: fails on an observation shaped like the rig's: {one_line(exc)}") from None
        finally:
            self.reset()
        return time.perf_counter() - start

    @property
    def action_chunk_steps(self) -> int:
        """The actions one inference gives (LeRobot's `n_action_steps`; 1 for a config without)."""
        return int(getattr(self.config, "n_action_steps", 1) or 1)

    def step_times(self, steps: int) -> list[float]:
        """Seconds of each of `steps` rollout ticks (observation processing, inference when the
        action queue is empty, post-processing) on the still observation of the warm-up, then a
        reset: what `doctor` sets against the protocol's control period."""
        import time

        times = []
        try:
            for _ in range(steps):
                start = time.perf_counter()
                self._step(self._still)
                times.append(time.perf_counter() - start)
        finally:
            self.reset()
        return times

    # ------------------------------------------------------------ Policy protocol
    def reset(self, context: Any = None) -> None:
        """Per episode, as `SyncInferenceEngine.reset`: policy, preprocessor, postprocessor."""
        task = getattr(context, "task", None)
        self._episode_task = getattr(self.spec, "task", None) or task or self.task
        self.policy.reset()
        self.preprocessor.reset()
        self.postprocessor.reset()

    def select_action(self, observation: Observation) -> Action:
        try:
            return self._step(observation)
        except Exception as exc:  # noqa: BLE001 - any failure inside the policy pipeline
            raise DeviceFault.policy(exc) from exc

    def close(self) -> None:
        self.policy = None
        self.preprocessor = self.postprocessor = None

    # ------------------------------------------------------------ the rollout tick
    def _step(self, obs_raw: Observation) -> Action:
        import torch
        from lerobot.policies.utils import make_robot_action, prepare_observation_for_inference
        from lerobot.utils.constants import OBS_STR
        from lerobot.utils.feature_utils import build_dataset_frame

        obs_processed = self.robot_observation_processor(obs_raw)
        obs_frame = build_dataset_frame(self.dataset_features, obs_processed, prefix=OBS_STR)
        observation = copy(obs_frame)
        autocast = (torch.autocast(device_type=self.device.type)
                    if self.device.type == "cuda" and getattr(self.config, "use_amp", False) else nullcontext())
        with torch.inference_mode(), autocast:
            observation = prepare_observation_for_inference(
                observation, self.device, self._episode_task, self.robot_type)
            observation = self.preprocessor(observation)
            action = self.policy.select_action(observation)
            action = self.postprocessor(action)
        action_tensor = action.squeeze(0).cpu()
        action_dict = make_robot_action(action_tensor, self.dataset_features)
        ordered = torch.tensor([action_dict[k] for k in self.ordered_action_keys])
        action_dict = {k: ordered[i].item() for i, k in enumerate(self.ordered_action_keys)}
        processed = self.robot_action_processor((action_dict, obs_raw))
        return {k: float(v) for k, v in processed.items()}
