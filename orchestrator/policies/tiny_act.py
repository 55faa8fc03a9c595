"""A tiny random ACT checkpoint for a rehearsal, built locally (nothing is downloaded):

    uv run --extra lerobot python -m orchestrator.policies.tiny_act checkpoints/tiny_act \\
        [--rig hardware/so101_twin.yaml]

It is saved the way LeRobot's training saves a checkpoint (`policy.save_pretrained` and both
processor pipelines' `save_pretrained` into one folder), for the rig profile's cameras (names and
shapes) and the SO-101's six joints, with `pretrained_backbone_weights=None` so no ImageNet
weights are fetched. Its weights are random: it moves the arm without purpose, which is what a
rehearsal of the LeRobot path needs (loading, the warm-up pass, its step time against the
protocol's period, the bus and the cameras), not a policy to compare. Its statistics centre it on
the profile's rest pose (`make_act_checkpoint`), so it moves the arm around where it rests. `protocols/twin_rehearsal.yaml`
runs it as policy B on the twin.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

STATE_DIM = 6
# The rest pose of the shipped SO-101 profiles (hardware/so101_twin.yaml), in degrees (gripper 0-100).
SO101_REST = (0.0, -94.0, 90.0, 50.0, 0.0, 30.0)
SPREAD = 10.0   # the statistics' std, degrees: the random actions stay within a few tens of degrees
DEFAULT_RIG = Path("hardware/so101_twin.yaml")


def policy_features(cameras: dict[str, tuple[int, int]], state_dim: int, action_dim: int) -> tuple[dict, dict]:
    """LeRobot input and output features of an SO-101 policy: state, one image per camera, action."""
    from lerobot.configs.types import FeatureType, PolicyFeature

    inputs = {"observation.state": PolicyFeature(FeatureType.STATE, (state_dim,))}
    for name, (h, w) in cameras.items():
        inputs[f"observation.images.{name}"] = PolicyFeature(FeatureType.VISUAL, (3, h, w))
    return inputs, {"action": PolicyFeature(FeatureType.ACTION, (action_dim,))}


def save_with_processors(policy: Any, cfg: Any, stats: dict, cameras: Any, directory: Path) -> Path:
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
                        center: Sequence[float] | None = None) -> Path:
    """Save a random ACT policy for `cameras` {name: (height, width)} into `directory`: one encoder
    and one decoder layer of width 32, a chunk of `chunk_size` actions, all of them executed. Its
    state and action statistics are those of a recording around `center` (default `SO101_REST`,
    six joints; zeros for other sizes) with std `SPREAD` degrees: its actions stay near the rest
    pose, as a trained policy's first actions stay near the pose it starts from, and `doctor`'s
    checks of a checkpoint against the arm (`policies.arm_fit`) pass it."""
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

    def centred(dim: int) -> dict:
        mean = list(center or SO101_REST) if dim == len(center or SO101_REST) else [0.0] * dim
        return {"mean": torch.tensor(mean, dtype=torch.float32), "std": torch.full((dim,), SPREAD)}

    stats = {"observation.state": centred(state_dim), "action": centred(action_dim)}
    return save_with_processors(policy, cfg, stats, cameras, directory)


def rig_cameras(rig_path: Path) -> dict[str, tuple[int, int]]:
    """{camera: (height, width)} of a rig profile: the images the checkpoint will be fed."""
    from orchestrator.rigs.profile import load_rig

    profile = load_rig(rig_path).profile
    return {name: (int(spec.height), int(spec.width)) for name, spec in profile.cameras.items()}


def rig_rest(rig_path: Path) -> list[float] | None:
    """The rig profile's rest pose, joint by joint, when it gives all six (else None)."""
    from orchestrator.rigs.profile import load_rig

    rest = dict(load_rig(rig_path).profile.rest_pose)
    keys = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
    return [float(rest[f"{k}.pos"]) for k in keys] if all(f"{k}.pos" in rest for k in keys) else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m orchestrator.policies.tiny_act",
                                     description=__doc__.split("\n\n")[0].rstrip(":"))
    parser.add_argument("directory", type=Path, help="where to save the checkpoint (created)")
    parser.add_argument("--rig", type=Path, default=DEFAULT_RIG,
                        help=f"the rig profile whose cameras it takes (default {DEFAULT_RIG})")
    args = parser.parse_args(argv)
    from orchestrator.core.errors import BadInput, OrchestratorError
    from orchestrator.core.extras import require_extra

    try:
        require_extra("lerobot", "a tiny ACT checkpoint")
        cameras = rig_cameras(args.rig)
        if args.directory.exists() and any(args.directory.iterdir()):
            raise BadInput(f"{args.directory}: not empty; choose a new folder")
        make_act_checkpoint(args.directory, cameras, center=rig_rest(args.rig))
    except OrchestratorError as exc:
        for line in str(exc).splitlines():
            print(f"tiny_act: {line}", file=sys.stderr)
        return exc.exit_code
    shapes = ", ".join(f"{name} {w}x{h}" for name, (h, w) in cameras.items())
    print(f"tiny random ACT saved in {args.directory} (cameras {shapes}, 6 joints; for rehearsals only)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
