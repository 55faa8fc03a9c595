"""`orchestrator demo` from an installed wheel: the demo protocol, its layout and the simulated rig
ship as package data, so the demo finds them away from the source tree."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from support.repo import REPO


def uv() -> str:
    path = shutil.which("uv")
    if not path:
        pytest.fail("uv is needed to build and install the wheel: https://docs.astral.sh/uv/ (.ci/run installs it)")
    return path


@pytest.mark.slow
def test_the_installed_wheel_carries_the_demo(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    build = subprocess.run([uv(), "build", "--wheel", "--out-dir", str(tmp_path / "dist"), str(REPO)],
                           capture_output=True, text=True, timeout=600, env=env)
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    venv = tmp_path / "venv"
    made = subprocess.run([uv(), "venv", "--python", sys.executable, str(venv)], capture_output=True, text=True,
                          timeout=300, env=env)
    assert made.returncode == 0, made.stderr[-2000:]
    python = venv / "bin" / "python"
    install = subprocess.run([uv(), "pip", "install", "--offline", "--no-deps", "--python", str(python), str(wheel)],
                             capture_output=True, text=True, timeout=600, env=env)
    assert install.returncode == 0, install.stderr[-2000:]
    # offline: the dependencies come from the test environment's site-packages, appended after the
    # venv's own (a plain path line: its editable-install .pth files are not processed, so
    # `orchestrator` itself is the wheel's copy)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, timeout=120, env=env).stdout.strip()
    (Path(site) / "_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    away = tmp_path / "elsewhere"             # not the source tree
    away.mkdir()
    probe = ("from orchestrator.commands.demo import demo_files; from orchestrator.rigs.profile import load_rig; "
             "p, r = demo_files(); load_rig(r); print(p); print(r); print(demo_files('auto')[0])")
    found = subprocess.run([str(python), "-c", probe], cwd=away, capture_output=True, text=True, timeout=300, env=env)
    assert found.returncode == 0, found.stderr[-2000:]
    protocol, rig, resetting = (Path(line) for line in found.stdout.split())
    assert venv in protocol.parents and venv in rig.parents            # package data, not the repo
    assert venv in resetting.parents and resetting.read_text() == (REPO / "protocols" / "sim_demo_reset.yaml").read_text()
    where = subprocess.run([str(python), "-c", "import orchestrator; print(orchestrator.__file__)"], cwd=away,
                           capture_output=True, text=True, timeout=300, env=env).stdout.strip()
    assert venv in Path(where).parents                                  # the wheel's code, not the source tree
    assert protocol.read_text() == (REPO / "protocols" / "sim_demo.yaml").read_text()
    validate = subprocess.run([str(venv / "bin" / "orchestrator"), "validate", str(protocol)],
                              cwd=away, capture_output=True, text=True, timeout=300, env=env)
    assert validate.returncode == 0, validate.stdout + validate.stderr


@pytest.mark.slow
def test_the_demo_gives_what_the_readme_says_it_shows(tmp_path):
    """The README's "What the demo shows": the demo's protocol run in a fresh process (on the
    small-camera rig: rendering never changes the physics) gives those outcomes and that verdict;
    the same `orchestrator demo` (through its hidden options) prints the report itself (no call
    back into the CLI), exits with the report's code, writes the HTML report beside the campaign,
    and run again resumes with nothing left to run. (One demo process for both: the tiny
    protocol's demo was a second one, 6 trials, that no check needed.)"""
    from support.cli import run_module

    text = " ".join((REPO / "README.md").read_text().split())
    said = re.search(r"What the demo shows \(deterministic: the same on every run\): A picks (\d+)/20, B (\d+)/20; "
                     r"on the (\d+) layouts where they disagree only A succeeded, so McNemar's mid-p is ([\d.]+) "
                     r"\(exact ([\d.]+)\) and the difference is \+(\d+) points, 95% CI \+(\d+) to \+(\d+) \(Newcombe\)", text)
    assert said, "the README's sentence on what the demo shows has changed: update this test with it"
    a, b, discordant, mid_p, exact, diff, lo, hi = said.groups()
    result = run_module("demo", "--protocol", REPO / "protocols" / "sim_demo.yaml", "--rig",
                        REPO / "tests" / "data" / "tiny_sim.yaml", "--out", tmp_path / "demo", "--workers", "1",
                        timeout=600)
    assert result.code == 0, result.err
    assert "Verdict:" in result.out and "Next:" in result.out
    assert "trial 40/40  mark" in result.out                # progress lines (not a terminal)
    # the progress funnel per policy, by the joints and by physics, said to decide nothing
    funnel = result.out.split("Progress ladder (recorded; no decision uses it)")[1].split("Next:")[0]
    assert "pre-registered later" in funnel and funnel.count("policy  episodes") == 2
    assert funnel.count("20 on 20 marks") == 4              # 2 sources x 2 policies
    # pictures first: the last line is the path of the HTML report, written beside the campaign
    last = result.out.strip().splitlines()[-1]
    assert last.startswith("The report with its plots (open it in a browser): "), last
    html = Path(last.split(": ", 1)[1])
    assert html == (tmp_path / "demo-report.html").resolve() and html.is_file()
    page = html.read_text()
    assert page.startswith("<!DOCTYPE html>") and page.count("data:image/png;base64,") >= 3
    out = " ".join(result.out.split())
    expected = [f"A {a}/20", f"B {b}/20", f"Discordant layouts: {discordant} (A only {discordant}, B only 0)",
                f"McNemar mid-p {mid_p} (primary), exact {exact}",
                f"Verdict: A better than B: mid-p {mid_p}; difference +{diff} points, 95% CI +{lo} to +{hi}."]
    missing = [line for line in expected if line not in out]
    assert not missing and len(expected) == 5, missing
    ladder = re.search(r"its progress ladder by physics, B reached the cube in (\d+)/20, grasped it in (\d+)/20 and "
                       r"lifted and held it in (\d+)/20", text)
    assert ladder, "the README's sentence on the demo's progress ladder has changed: update this test with it"
    physics = out.split("By physics")[1].split(" B 20 on 20 marks ")[1].split(" the plots ")[0]
    reached, grasped, held = ladder.groups()
    assert physics.split(", ")[0].startswith(f"{reached}/20") and f" {grasped}/20 " in physics
    assert physics.count(f" {held}/20 ") == 2, physics      # lifted and held
    again = run_module("demo", "--protocol", REPO / "protocols" / "sim_demo.yaml", "--rig",
                       REPO / "tests" / "data" / "tiny_sim.yaml", "--out", tmp_path / "demo", "--workers", "1",
                       timeout=600)
    assert again.code == 0 and "campaign is complete" in again.out   # resumed: nothing left to run
