"""What a user meets in the first hour, in-process: every verb's and action's help says what it
means (no argparse escapes left in a description)."""

from __future__ import annotations

import argparse

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
