"""The LeRobot policy adapter: a tiny random-init ACT checkpoint (built here, offline) runs on
the fake SO-101 and gives exactly the actions LeRobot's own rollout pipeline computes."""

from __future__ import annotations

import builtins
from types import SimpleNamespace

import numpy as np
import pytest

from fakes import feetech
from support.act import make_act_checkpoint
from fakes.rigs import CAMERAS, write_rig, write_videos
from orchestrator.errors import BadInput
from orchestrator.faults import DeviceFault
from orchestrator.policies.base import Policy
from orchestrator.protocol import LeRobotPolicySpec
from orchestrator.rigs.profile import STATE_KEYS, load_rig

pytest.importorskip("lerobot")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return make_act_checkpoint(tmp_path_factory.mktemp("ckpt") / "act", CAMERAS, chunk_size=3)


@pytest.fixture
def fake_rig(tmp_path, monkeypatch):
    monkeypatch.setattr(builtins, "input", lambda *a: pytest.fail("input() called"))
    port = str(tmp_path / "ttyACM0")
    open(port, "w").close()
    arm = feetech.FakeFeetechArm(port, calibration=feetech.default_calibration())
    feetech.install(monkeypatch, arm)
    feetech.write_calibration_file(tmp_path / "cal", "lab_arm")
    rig_path = write_rig(tmp_path / "rig.yaml", port, tmp_path / "cal", write_videos(tmp_path))
    from orchestrator.rigs.lerobot import LeRobotRig

    rig = LeRobotRig(load_rig(rig_path), rest_speed_deg_s=600.0)
    yield rig
    rig.disconnect()


def spec(path, **kw):
    return LeRobotPolicySpec(type="lerobot", path=str(path), **kw)


def lerobot_rollout_actions(checkpoint, robot, task, observations):
    """What `lerobot-rollout` (sync inference, base strategy) sends for these observations:
    its loading code path, `SyncInferenceEngine` and `send_next_action`, fed the same frames."""
    from lerobot.configs.policies import PreTrainedConfig
    from lerobot.policies import get_policy_class, make_pre_post_processors
    from lerobot.rollout.inference.sync import SyncInferenceEngine
    from lerobot.rollout.strategies.core import send_next_action
    from lerobot.utils.action_interpolator import ActionInterpolator

    cfg = PreTrainedConfig.from_pretrained(str(checkpoint))
    cfg.pretrained_path = str(checkpoint)
    policy = get_policy_class(cfg.type).from_pretrained(str(checkpoint), config=cfg).to("cpu")
    policy.eval()
    pre, post = make_pre_post_processors(
        policy_cfg=cfg, pretrained_path=str(checkpoint), pretrained_revision=None, dataset_stats=None,
        preprocessor_overrides={"device_processor": {"device": "cpu"},
                                "rename_observations_processor": {"rename_map": {}}})
    from support.rollout import rollout_features

    teleop_p, action_p, obs_p, features, action_keys = rollout_features(robot)
    engine = SyncInferenceEngine(policy, pre, post, features, action_keys, task, "cpu", robot.robot_type)
    sent: list[dict] = []
    ctx = SimpleNamespace(policy=SimpleNamespace(inference=engine),
                          data=SimpleNamespace(dataset_features=features, ordered_action_keys=action_keys),
                          processors=SimpleNamespace(robot_action_processor=action_p),
                          hardware=SimpleNamespace(robot_wrapper=SimpleNamespace(send_action=sent.append)))
    engine.reset()
    interpolator = ActionInterpolator(multiplier=1)
    for obs in observations:
        send_next_action(obs_p(obs), obs, ctx, interpolator)
    return sent


def test_act_on_the_fake_arm_matches_lerobot_rollout(checkpoint, fake_rig, tmp_path):
    from orchestrator.policies.lerobot import LeRobotPolicy

    rig = fake_rig
    rig.connect()
    # relative to the protocol's folder, as a protocol would write it
    rel = "./" + str(checkpoint.relative_to(checkpoint.parent.parent))
    policy = LeRobotPolicy(spec(rel), checkpoint.parent.parent, "Pick up the cube", rig)
    assert isinstance(policy, Policy) and policy.needs_images
    assert policy.robot_type == "so_follower" and policy.ordered_action_keys == list(STATE_KEYS)
    policy.reset(SimpleNamespace(task="Pick up the cube"))
    observations, actions = [], []
    for _ in range(7):  # chunk 3: model calls at steps 0, 3, 6; the queue in between
        obs = rig.observe()
        action = policy.select_action(obs)
        observations.append(obs)
        actions.append(action)
        rig.act(action)
    assert all(set(a) == set(STATE_KEYS) and all(isinstance(v, float) for v in a.values()) for a in actions)
    assert actions == lerobot_rollout_actions(checkpoint, rig.robot, "Pick up the cube", observations)

    # reset() clears the action queue: the same frames give the same actions again
    policy.reset(SimpleNamespace(task="Pick up the cube"))
    assert [policy.select_action(o) for o in observations] == actions
    policy.close()


