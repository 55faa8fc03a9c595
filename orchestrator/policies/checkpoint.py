"""Checks and settings of a LeRobot checkpoint against a rig, as `lerobot-rollout` applies them.

- `resolve_device`: the protocol's `device`, else the checkpoint's own (`config.device`) when
  it is available here, else what is (`auto_select_torch_device`), as `RolloutConfig` does.
- `apply_overrides`: `compile_model` = the protocol's `use_torch_compile` (as lerobot-rollout
  sets it from `--use_torch_compile`, default False), then the protocol's `n_action_steps` / `temporal_ensemble_coeff`, validated
  by the config class's own `__post_init__`.
- `feature_problems`: (problems, warnings). Cameras follow lerobot-rollout
  (`rollout/context.py`): the policy's camera set and the rig's may each be a subset of the
  other; neither a subset is refused (lerobot-rollout raises). A camera the policy expects and
  the rig lacks, a rig camera the policy does not use, and an image size other than the training
  size are warnings: whether the policy copes is then decided by the warm-up forward pass, which
  refuses the checkpoint if it fails (what lerobot-rollout would do at its first step).
- the checkpoint's statistics, warm-up action and first action against the arm: `policies.arm_fit`.
- `parameter_bytes`, `memory_problem`: what policies take on an accelerator (doctor).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from orchestrator.core.errors import BadInput
from orchestrator.rigs.device_fault import one_line

logger = logging.getLogger(__name__)

def resolve_device(requested: str | None, checkpoint_device: str | None, where: str) -> str:
    import torch
    from lerobot.utils.device_utils import auto_select_torch_device, is_torch_device_available

    if requested:
        try:
            kind = torch.device(requested).type
        except (RuntimeError, TypeError) as exc:
            raise BadInput(f"{where}: device {requested!r}: {one_line(exc)}") from None
        if kind in ("cuda", "mps") and not is_torch_device_available(kind):
            raise BadInput(f"{where}: device {requested!r} requested but {kind.upper()} is not available "
                           "here (use device: cpu, or leave device out to use what is available)")
        return requested
    if checkpoint_device:
        try:
            if is_torch_device_available(torch.device(checkpoint_device).type):
                return checkpoint_device
        except (RuntimeError, TypeError):
            pass
    return auto_select_torch_device().type


def apply_overrides(cfg: Any, spec: Any, where: str) -> None:
    if hasattr(cfg, "compile_model"):   # as lerobot-rollout: the model compiles with --use_torch_compile
        cfg.compile_model = bool(getattr(spec, "use_torch_compile", False))
    changed = False
    for name in ("n_action_steps", "temporal_ensemble_coeff"):
        value = getattr(spec, name, None)
        if value is None:
            continue
        if not hasattr(cfg, name):
            raise BadInput(f"{where}: {name} is not a setting of {cfg.type} policies")
        setattr(cfg, name, value)
        changed = True
    if changed:
        try:
            cfg.__post_init__()
        except Exception as exc:  # noqa: BLE001 - the config class says what is wrong
            raise BadInput(f"{where}: {one_line(exc)}") from None


def _cameras(observation_features: Mapping[str, Any], rename_map: Mapping[str, str] | None) -> dict[str, tuple]:
    cameras = {}
    for k, v in observation_features.items():
        if isinstance(v, tuple):
            renamed = (rename_map or {}).get(f"observation.images.{k}", f"observation.images.{k}")
            cameras[renamed.removeprefix("observation.images.")] = tuple(v)
    return cameras


def feature_problems(cfg: Any, observation_features: Mapping[str, Any],
                     action_features: Mapping[str, Any] | None, where: str,
                     rename_map: Mapping[str, str] | None = None) -> tuple[list[str], list[str]]:
    """(problems, warnings) between the checkpoint's features and the rig's (module docstring).

    `rename_map` is lerobot-rollout's `--rename_map`: the rig's cameras are matched under their
    new names."""
    from lerobot.configs import FeatureType

    problems: list[str] = []
    warnings: list[str] = []
    state_keys = [k for k, v in observation_features.items() if v is float and k.endswith((".pos", ".vel"))]
    cameras = _cameras(observation_features, rename_map)
    action_keys = [k for k in (action_features or {k: float for k in state_keys}) if k.endswith((".pos", ".vel"))]
    have = ", ".join(f"{n} ({s[1]}x{s[0]})" for n, s in cameras.items()) or "no cameras"
    wanted: dict[str, tuple] = {}
    for key, ft in cfg.input_features.items():
        shape = tuple(ft.shape)
        if ft.type == FeatureType.VISUAL:
            cam = key.removeprefix("observation.images.").removeprefix("observation.image") or "image"
            wanted[cam] = shape
        elif ft.type == FeatureType.STATE:
            if shape != (len(state_keys),):
                problems.append(f"{where}: expects a state of {shape[0] if shape else shape} values ({key}) "
                                f"but the rig gives {len(state_keys)} ({', '.join(state_keys)})")
        elif ft.type == FeatureType.ENV:
            problems.append(f"{where}: expects {key} {shape}, which a real rig does not provide")
        elif ft.type != FeatureType.LANGUAGE:
            problems.append(f"{where}: expects input {key} ({ft.type.value}, {shape}), "
                            "which the rig does not provide")
    missing = [c for c in wanted if c not in cameras]
    extra = [c for c in cameras if c not in wanted]
    if missing and extra:
        problems.append(f"{where}: expects cameras {', '.join(wanted)} but the rig has {have}: neither set "
                        "contains the other (lerobot-rollout refuses this); map the names with rename_map: "
                        '{"observation.images.<rig camera>": "observation.images.<policy camera>"}')
    else:
        for cam in missing:
            warnings.append(f"{where}: expects camera {cam!r}, which the rig does not have ({have}); "
                            "it runs only if the policy accepts missing cameras")
        for cam in extra:
            warnings.append(f"{where}: does not use the rig's camera {cam!r} (it is still recorded)")
    for cam, shape in wanted.items():
        if cam in cameras and len(shape) == 3 and (shape[1], shape[2]) != cameras[cam][:2]:
            h, w = cameras[cam][:2]
            warnings.append(f"{where}: camera {cam!r} is {w}x{h} on the rig but the policy was trained "
                            f"on {shape[2]}x{shape[1]}; it runs only if the policy resizes its inputs")
    for key, ft in cfg.output_features.items():
        if ft.type == FeatureType.ACTION and tuple(ft.shape) != (len(action_keys),):
            problems.append(f"{where}: outputs {ft.shape[0]} action values ({key}) but the rig takes "
                            f"{len(action_keys)} ({', '.join(action_keys)})")
    return problems, warnings


def parameter_bytes(policy: Any) -> int:
    """Bytes of a torch module's parameters and buffers."""
    total = sum(p.numel() * p.element_size() for p in policy.parameters())
    return total + sum(b.numel() * b.element_size() for b in policy.buffers())


def memory_problem(sizes: Mapping[str, int], device: str, free_bytes: int | None) -> str | None:
    """All policies stay loaded on `device` for the whole campaign: their weights together must fit
    in what the device has free (a lower bound: activations come on top)."""
    total = sum(sizes.values())
    if free_bytes is None or total <= free_bytes:
        return None
    gib = 1 << 30
    each = ", ".join(f"{label} {size / gib:.1f} GiB" for label, size in sizes.items())
    return (f"policies {each}: {total / gib:.1f} GiB of weights together on {device}, which has "
            f"{free_bytes / gib:.1f} GiB free; use a larger card, half precision checkpoints, or put one "
            "policy on another device (device: in the protocol)")
