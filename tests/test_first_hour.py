"""What a user meets in the first hour, in-process: every verb's and action's help says what it
means (no argparse escapes left in a description)."""

from __future__ import annotations

import argparse

import pytest

from orchestrator.cli import build_parser


def helps(parser: argparse.ArgumentParser, name: str = "orchestrator") -> dict[str, str]:
    """The --help text of `parser` and of every verb and action under it, by the words typed."""
    out = {name: parser.format_help()}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for word, sub in action.choices.items():
                out.update(helps(sub, f"{name} {word}"))
    return out


def test_no_help_text_shows_an_argparse_escape():
    """`layout print --help` said "Print at 100 %% (actual size)": argparse formats a description
    with % only when it holds %(prog); the positive control is a parser that escapes as it did."""
    texts = helps(build_parser())
    assert len(texts) >= 20 and "orchestrator layout print" in texts and "orchestrator camera check" in texts
    assert [name for name, text in texts.items() if "%%" in text] == []
    assert "100 % (actual size)" in " ".join(texts["orchestrator layout print"].split())
    planted = argparse.ArgumentParser(prog="x", description="Print at 100 %% (actual size)")
    assert [name for name, text in helps(planted, "x").items() if "%%" in text] == ["x"]


@pytest.mark.subprocess   # the simulated runner's episode worker
def test_an_incomplete_session_ends_with_the_command_that_resumes_it(tmp_path, capsys):
    """`run` ending with the campaign incomplete said only "judge | report"; its `next:` line now
    gives the command that resumes it, and that command, run as printed, completes the campaign."""
    import shlex

    from orchestrator.cli import main
    from support.repo import REPO

    protocol, rig = REPO / "tests" / "data" / "tiny_protocol.yaml", REPO / "tests" / "data" / "tiny_sim.yaml"
    out = tmp_path / "camp"
    assert main(["run", str(protocol), "--rig", str(rig), "--out", str(out), "--workers", "1", "--stop-after", "2"]) == 0
    said = capsys.readouterr().out.strip().splitlines()
    assert said[-2] == "2/6 trials done, 0 aborted this session; campaign incomplete (run again to resume)"
    prefix = "next: resume it with: "
    assert said[-1].startswith(prefix), said[-1]
    argv = shlex.split(said[-1].removeprefix(prefix))
    assert argv == ["orchestrator", "run", str(protocol), "--rig", str(rig), "--out", str(out)]
    assert main(argv[1:]) == 0
    said = capsys.readouterr().out.strip().splitlines()
    assert said[-2].startswith("6/6 trials done") and said[-1].startswith(f"next: orchestrator judge {out} ")


@pytest.mark.parametrize("stop_after, station, code", [(None, None, 3), (2, None, 0), (None, "s1", 0), (3, None, 3)])
def test_a_session_stopped_with_trials_left_exits_3(tmp_path, capsys, monkeypatch, stop_after, station, code):
    """`run` ended 0 after the operator's q with the campaign incomplete; now 3 ("stopped, resumable",
    docs/design.md) with the resume command on its `next:` line. A session that ran the trials
    --stop-after asked for, or a station's (other stations may hold the blocks left), still ends 0.
    The session itself is replaced: it stops after 2 of 6 trials."""
    from orchestrator.cli import main
    from orchestrator.commands import run as run_command
    from orchestrator.run.bookkeeping import RunSummary
    from support.repo import REPO

    protocol, rig = REPO / "tests" / "data" / "tiny_protocol.yaml", REPO / "tests" / "data" / "tiny_sim.yaml"
    out = tmp_path / "camp"
    monkeypatch.setattr(run_command, "_run_with_operator",
                        lambda args, rig, protocol: (out, RunSummary(done_now=2, total=6, done_total=2)))
    argv = ["run", str(protocol), "--rig", str(rig), "--out", str(out)]
    argv += ["--stop-after", str(stop_after)] if stop_after else []
    argv += ["--store", "postgresql://x/y", "--station", station] if station else []
    assert main(argv) == code
    said = capsys.readouterr().out.strip().splitlines()
    assert said[-2] == "2/6 trials done, 0 aborted this session; campaign incomplete (run again to resume)"
    assert said[-1].startswith(f"next: resume it with: orchestrator run {protocol} --rig {rig} "), said[-1]