def test_policy_exception_mid_episode_is_a_device_fault(checkpoint):
    from orchestrator.policies.lerobot import LeRobotPolicy, rig_observation_features
    from orchestrator.rigs.profile import RigProfile

    profile = RigProfile.model_validate({"robot": {"type": "sim_so101"}, "cameras": {
        n: {"type": "sim", "height": h, "width": w, "fps": 30} for n, (h, w) in CAMERAS.items()}})
    policy = LeRobotPolicy(spec(checkpoint), "/", "", rig_observation_features(profile))
    policy.reset(None)
    obs = {k: 0.0 for k in STATE_KEYS} | {n: np.zeros((h, w, 3), np.uint8) for n, (h, w) in CAMERAS.items()}
    assert set(policy.select_action(obs)) == set(STATE_KEYS)

    def boom(batch):
        raise RuntimeError("CUDA error: an illegal memory access was encountered\nmore detail")

    policy.reset(None)
    policy.policy.select_action = boom
    with pytest.raises(DeviceFault) as err:
        policy.select_action(obs)
    assert err.value.kind == "policy" and "\n" not in str(err.value)
    assert "RuntimeError: CUDA error: an illegal memory access" in str(err.value)
    with pytest.raises(DeviceFault, match="KeyError"):  # a missing camera frame
        policy.select_action({k: 0.0 for k in STATE_KEYS})


def test_mismatched_checkpoint_features_are_spelled_out(tmp_path):
    from orchestrator.policies.lerobot import LeRobotPolicy

    ckpt = make_act_checkpoint(tmp_path / "other", {"top": (48, 64), "wrist": (96, 128)}, state_dim=7)
    rig_features = {k: float for k in STATE_KEYS} | {n: (h, w, 3) for n, (h, w) in CAMERAS.items()}
    with pytest.raises(BadInput) as err:
        LeRobotPolicy(spec(ckpt), tmp_path, "", rig_features)
    lines = err.value.problems
    where = f"policy checkpoint {ckpt}"
    assert f"{where}: expects camera 'top' (observation.images.top, 64x48) but the rig has front (64x48), wrist (32x24)" in lines
    assert f"{where}: camera 'wrist' is 32x24 on the rig but the policy was trained on 128x96 (observation.images.wrist)" in lines
    assert any(line.startswith(f"{where}: expects a state of 7 values (observation.state) but the rig gives 6")
               for line in lines)
    assert len(lines) == 3 and all("\n" not in line for line in lines)


def test_rename_map_matches_rig_cameras_to_the_checkpoint_names(tmp_path):
    """lerobot-rollout's --rename_map: the rig's `front` feeds the checkpoint's `top`."""
    from orchestrator.policies.lerobot import LeRobotPolicy

    ckpt = make_act_checkpoint(tmp_path / "top", {"top": (48, 64), "wrist": (24, 32)})
    spec_with_map = SimpleNamespace(type="lerobot", path=str(ckpt), revision=None, device="cpu",
                                    rename_map={"observation.images.front": "observation.images.top"})
    rig_features = {k: float for k in STATE_KEYS} | {n: (h, w, 3) for n, (h, w) in CAMERAS.items()}
    policy = LeRobotPolicy(spec_with_map, tmp_path, "", rig_features)
    policy.reset(None)
    obs = {k: 1.0 for k in STATE_KEYS} | {n: np.full((h, w, 3), 128, np.uint8) for n, (h, w) in CAMERAS.items()}
    assert set(policy.select_action(obs)) == set(STATE_KEYS)


def test_offline_backbone_download_is_refused_with_the_weights_file(tmp_path, monkeypatch):
    from orchestrator.policies.lerobot import LeRobotPolicy

    ckpt = make_act_checkpoint(tmp_path / "pretrained", CAMERAS, backbone_weights="ResNet18_Weights.IMAGENET1K_V1")
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch_home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    rig_features = {k: float for k in STATE_KEYS} | {n: (h, w, 3) for n, (h, w) in CAMERAS.items()}
    with pytest.raises(BadInput) as err:
        LeRobotPolicy(spec(ckpt), tmp_path, "", rig_features)
    (line,) = err.value.problems
    assert "ResNet18_Weights.IMAGENET1K_V1 (resnet18-f37072fd.pth)" in line
    assert f"{tmp_path / 'torch_home' / 'hub' / 'checkpoints'}" in line and "$TORCH_HOME" in line
    # with the file in $TORCH_HOME the checkpoint loads (torchvision reads it instead of downloading)
    from orchestrator.policies.lerobot import backbone_weights_problem

    target = tmp_path / "torch_home" / "hub" / "checkpoints" / "resnet18-f37072fd.pth"
    target.parent.mkdir(parents=True)
    target.write_bytes(b"")
    assert backbone_weights_problem(SimpleNamespace(pretrained_backbone_weights="ResNet18_Weights.IMAGENET1K_V1"), "x") is None


def test_hub_checkpoint_not_in_cache_offline_is_one_line(tmp_path, monkeypatch):
    from orchestrator.policies.lerobot import LeRobotPolicy

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(BadInput) as err:
        LeRobotPolicy(spec("someone/act_so101_pick", revision="v2"), tmp_path, "", {k: float for k in STATE_KEYS})
    (line,) = err.value.problems
    assert line.startswith("policy checkpoint someone/act_so101_pick: not in the local Hugging Face cache")
    assert "hf download someone/act_so101_pick --revision v2" in line
    with pytest.raises(BadInput, match="no config.json"):
        LeRobotPolicy(spec("./nothing_here"), tmp_path, "", {})
