"""`lerobot-train` (LeRobot's own entry point, in a fresh process) trains ACT for a few CPU steps
on a dataset exported by stream copy: the export is a dataset LeRobot's training loads, frames,
statistics and all. Offline: ACT's backbone starts from random weights (nothing downloaded)."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.export_campaign import make_campaign

REPO_ID = "tester/so101-ab-train"


@pytest.mark.slow
def test_lerobot_train_runs_act_on_an_exported_dataset(tmp_path, monkeypatch):
    from orchestrator.cli import main

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"),
           "HF_LEROBOT_HOME": str(tmp_path / "lerobot")}
    for key in ("HF_HUB_OFFLINE", "HF_HOME", "HF_LEROBOT_HOME"):
        monkeypatch.setenv(key, env[key])
    campaign = make_campaign(tmp_path / "sim", wrist_fps=10)
    root = tmp_path / "dataset"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["export", str(campaign), "--repo-id", REPO_ID, "--root", str(root)]) == 0
    assert "videos joined by stream copy" in out.getvalue()
    train = shutil.which("lerobot-train", path=str(Path(sys.executable).parent))
    assert train, "lerobot-train is not installed beside this interpreter"
    steps = 3
    proc = subprocess.run(
        [train, f"--dataset.repo_id={REPO_ID}", f"--dataset.root={root}", "--policy.type=act",
         "--policy.device=cpu", "--policy.pretrained_backbone_weights=null", "--policy.push_to_hub=false",
         "--policy.chunk_size=5", "--policy.n_action_steps=5", f"--steps={steps}", "--batch_size=2",
         "--num_workers=0", "--log_freq=1", "--save_checkpoint=false", "--wandb.enable=false",
         f"--output_dir={tmp_path / 'train'}"],
        env=env, capture_output=True, text=True, timeout=240)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]
    assert [f"step:{k} " in log for k in range(1, steps + 1)] == [True] * steps, log[-3000:]
    assert "End of training" in log and "FrameTimestampError" not in log
