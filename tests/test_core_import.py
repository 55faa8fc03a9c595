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


# A core install: the modules of the optional extras cannot be found (a meta-path finder answers
# for them first, as a missing package would: ModuleNotFoundError with the module's name).
CORE_INSTALL = """
import contextlib, io, json, sys
BLOCKED = {"lerobot", "torch", "torchvision", "transformers", "diffusers", "scservo_sdk", "datasets",
           "draccus", "psycopg", "rerun"}

class NotInstalled:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NotInstalled)
from orchestrator.cli import main
results = []
for argv in json.loads(sys.argv[1]):
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code
    results.append({"argv": argv, "code": code, "err": err.getvalue(), "out": out.getvalue()})
try:
    import lerobot  # noqa: F401
    control = "imported"
except ModuleNotFoundError as exc:
    control = exc.name
print(json.dumps({"results": results, "control": control}))
"""


def test_every_verb_on_a_core_install_runs_or_names_the_extra(tmp_path):
    """Every verb on a core install (no LeRobot, torch, Rerun or psycopg): it runs, or refuses in
    one line naming the extra it needs and how to run it with it (exit 2); never an internal error
    (`doctor`, `run` and `camera check` with `--twin` were `internal error: ModuleNotFoundError`)."""
    data = REPO / "tests" / "data"
    camp, twin_rig, pg = str(tmp_path / "camp"), str(REPO / "hardware" / "so101_twin.yaml"), "postgresql://u@127.0.0.1:9/x"
    tiny, sim = str(data / "tiny_protocol.yaml"), str(data / "tiny_sim.yaml")
    runs = {   # argv -> (exit code, the extra its one line names, or None)
        ("demo", "--protocol", tiny, "--rig", sim, "--out", camp, "--workers", "1"): (0, None),
        ("validate", str(SIM_PROTOCOL)): (0, None),
        ("plan", "--p-a", "0.9", "--p-b", "0.6"): (0, None),
        ("layout", "print", "layouts/grid20.yaml", "--out", str(tmp_path / "g.svg")): (0, None),
        ("report", camp, "--format", "html", "--out", str(tmp_path / "r.html")): (0, None),
        ("judge", camp, "--judge", "auto"): (0, None),
        ("bundle", camp, "--out", str(tmp_path / "bundle")): (0, None),
        ("import-labels", camp, str(tmp_path / "bundle")): (0, None),
        ("compare", camp, "--judge", "physics"): (0, None),
        ("verify", camp): (0, None),
        ("doctor", "--rig", sim, "--protocol", tiny): (0, None),
        ("camera", "check", "--rig", "hardware/sim.yaml", "--layout", "layouts/grid20.yaml",
         "--reference", str(tmp_path / "ref")): (0, None),
        ("export", camp, "--repo-id", "you/x", "--root", str(tmp_path / "ds"), "--force"): (2, "lerobot"),
        ("view", camp, "--unblinded", "--save", str(tmp_path / "v.rrd")): (2, "rerun"),
        ("doctor", "--rig", twin_rig, "--twin"): (2, "lerobot"),
        ("doctor", "--rig", twin_rig): (2, "lerobot"),
        ("run", tiny, "--rig", twin_rig, "--twin", "--unattended", "--out", str(tmp_path / "t")): (2, "lerobot"),
        ("camera", "check", "--rig", twin_rig, "--twin", "--layout", "layouts/grid20.yaml"): (2, "lerobot"),
        ("report", "x", "--store", pg): (2, "postgres"),
        ("store", "init", pg, tiny, "--rig", sim, "--out", str(tmp_path / "pg")): (2, "postgres"),
        ("--version",): (0, None),
        ("layout", "print", "--help"): (0, None),
    }
    result = subprocess.run([sys.executable, "-c", CORE_INSTALL, json.dumps([list(a) for a in runs])],
                            cwd=REPO, env=_env(), capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["control"] == "lerobot"                    # the blocker works: lerobot is not found
    verbs_seen = set()
    for row, (argv, (code, extra)) in zip(out["results"], runs.items(), strict=True):
        verbs_seen.add(argv[0])
        assert "internal error" not in row["err"], row
        assert row["code"] == code, row
        if extra is not None:
            lines = row["err"].strip().splitlines()
            assert len(lines) == 1, row
            assert f"needs the {extra} extra" in lines[0] and f"uv run --extra {extra} orchestrator" in lines[0], row
    assert len(out["results"]) == len(runs) == 22
    from orchestrator.cli import VERBS

    assert verbs_seen - {"--version"} == set(VERBS) - {"twin"}   # every verb but the twin's foreground server
    import tomllib

    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert out["results"][-2]["out"] == f"orchestrator {version} (so101-ab-orchestrator)\n"
    help_text = out["results"][-1]["out"]
    assert "Print at 100 % (actual size)" in " ".join(help_text.split()) and "%%" not in help_text
