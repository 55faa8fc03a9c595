"""`orchestrator compare` from a fresh process on campaign stores this process wrote: three
simulated campaigns (the shipped sim protocols as tasks, two methods of three training seeds,
scripted picks of different aim noise) in every format, a suite file, an outcomes CSV, and the
one-line refusals (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.analysis.compare import read_comparison
from support.cli import run_main, run_module
from support.compare_campaigns import make_campaign, make_suite

SECTIONS = ("Per method, task and training seed", "Per method and task: mean over training seeds", "Across tasks",
            "Probability of improvement", "Performance profiles", "Methods across tasks", "Checkpoint ladders",
            "Leaderboard", "Held-out strata")


@pytest.fixture(scope="module")
def campaigns(tmp_path_factory):
    return make_suite(tmp_path_factory.mktemp("cli"))


def test_every_format_the_text_from_a_fresh_process(campaigns, tmp_path, capsys):
    """The text from a fresh `orchestrator` process; the other formats from `main` in this
    process (the same command, without a fresh interpreter's imports, 1-3 s each)."""
    outputs = {}
    for fmt in ("text", "md", "json", "html"):
        out = tmp_path / f"c.{fmt}"
        argv = ("compare", *campaigns, "--format", fmt, "--out", out, "--reps", "2000")
        result = run_module(*argv) if fmt == "text" else run_main(capsys, *argv)
        assert result.code == 0, result.err
        assert result.err_lines == [f"comparison written to {out}"]
        outputs[fmt] = out.read_text()
    for fmt in ("text", "md"):
        missing = [s for s in SECTIONS if s not in outputs[fmt]]
        assert missing == [], (fmt, missing)
    assert "## Leaderboard" in outputs["md"] and "| rank | checkpoint |" in outputs["md"]
    assert "Verdict: narrow better than wide across 3 tasks" in outputs["text"]
    doc = read_comparison(tmp_path / "c.json")
    assert doc["settings"]["bootstrap_reps"] == 2000 and len(doc["campaigns"]) == 3
    assert doc["paired"][0]["verdict"] in outputs["text"]
    assert outputs["html"].startswith("<!DOCTYPE html>") and "<h2>Leaderboard" in outputs["html"]
    # per section: profiles, mean/IQM, improvement, leaderboard, one ladder; the held-out section has no ladder
    assert outputs["html"].count("data:image/png;base64,") == 5 + 4 + (1 if doc["held_out"]["ladders"] else 0)


def test_suite_file_names_the_tasks_and_csv_joins(campaigns, tmp_path, capsys):
    csv = tmp_path / "other.csv"
    rows = [f"lab-task,X{s},narrow,{s},L{i},{int(i % 4 != 0)},0," for s in range(3) for i in range(8)]
    rows += [f"lab-task,Y{s},wide,{s},L{i},{int(i % 2 == 0)},0," for s in range(3) for i in range(8)]
    csv.write_text("task,policy,method,training_seed,layout,success,repeat,step\n" + "\n".join(rows) + "\n")
    suite = tmp_path / "suite.yaml"
    suite.write_text("campaigns:\n" + "".join(f"  - {{path: {d}, task: task-{i}}}\n" for i, d in enumerate(campaigns))
                     + "outcomes: [other.csv]\n")
    result = run_module("compare", suite, "--format", "json", "--reps", "500")
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    assert sorted(doc["methods"]["narrow"]["tasks"]) == ["lab-task", "task-0", "task-1", "task-2"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("campaigns:\n  - {path: x, tsk: y}\n")
    result = run_main(capsys, "compare", bad)   # the refusal in this process (test_refusals_* runs one fresh)
    assert result.code == 2 and len(result.err_lines) == 1
    assert result.err_lines[0].startswith(f"{bad}:2:") and "did you mean 'task'" in result.err_lines[0]


def test_refusals_are_one_line_exit_2(campaigns, tmp_path, capsys):
    """The first refusal from a fresh `orchestrator` process, the others from `main` in this one
    (the same exit code and stderr, without a fresh interpreter's imports for each)."""
    other = make_campaign(tmp_path, "sim_demo", edit=("min_height_m: 0.04", "min_height_m: 0.06"))
    cases = [
        (("compare", campaigns[0], other), "task 'sim-demo' has two success tests"),
        (("compare", campaigns[0], campaigns[0]), "is given twice"),
        (("compare", campaigns[0], campaigns[1], "--store", "postgresql://u@h/db"), "1 --store for 2 campaigns"),
        (("compare", tmp_path / "nowhere"), "no campaign here"),
        (("compare",), "nothing to compare"),
    ]
    for n, (argv, needle) in enumerate(cases):
        result = run_module(*argv) if n == 0 else run_main(capsys, *argv)
        assert result.code == 2, (argv, result.err)
        assert len(result.err_lines) == 1 and needle in result.err_lines[0], (argv, result.err)
        assert "Traceback" not in result.err
    assert run_main(capsys, "compare", campaigns[0], "--reps", "500").code == 0       # positive control


def _sim_protocol(folder, task: str) -> Path:
    """The tiny protocol as task `task`: two methods of three training seeds each, scripted picks
    with no aim noise (narrow) and 25 mm (wide)."""
    import shutil

    from support.tiny import DATA, PROTOCOL

    folder.mkdir(parents=True)
    shutil.copy(DATA / "tiny_layout.yaml", folder / "tiny_layout.yaml")
    text = PROTOCOL.read_text().replace("name: tiny-ab", f"name: {task}")
    head, rest = text.split("policies:\n", 1)
    policies = "".join(f"  {m[0].upper()}{s}: {{type: scripted, method: {m}, training_seed: {s}, aim_noise_mm: {n}}}\n"
                       for m, n in (("narrow", 0), ("wide", 25)) for s in range(3))
    path = folder / "protocol.yaml"
    path.write_text(head + "policies:\n" + policies + rest[rest.index("trials_per_layout"):])
    return path


@pytest.mark.slow
def test_three_campaigns_run_on_the_simulator_then_compared_from_a_fresh_process(tmp_path):
    """The Done-when case with the simulator itself: three tasks (the tiny protocol under three
    names), two methods of three training seeds, each campaign run by `orchestrator run` on the
    simulated rig (MuJoCo, scripted picks), then `orchestrator compare` on the three stores from a
    fresh process. The runs are the command in this process (`run` of the tiny protocol from a
    fresh process is the `tiny_reference` fixture's, tests/conftest.py): three interpreters' start
    and imports less (51 s -> 37 s at load 9); one worker each, as the suite's workers already
    share the cores: no pool of fresh interpreters that import MuJoCo (the parallel runner is
    tests/test_runner.py's)."""
    from orchestrator.cli import main
    from support.tiny import RIG

    stores = []
    for task in ("pick-a", "pick-b", "pick-c"):
        protocol = _sim_protocol(tmp_path / task, task)
        out = tmp_path / task / "campaign"
        assert main(["run", str(protocol), "--rig", str(RIG), "--out", str(out), "--workers", "1"]) == 0
        stores.append(out)
    result = run_module("compare", *stores, "--format", "json", "--reps", "2000")
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    narrow, wide = doc["methods"]["narrow"], doc["methods"]["wide"]
    assert sorted(narrow["tasks"]) == sorted(wide["tasks"]) == ["pick-a", "pick-b", "pick-c"]
    for method in (narrow, wide):
        for task in method["tasks"].values():
            assert sorted(task["seeds"]) == ["0", "1", "2"]
            assert all(seed["trials"] == 3 for seed in task["seeds"].values())   # 3 marks each
    assert narrow["mean"]["estimate"] >= wide["mean"]["estimate"]
    text = run_module("compare", *stores, "--reps", "2000")
    assert text.code == 0 and all(s in text.out for s in SECTIONS[:6]), text.out[-2000:]
