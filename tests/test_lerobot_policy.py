"""The LeRobot policy adapter: a tiny random-init ACT checkpoint (built here, offline) runs on
the fake SO-101 and gives exactly the actions LeRobot's own rollout pipeline computes."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from fakes.rigs import CAMERAS
from orchestrator.core.errors import BadInput
from orchestrator.design.protocol import LeRobotPolicySpec
from orchestrator.policies.base import Policy
from orchestrator.rigs.device_fault import DeviceFault
from orchestrator.rigs.profile import STATE_KEYS
from support import fake_arm
from support.act import make_act_checkpoint, restat_checkpoint

fake_rig = fake_arm.fake_rig   # the fixture (support/fake_arm.py)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return make_act_checkpoint(tmp_path_factory.mktemp("ckpt") / "act", CAMERAS, chunk_size=3)


def spec(path, **kw):
    return LeRobotPolicySpec(type="lerobot", path=str(path), **kw)


def lerobot_rollout_actions(checkpoint, rig, task, observations):
    """What `lerobot-rollout` (sync inference, base strategy) sends for these observations: LeRobot's
    own `build_rollout_context(RolloutConfig(...))` on the same fake arm and video cameras, then its
    `send_next_action` fed the same frames (the robot wrapper records what reaches the arm)."""
    from lerobot.rollout.strategies.core import send_next_action
    from lerobot.utils.action_interpolator import ActionInterpolator

    from support.rollout import lerobot_rollout_context

    ctx = lerobot_rollout_context(rig.config, checkpoint, task, fps=30)
    try:
        assert ctx.data.ordered_action_keys == list(STATE_KEYS)
        sent: list[dict] = []
        ctx.hardware.robot_wrapper.send_action = sent.append
        ctx.policy.inference.reset()
        interpolator = ActionInterpolator(multiplier=1)
        obs_p = ctx.processors.robot_observation_processor
        for obs in observations:
            send_next_action(obs_p(obs), obs, ctx, interpolator)
        return sent, ctx
    finally:
        ctx.hardware.robot_wrapper.inner.disconnect()


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
    # reset() clears the action queue: the same frames give the same actions again
    policy.reset(SimpleNamespace(task="Pick up the cube"))
    assert [policy.select_action(o) for o in observations] == actions
    policy.close()
    rig.disconnect()  # LeRobot's own rollout connects the same arm next
    reference, ctx = lerobot_rollout_actions(checkpoint, rig, "Pick up the cube", observations)
    assert actions == reference
    assert policy.dataset_features == ctx.data.dataset_features
    assert policy.device.type == ctx.runtime.cfg.device


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
    """Camera sets of which neither contains the other are refused (lerobot-rollout raises);
    a state of another size is refused."""
    from orchestrator.policies.lerobot import LeRobotPolicy

    ckpt = make_act_checkpoint(tmp_path / "other", {"top": (48, 64), "wrist": (96, 128)}, state_dim=7)
    rig_features = {k: float for k in STATE_KEYS} | {n: (h, w, 3) for n, (h, w) in CAMERAS.items()}
    with pytest.raises(BadInput) as err:
        LeRobotPolicy(spec(ckpt), tmp_path, "", rig_features)
    lines = err.value.problems
    where = f"policy checkpoint {ckpt}"
    assert (f"{where}: expects cameras top, wrist but the rig has front (64x48), wrist (32x24): neither set "
            "contains the other (lerobot-rollout refuses this)") in lines[1]
    assert lines[0].startswith(f"{where}: expects a state of 7 values (observation.state) but the rig gives 6")
    assert len(lines) == 2 and all("\n" not in line for line in lines)


def test_camera_subsets_and_sizes_warn_like_lerobot_rollout_and_refuse_what_would_fail(tmp_path, caplog):
    """Item 9: the rig's cameras a superset of the policy's and another image size: lerobot-rollout
    accepts it (checked here with its own visual-feature rule); the adapter warns and runs it.
    A camera the policy needs and the rig lacks: the warm-up forward pass fails, so it is refused
    before any arm is connected."""
    from orchestrator.policies.lerobot import LeRobotPolicy

    rig_features = {k: float for k in STATE_KEYS} | {n: (h, w, 3) for n, (h, w) in CAMERAS.items()}
    only_front = make_act_checkpoint(tmp_path / "front", {"front": (96, 128)})
    policy = LeRobotPolicy(spec(only_front), tmp_path, "", rig_features)
    assert any("does not use the rig's camera 'wrist'" in w for w in policy.warnings)
    assert any("camera 'front' is 64x48 on the rig but the policy was trained on 128x96" in w for w in policy.warnings)
    assert policy.warmup_s > 0
    obs = {k: 1.0 for k in STATE_KEYS} | {n: np.full((h, w, 3), 99, np.uint8) for n, (h, w) in CAMERAS.items()}
    assert set(policy.select_action(obs)) == set(STATE_KEYS)

    three = make_act_checkpoint(tmp_path / "three", {**CAMERAS, "side": (48, 64)})
    with pytest.raises(BadInput) as err:
        LeRobotPolicy(spec(three), tmp_path, "", rig_features)
    (line,) = err.value.problems
    assert "fails on an observation shaped like the rig's" in line and "\n" not in line


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


def write_policy_protocol(directory, policies: dict):
    import yaml

    (directory / "layout.yaml").write_text(yaml.safe_dump({"name": "one", "marks": [{"id": "M01", "x": 0.16, "y": 0.0}]}))
    path = directory / "protocol.yaml"
    path.write_text(yaml.safe_dump({"name": "p", "task": "Pick up the cube", "layout": "layout.yaml",
                                    "policies": policies, "seed": 1, "episode": {"fps": 10, "duration_s": 1}}))
    from orchestrator.design.protocol import load_protocol

    return load_protocol(path)


def test_protocol_yaml_sets_rename_map_overrides_and_a_task_per_policy(tmp_path, monkeypatch):
    """Items 8 and 14 from YAML: rename_map, n_action_steps, temporal_ensemble_coeff, task."""
    from lerobot.policies.act.modeling_act import ACTPolicy

    from orchestrator.policies.lerobot import LeRobotPolicy

    make_act_checkpoint(tmp_path / "top", {"top": (48, 64), "wrist": (24, 32)}, chunk_size=5)
    loaded = write_policy_protocol(tmp_path, {
        "A": {"type": "lerobot", "path": "./top", "n_action_steps": 2, "task": "Stack the cube",
              "rename_map": {"observation.images.front": "observation.images.top"}},
        "B": {"type": "lerobot", "path": "./top", "n_action_steps": 1, "temporal_ensemble_coeff": 0.01,
              "rename_map": {"observation.images.front": "observation.images.top"}}})
    rig_features = {k: float for k in STATE_KEYS} | {n: (h, w, 3) for n, (h, w) in CAMERAS.items()}
    a = LeRobotPolicy(loaded.protocol.policies["A"], tmp_path, loaded.protocol.task, rig_features)
    b = LeRobotPolicy(loaded.protocol.policies["B"], tmp_path, loaded.protocol.task, rig_features)
    assert a.config.n_action_steps == 2 and a.task == "Stack the cube" and b.task == "Pick up the cube"
    assert b.config.temporal_ensemble_coeff == 0.01 and b.policy.temporal_ensembler is not None
    calls = []
    real = ACTPolicy.predict_action_chunk
    monkeypatch.setattr(ACTPolicy, "predict_action_chunk", lambda self, batch: calls.append(batch["task"]) or real(self, batch))
    a.reset(SimpleNamespace(task="Pick up the cube"))
    obs = {k: 1.0 for k in STATE_KEYS} | {n: np.full((h, w, 3), 99, np.uint8) for n, (h, w) in CAMERAS.items()}
    for _ in range(6):
        a.select_action(obs)
    assert calls == [["Stack the cube"]] * 3  # a model call every 2 steps, with this policy's task
    with pytest.raises(BadInput) as err:  # ACT's own validation: ensembling needs n_action_steps 1
        LeRobotPolicy(loaded.protocol.policies["A"].model_copy(update={"temporal_ensemble_coeff": 0.01}),
                      tmp_path, "", rig_features)
    assert "temporal_ensemble_coeff" in str(err.value) or "n_action_steps" in str(err.value)


def test_device_defaults_to_the_checkpoint_then_what_is_available_and_compile_is_off(tmp_path):
    """Items 6 and 7, against LeRobot's own resolution (`RolloutConfig.__post_init__`)."""
    import json

    from lerobot.policies.diffusion.configuration_diffusion import DiffusionConfig
    from lerobot.utils.device_utils import auto_select_torch_device

    from orchestrator.design.protocol import LeRobotPolicySpec
    from orchestrator.policies.checkpoint import apply_overrides, resolve_device
    from orchestrator.policies.lerobot import LeRobotPolicy

    assert LeRobotPolicySpec(type="lerobot", path="x").device is None
    ckpt = make_act_checkpoint(tmp_path / "gpu", CAMERAS)
    config = json.loads((ckpt / "config.json").read_text())
    config["device"] = "cuda"  # trained on a GPU; this machine may have none
    (ckpt / "config.json").write_text(json.dumps(config))
    rig_features = {k: float for k in STATE_KEYS} | {n: (h, w, 3) for n, (h, w) in CAMERAS.items()}
    policy = LeRobotPolicy(spec(ckpt), tmp_path, "", rig_features)
    import torch

    expected = "cuda" if torch.cuda.is_available() else auto_select_torch_device().type
    assert policy.device.type == expected and policy.config.device == expected
    assert resolve_device(None, "cpu", "x") == "cpu"
    cfg = DiffusionConfig(compile_model=True)
    apply_overrides(cfg, SimpleNamespace(), "x")
    assert cfg.compile_model is False


