"""A language-conditioned LeRobot policy: the protocol's task string reaches the model.

The checkpoint is LeRobot's `multi_task_dit` on a tiny random CLIP built here, offline
(tests/support/language.py): its preprocessor tokenizes the task (`TokenizerProcessorStep`) and
its CLIP text encoder reads the tokens. A forward hook on that `CLIPTextModel` captures the token
ids it receives; the tiny tokenizer spells every character as one token, so the ids decode back
to the task (lower-cased, as CLIP's tokenizer normalises).

- per policy: a policy with its own `task` gets it; one without gets the protocol's (in-process,
  through `LeRobotPolicy`, and in a fresh `orchestrator run` process, where a `sitecustomize`
  on PYTHONPATH records what every `CLIPTextModel` receives; the CLI itself is unchanged);
- quiet: transformers' weight-loading report (a table of every unused CLIP weight) and its
  progress bars do not reach the operator's terminal;
- the task changes the actions: with the diffusion noise seeded alike, two tasks give different
  actions and the same task gives the same ones;
- against lerobot-rollout: LeRobot's own `build_rollout_context(RolloutConfig(task=...))` on the
  same fake SO-101 feeds the text encoder the same tokens and sends the same actions.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from fakes.rigs import CAMERAS
from orchestrator.design.protocol import LeRobotPolicySpec
from orchestrator.rigs.profile import STATE_KEYS
from support import fake_arm
from support.cli import run_module
from support.repo import REPO
from support.requires import require_installed

require_installed("transformers")  # the lerobot extra's multi-task-dit (imported by the tests,
require_installed("diffusers")     # not at collection: importing them imports torch)

fake_rig = fake_arm.fake_rig   # the fixture (support/fake_arm.py)

SIM_RIG = REPO / "hardware" / "sim.yaml"
SIM_CAMERA = (240, 320)  # hardware/sim.yaml: both cameras 320x240
OWN_TASK = "pick the red cube"
PROTOCOL_TASK = "Pick up the cube and hold it above the table"  # protocols/sim_demo.yaml's task

# Records the token ids every CLIPTextModel receives (one JSON line per forward pass), in any
# process that has this folder on PYTHONPATH; the orchestrator runs unchanged.
SITECUSTOMIZE = '''
import json, os
import torch

def _record(module, args, kwargs, output):
    if type(module).__name__ == "CLIPTextModel":
        ids = kwargs.get("input_ids", args[0] if args else None)
        with open(os.environ["TASK_TOKENS_LOG"], "a") as log:
            log.write(json.dumps({"model": id(module), "ids": ids.tolist()}) + "\\n")

torch.nn.modules.module.register_module_forward_hook(_record, with_kwargs=True)
'''


@pytest.fixture(scope="module")
def sim_checkpoint(tmp_path_factory) -> Path:
    from support.language import make_dit_checkpoint

    return make_dit_checkpoint(tmp_path_factory.mktemp("language") / "dit",
                               {"front": SIM_CAMERA, "wrist": SIM_CAMERA})


def spec(path, **kw) -> LeRobotPolicySpec:
    return LeRobotPolicySpec(type="lerobot", path=str(path), **kw)


def text_encoder(policy):
    """The CLIPTextModel inside a loaded multi_task_dit policy."""
    (model,) = [m for m in policy.policy.modules() if type(m).__name__ == "CLIPTextModel"]
    return model


def decode(checkpoint: Path, ids) -> list[str]:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(checkpoint / "tiny-clip"))
    return [tokenizer.decode(row, skip_special_tokens=True) for row in ids]


def capture_tokens(policy) -> list:
    seen: list = []
    text_encoder(policy).register_forward_hook(
        lambda module, args, kwargs, out: seen.append(kwargs["input_ids"].tolist()), with_kwargs=True)
    return seen


def sim_observation(rng: np.random.Generator) -> dict:
    return ({k: float(v) for k, v in zip(STATE_KEYS, rng.uniform(0, 40, len(STATE_KEYS)), strict=True)}
            | {c: rng.integers(0, 255, (*SIM_CAMERA, 3), dtype=np.uint8) for c in ("front", "wrist")})


def sim_features() -> dict:
    return {k: float for k in STATE_KEYS} | {c: (*SIM_CAMERA, 3) for c in ("front", "wrist")}


def test_each_policy_gets_its_own_task_else_the_protocols(sim_checkpoint):
    from orchestrator.policies.lerobot import LeRobotPolicy

    own = LeRobotPolicy(spec(sim_checkpoint, task=OWN_TASK), "/", PROTOCOL_TASK, sim_features())
    default = LeRobotPolicy(spec(sim_checkpoint), "/", PROTOCOL_TASK, sim_features())
    obs = sim_observation(np.random.default_rng(0))
    seen = {}
    for name, policy in (("own", own), ("default", default)):
        tokens = capture_tokens(policy)
        policy.reset(SimpleNamespace(task=PROTOCOL_TASK))  # what the runner passes: the protocol's task
        policy.select_action(obs)
        assert len(tokens) == 1  # one model call: the first step of a chunk
        seen[name] = decode(sim_checkpoint, tokens[0])
    assert seen == {"own": [OWN_TASK], "default": [PROTOCOL_TASK.lower()]}


def test_the_task_changes_the_actions_and_nothing_else_does(sim_checkpoint):
    import torch

    from orchestrator.policies.lerobot import LeRobotPolicy

    obs = sim_observation(np.random.default_rng(1))

    def first_action(task: str) -> list[float]:
        policy = LeRobotPolicy(spec(sim_checkpoint, task=task), "/", PROTOCOL_TASK, sim_features())
        policy.reset(None)
        torch.manual_seed(0)  # the same diffusion noise for every task
        action = policy.select_action(obs)
        return [action[k] for k in STATE_KEYS]

    red, red_again, blue = first_action(OWN_TASK), first_action(OWN_TASK), first_action("push the blue cube")
    assert red == red_again
    assert max(abs(a - b) for a, b in zip(red, blue, strict=True)) > 1e-3, (red, blue)


# ------------------------------------------------------------------ the real CLI, fresh process
@pytest.mark.slow
def test_run_cli_feeds_each_policy_its_task(sim_checkpoint, tmp_path, monkeypatch):
    """`orchestrator run` in a fresh process: A has its own task, B none (the protocol's). The
    export stores each episode with the task its policy ran with, as lerobot-record does."""
    import shutil

    from support.campaign_files import two_mark_protocol

    shutil.copytree(sim_checkpoint, tmp_path / "dit")
    # the copied config still names the module fixture's tiny-clip folder (absolute), as a real
    # checkpoint names its Hub CLIP; the copy only puts the checkpoint next to the protocol
    protocol = two_mark_protocol(tmp_path, "{type: lerobot, path: ./dit}", duration_s=0.5)
    text = protocol.read_text()
    old_a = "A: {type: scripted, aim_noise_mm: 3}"
    assert old_a in text and f'task: "{PROTOCOL_TASK}"' in text
    protocol.write_text(text.replace(old_a, f'A: {{type: lerobot, path: ./dit, task: "{OWN_TASK}"}}'))
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(SITECUSTOMIZE)
    log = tmp_path / "tokens.jsonl"
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl"), "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": str(hook), "TASK_TOKENS_LOG": str(log)}
    out = tmp_path / "campaign"
    result = run_module("run", protocol, "--rig", SIM_RIG, "--out", out, "--workers", "1", env=env, timeout=600)
    assert result.code == 0, result.err
    assert "4/4 trials done, 0 aborted" in result.out, result.out + result.err
    # transformers' weight-loading reports (every unused CLIP weight) and bars stay off the terminal
    assert "LOAD REPORT" not in result.err and "Loading weights:" not in result.err, result.err[:2000]
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    tasks_by_model: dict[int, set[str]] = {}
    for call in calls:
        tasks_by_model.setdefault(call["model"], set()).update(decode(sim_checkpoint, call["ids"]))
    # two policies, two text encoders; each only ever saw its own task
    assert sorted(map(sorted, tasks_by_model.values())) == sorted([[OWN_TASK], [PROTOCOL_TASK.lower()]])
    # warm-up + 5 steps at 10 fps in chunks of 4 (2 model calls) x 2 trials, per policy
    assert len(calls) == 2 * (1 + 2 * 2), len(calls)

    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    from orchestrator.cli import main
    from orchestrator.store.sqlite import CampaignStore

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_LEROBOT_HOME", str(tmp_path / "lerobot"))
    assert main(["export", str(out), "--repo-id", "tester/language", "--root", str(tmp_path / "dataset")]) == 0
    dataset = LeRobotDataset("tester/language", root=tmp_path / "dataset", video_backend="pyav")
    store = CampaignStore.open_readonly(out)
    try:
        policies = [t.policy for t in store.trials()]  # run order = episode order
    finally:
        store.close()
    tasks = [list(t) for t in dataset.meta.episodes["tasks"]]
    expected = {"A": [OWN_TASK], "B": [PROTOCOL_TASK]}
    assert tasks == [expected[p] for p in policies] and set(policies) == {"A", "B"}


# ------------------------------------------------------------------ against lerobot-rollout
def test_task_and_actions_match_lerobot_rollout_on_the_fake_arm(fake_rig, tmp_path):
    """The same task string, the same tokens, the same actions as lerobot-rollout's own setup
    (the policy uses the front camera only; the rig's wrist camera is recorded, not fed)."""
    import torch
    from lerobot.rollout.strategies.core import send_next_action
    from lerobot.utils.action_interpolator import ActionInterpolator

    from orchestrator.policies.lerobot import LeRobotPolicy
    from support.language import make_dit_checkpoint
    from support.rollout import lerobot_rollout_context

    checkpoint = make_dit_checkpoint(tmp_path / "dit", {"front": CAMERAS["front"]}, n_action_steps=2)
    rig = fake_rig
    rig.connect()
    policy = LeRobotPolicy(spec(checkpoint), tmp_path, PROTOCOL_TASK, rig)
    ours_tokens = capture_tokens(policy)
    policy.reset(SimpleNamespace(task=PROTOCOL_TASK))
    torch.manual_seed(0)
    observations, actions = [], []
    for _ in range(3):  # chunk 2: model calls at steps 0 and 2
        obs = rig.observe()
        observations.append(obs)
        actions.append(policy.select_action(obs))
    policy.close()
    rig.disconnect()  # LeRobot's own rollout connects the same arm next

    ctx = lerobot_rollout_context(rig.config, checkpoint, PROTOCOL_TASK, fps=30)
    try:
        theirs_tokens = capture_tokens(SimpleNamespace(policy=ctx.policy.policy))
        sent: list[dict] = []
        ctx.hardware.robot_wrapper.send_action = sent.append
        ctx.policy.inference.reset()
        interpolator = ActionInterpolator(multiplier=1)
        torch.manual_seed(0)
        for obs in observations:
            send_next_action(ctx.processors.robot_observation_processor(obs), obs, ctx, interpolator)
    finally:
        ctx.hardware.robot_wrapper.inner.disconnect()
    assert len(ours_tokens) == 2 and ours_tokens == theirs_tokens
    assert decode(checkpoint, ours_tokens[0]) == [PROTOCOL_TASK.lower()]
    assert actions == sent
