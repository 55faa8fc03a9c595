"""lerobot-rollout's own setup, for comparing the adapter with LeRobot's code (not a copy of it).

`lerobot_rollout_context(robot_config, checkpoint, task, fps)` is LeRobot's
`build_rollout_context(RolloutConfig(...))`: it loads the policy, builds the processors and the
dataset features, connects the robot (the fake bus, video-file cameras) and creates the sync
inference engine, exactly as `lerobot-rollout --strategy.type=base` does.

`rollout_features(robot)` is kept for bench/control_loop.py's policy-free loop only (a
transcription of the features part of that builder; the tests use the builder itself).
"""

from __future__ import annotations


def lerobot_rollout_context(robot_config, checkpoint, task: str, fps: float, device: str = "cpu"):
    from threading import Event

    from lerobot.configs.policies import PreTrainedConfig
    from lerobot.rollout.configs import RolloutConfig
    from lerobot.rollout.context import build_rollout_context

    policy_cfg = PreTrainedConfig.from_pretrained(str(checkpoint))
    policy_cfg.pretrained_path = str(checkpoint)
    cfg = RolloutConfig(robot=robot_config, policy=policy_cfg, fps=fps, task=task, device=device)
    return build_rollout_context(cfg, Event())


def rollout_features(robot):
    """(teleop, robot-action, robot-observation processors, dataset features, action keys)."""
    from lerobot.datasets import aggregate_pipeline_dataset_features, create_initial_features
    from lerobot.processor import make_default_processors
    from lerobot.utils.feature_utils import combine_feature_dicts

    teleop_p, action_p, obs_p = make_default_processors()
    obs_hw = {k: v for k, v in robot.observation_features.items()
              if isinstance(v, tuple) or (v is float and k.endswith((".pos", ".vel")))}
    act_hw = {k: v for k, v in robot.action_features.items() if k.endswith((".pos", ".vel"))}
    features = combine_feature_dicts(
        aggregate_pipeline_dataset_features(pipeline=teleop_p, initial_features=create_initial_features(action=act_hw),
                                            use_videos=True),
        aggregate_pipeline_dataset_features(pipeline=obs_p, initial_features=create_initial_features(observation=obs_hw),
                                            use_videos=True))
    return teleop_p, action_p, obs_p, features, list(act_hw)
