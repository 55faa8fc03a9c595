"""LeRobot's own rollout features, built the way `lerobot-rollout` builds them: the reference
side of the adapter-equality test and of bench/control_loop.py's LeRobot loop."""

from __future__ import annotations


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
