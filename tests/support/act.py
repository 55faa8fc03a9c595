"""A tiny random-init ACT checkpoint, saved with its pre/post processors (offline), built by the
product's `orchestrator.policies.tiny_act` (the README's rehearsal checkpoint): small enough to
load in about a second on a CPU. `policy_features` and `save_with_processors` are re-exported
for the tests that build other policies the same way.
"""

from __future__ import annotations

from pathlib import Path

from orchestrator.policies.tiny_act import STATE_DIM, policy_features, save_with_processors

__all__ = ["STATE_DIM", "policy_features", "save_with_processors"]

TWIN_CAMERA = (96, 128)   # (height, width): the twin tests' cameras (tests/test_twin_campaign.py)
SIM_CAMERA = (240, 320)   # hardware/sim.yaml's cameras
# The checkpoints the fresh-process tests load (conftest `saved_acts`): name -> cameras.
SAVED_ACT_CAMERAS = {"sim": {"front": SIM_CAMERA, "wrist": SIM_CAMERA},
                     "twin": {"front": TWIN_CAMERA, "wrist": TWIN_CAMERA}}


def make_act_checkpoint(directory: Path, cameras: dict[str, tuple[int, int]], *, state_dim: int = STATE_DIM,
                        action_dim: int = STATE_DIM, chunk_size: int = 4, seed: int = 0,
                        backbone_weights: str | None = None) -> Path:
    """Save a random ACT policy for `cameras` {name: (height, width)} into `directory` (the
    product's `orchestrator.policies.tiny_act`, the README's rehearsal checkpoint);
    `backbone_weights`: what a checkpoint trained from ImageNet weights says in its config."""
    from orchestrator.policies.tiny_act import make_act_checkpoint as make

    directory = make(directory, cameras, state_dim=state_dim, action_dim=action_dim, chunk_size=chunk_size, seed=seed)
    if backbone_weights:
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


def restat_checkpoint(directory: Path, cameras: dict[str, tuple[int, int]], **features: dict[str, list[float]]) -> Path:
    """Save the checkpoint in `directory` again with other normaliser statistics: `features`
    maps `observation_state` / `action` to {mean, std, min, max: six values} (a checkpoint
    recorded in other units, say), the images' statistics as `save_with_processors` gives them."""
    import torch
    from lerobot.configs.policies import PreTrainedConfig
    from lerobot.policies.factory import make_pre_post_processors

    cfg = PreTrainedConfig.from_pretrained(str(directory))
    stats = {key.replace("_", ".", 1) if key.startswith("observation") else key:
             {name: torch.tensor(values, dtype=torch.float32) for name, values in columns.items()}
             for key, columns in features.items()}
    for name in cameras:
        stats[f"observation.images.{name}"] = {"mean": torch.full((3, 1, 1), 0.5), "std": torch.full((3, 1, 1), 0.25)}
    pre, post = make_pre_post_processors(cfg, dataset_stats=stats)
    pre.save_pretrained(directory)
    post.save_pretrained(directory)
    return directory


def poison_checkpoint(directory: Path) -> Path:
    """The checkpoint in `directory` with its action head's bias NaN: every action it gives is NaN."""
    from safetensors.torch import load_file, save_file

    weights = load_file(str(Path(directory) / "model.safetensors"))
    weights["model.action_head.bias"] = weights["model.action_head.bias"] * float("nan")
    save_file(weights, str(Path(directory) / "model.safetensors"), metadata={"format": "pt"})
    return directory