def test_warm_up_runs_one_forward_pass_at_load_before_any_arm(checkpoint, tmp_path, monkeypatch):
    from lerobot.policies.act.modeling_act import ACTPolicy

    from orchestrator.policies.lerobot import LeRobotPolicy

    calls = []
    real = ACTPolicy.predict_action_chunk
    monkeypatch.setattr(ACTPolicy, "predict_action_chunk", lambda self, batch: calls.append(1) or real(self, batch))
    rig_features = {k: float for k in STATE_KEYS} | {n: (h, w, 3) for n, (h, w) in CAMERAS.items()}
    policy = LeRobotPolicy(spec(checkpoint), tmp_path, "", rig_features)
    assert calls == [1] and policy.warmup_s > 0
    assert len(policy.policy._action_queue) == 0  # reset after the warm-up: episodes start fresh


def test_state_units_other_than_the_rigs_are_refused(tmp_path, fake_rig):
    """Item 14: a checkpoint whose state statistics were recorded in -100..100 units against a
    rig in degrees, or the other way round, is refused (normalisation stats vs calibrated range),
    by the check `doctor` and `run` apply to a loaded policy (`policies.arm_fit`)."""
    from orchestrator.policies.arm_fit import units_refusal
    from orchestrator.policies.lerobot import LeRobotPolicy

    ckpt = make_act_checkpoint(tmp_path / "wide", CAMERAS)
    restat_checkpoint(ckpt, CAMERAS, observation_state={
        "mean": [0.0] * 6, "std": [40.0] * 6, "min": [-170.0] * 5 + [0.0], "max": [170.0] * 5 + [100.0]},
        action={"mean": [0.0] * 6, "std": [40.0] * 6})
    policy = LeRobotPolicy(spec(ckpt), tmp_path, "", fake_rig)
    assert units_refusal(policy.statistics(), fake_rig, policy.where) is None   # degrees rig: fits
    from orchestrator.rigs.profile import RigProfile
    from orchestrator.rigs.so101.rig import LeRobotRig

    profile = fake_rig.profile.model_dump()
    profile["robot"]["use_degrees"] = False  # the rig in -100..100
    range_rig = LeRobotRig(RigProfile.model_validate(profile))
    line = units_refusal(LeRobotPolicy(spec(ckpt), tmp_path, "", range_rig).statistics(), range_rig, policy.where)
    assert line is not None and line.count(" spans [-170.0, 170.0] against the calibrated [-100.0, 100.0]") == 5
    assert "gripper.pos spans" not in line   # five joints; the gripper is 0-100 in both
    assert "(-100..100; gripper 0-100)" in line and line.endswith("pass --allow-policy-units to run it anyway")
