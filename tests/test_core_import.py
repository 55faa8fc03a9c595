"""The core install runs without torch, mujoco or LeRobot (docs/design.md section 3): `validate`,
`layout print` and the CLI itself never import them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from support.repo import REPO, SIM_PROTOCOL

HEAVY = ("torch", "mujoco", "lerobot")
CORE_MODULES = ["orchestrator.cli", "orchestrator.design.protocol", "orchestrator.core.yamlsrc", "orchestrator.design.schedule",
                "orchestrator.store.sqlite", "orchestrator.store.schema", "orchestrator.core.errors",
                "orchestrator.rigs.profile", "orchestrator.design.template", "orchestrator.commands.validate",
                "orchestrator.commands.layout"]


def _blockers(root: Path) -> Path:
    """A folder that shadows torch, mujoco and lerobot with packages that refuse to import."""
    for name in HEAVY:
        (root / name).mkdir(parents=True)
        (root / name / "__init__.py").write_text(
            f"raise ImportError('{name} is blocked: the core install must not need it')\n")
    return root


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "COV_CORE_SOURCE")}
    env.update(extra)
    return env


def test_validate_runs_with_torch_mujoco_lerobot_unimportable(tmp_path):
    blocked = _blockers(tmp_path / "blocked")
    env = _env(PYTHONPATH=str(blocked))
    probe = subprocess.run([sys.executable, "-c", "import torch"], env=env, capture_output=True, text=True)
    assert probe.returncode != 0 and "blocked" in probe.stderr   # the blocker works
    result = subprocess.run([sys.executable, "-m", "orchestrator", "validate", "protocols/sim_demo.yaml"],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "ok" in result.stdout


SCRIPT = """
import importlib, json, sys
modules = json.loads(sys.argv[1])
for name in modules:
    importlib.import_module(name)
from orchestrator.cli import build_parser, main
build_parser()
codes = [main(["validate", sys.argv[2]]),
         main(["layout", "print", "layouts/grid20.yaml", "--out", sys.argv[3]])]
heavy = sorted({m.split(".")[0] for m in sys.modules} & {"torch", "mujoco", "lerobot"})
print(json.dumps({"codes": codes, "heavy": heavy}))
"""


def test_core_modules_do_not_import_torch(tmp_path):
    """With torch and LeRobot installed (the test venv has every extra), the CLI, the core
    modules, `validate` and `layout print` leave them out of sys.modules."""
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(CORE_MODULES), str(SIM_PROTOCOL), str(tmp_path / "t.svg")],
        cwd=REPO, env=_env(), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report == {"codes": [0, 0], "heavy": []}
