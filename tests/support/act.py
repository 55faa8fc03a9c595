"""A tiny random-init ACT checkpoint, saved with its pre/post processors (test-only, offline).

Built the way a trained checkpoint is saved (`policy.save_pretrained` + both processor
pipelines' `save_pretrained` into the same folder), with `pretrained_backbone_weights=None` so
nothing is downloaded, and small enough to load in about a second on a CPU.
"""

from __future__ import annotations

from pathlib import Path

STATE_DIM = 6
TWIN_CAMERA = (96, 128)   # (height, width): the twin tests' cameras (tests/test_twin_campaign.py)
SIM_CAMERA = (240, 320)   # hardware/sim.yaml's cameras
# The checkpoints the fresh-process tests load (conftest `saved_acts`): name -> cameras.
SAVED_ACT_CAMERAS = {"sim": {"front": SIM_CAMERA, "wrist": SIM_CAMERA},
                     "twin": {"front": TWIN_CAMERA, "wrist": TWIN_CAMERA}}


def policy_features(cameras: dict[str, tuple[int, int]], state_dim: int, action_dim: int) -> tuple[dict, dict]:
    """LeRobot input and output features of an SO-101 policy: state, one image per camera, action."""
    from lerobot.configs.types import FeatureType, PolicyFeature

    inputs = {"observation.state": PolicyFeature(FeatureType.STATE, (state_dim,))}
    for name, (h, w) in cameras.items():
        inputs[f"observation.images.{name}"] = PolicyFeature(FeatureType.VISUAL, (3, h, w))
    return inputs, {"action": PolicyFeature(FeatureType.ACTION, (action_dim,))}


def save_with_processors(policy, cfg, stats: dict, cameras, directory: Path) -> Path:
    """Save `policy` and its pre/post processors (normalised with `stats`, plus mid-grey image
    statistics per camera) into `directory`, as LeRobot's training does."""
    import torch
    from lerobot.policies.factory import make_pre_post_processors

    for name in cameras:
        stats[f"observation.images.{name}"] = {"mean": torch.full((3, 1, 1), 0.5),
                                               "std": torch.full((3, 1, 1), 0.25)}
    pre, post = make_pre_post_processors(cfg, dataset_stats=stats)
    directory = Path(directory)
    policy.save_pretrained(directory)
    pre.save_pretrained(directory)
    post.save_pretrained(directory)
    return directory


def make_act_checkpoint(directory: Path, cameras: dict[str, tuple[int, int]], *, state_dim: int = STATE_DIM,
                        action_dim: int = STATE_DIM, chunk_size: int = 4, seed: int = 0,
                        backbone_weights: str | None = None) -> Path:
    """Save a random ACT policy for `cameras` {name: (height, width)} into `directory`."""
    import torch
    from lerobot.policies.act.configuration_act import ACTConfig
    from lerobot.policies.act.modeling_act import ACTPolicy

    inputs, outputs = policy_features(cameras, state_dim, action_dim)
    cfg = ACTConfig(
        input_features=inputs,
        output_features=outputs,
        pretrained_backbone_weights=None, dim_model=32, n_heads=2, dim_feedforward=64,
        n_encoder_layers=1, n_decoder_layers=1, chunk_size=chunk_size, n_action_steps=chunk_size,
        use_vae=False, device="cpu")
    torch.manual_seed(seed)
    policy = ACTPolicy(cfg)
    stats = {"observation.state": {"mean": torch.zeros(state_dim), "std": torch.full((state_dim,), 40.0)},
             "action": {"mean": torch.zeros(action_dim), "std": torch.full((action_dim,), 40.0)}}
    directory = save_with_processors(policy, cfg, stats, cameras, directory)
    if backbone_weights:  # what a checkpoint trained from ImageNet weights says in its config
        import json

        cfg_path = directory / "config.json"
        data = json.loads(cfg_path.read_text())
        data["pretrained_backbone_weights"] = backbone_weights
        cfg_path.write_text(json.dumps(data, indent=4))
    return directory


def save_acts_in_subprocess(checkpoints: dict[Path, dict[str, tuple[int, int]]]) -> None:
    """`make_act_checkpoint(directory, cameras)` for each item, by one separate interpreter: a
    checkpoint built in the test's own interpreter would hide a missing import (building one
    registers LeRobot's `act` config type, which a fresh `orchestrator` must do on its own)."""
    import json
    import subprocess
    import sys

    code = ("import sys, json; sys.path.insert(0, sys.argv[1]); from support.act import make_act_checkpoint; "
            "[make_act_checkpoint(d, {k: tuple(v) for k, v in c.items()}) for d, c in json.loads(sys.argv[2])]")
    tests = Path(__file__).resolve().parents[1]
    subprocess.run([sys.executable, "-c", code, str(tests), json.dumps([[str(d), c] for d, c in checkpoints.items()])],
                   check=True, capture_output=True, timeout=300)
    for directory in checkpoints:
        assert (Path(directory) / "config.json").is_file(), directory
