"""`orchestrator plan`: numbers from the power functions, validation with exit 2."""

from __future__ import annotations

import pytest

from orchestrator import stats
from orchestrator.cli import main


def test_plan_prints_power_table(capsys):
    assert main(["plan", "--p-a", "0.9", "--p-b", "0.8", "--agreement", "0.85"]) == 0
    out = capsys.readouterr().out
    _, p10, p01, _ = stats.cell_probabilities(0.9, 0.8, 0.85)
    n80 = stats.layouts_needed(p10, p01, 0.8)
    n90 = stats.layouts_needed(p10, p01, 0.9)
    lines = out.splitlines()
    row80 = next(line for line in lines if line.strip().startswith("80%"))
    row90 = next(line for line in lines if line.strip().startswith("90%"))
    assert row80.split()[1] == str(n80) and row90.split()[1] == str(n90)
    assert row80.split()[-1] == "199"       # the unpaired normal formula, seeds/000
    assert "at least 5 discordant layouts" in out   # mid-p: 0.5^5 = 0.031 <= 0.05
    assert "2 x 0.5^k" in out


def test_plan_requested_power_and_exact_test(capsys):
    assert main(["plan", "--p-a", "0.9", "--p-b", "0.85", "--discordant", "0.1", "--power", "0.95",
                 "--test", "mcnemar_exact"]) == 0
    out = capsys.readouterr().out
    _, p10, p01, _ = stats.cell_probabilities(0.9, 0.85, discordance=0.1)
    n95 = stats.layouts_needed(p10, p01, 0.95, test="mcnemar_exact")
    row = next(line for line in out.splitlines() if line.strip().startswith("95%"))
    assert row.split()[1] == str(n95)
    assert "at least 6 discordant layouts" in out   # exact: 2 * 0.5^6 = 0.031


def test_plan_independent_default_is_said(capsys):
    assert main(["plan", "--p-a", "0.9", "--p-b", "0.8"]) == 0
    assert "assumed independent outcomes" in capsys.readouterr().out


@pytest.mark.parametrize("argv, fragment", [
    (["--p-a", "1.5", "--p-b", "0.8"], "--p-a must be in [0, 1]"),
    (["--p-a", "0.9", "--p-b", "-0.1"], "--p-b must be in [0, 1]"),
    (["--p-a", "0.9", "--p-b", "0.8", "--agreement", "0.95"], "impossible"),
    (["--p-a", "0.9", "--p-b", "0.8", "--discordant", "0.5"], "impossible"),
    (["--p-a", "0.9", "--p-b", "0.8", "--power", "1"], "--power must be in (0, 1)"),
    (["--p-a", "0.9", "--p-b", "0.8", "--alpha", "0"], "--alpha must be in (0, 1)"),
    (["--p-a", "0.8", "--p-b", "0.8"], "equal"),
    (["--p-a", "nan", "--p-b", "0.8"], "--p-a must be in [0, 1]"),
])
def test_plan_bad_input_exit_2_one_line(capsys, argv, fragment):
    assert main(["plan", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and fragment in err[0]


def test_plan_agreement_and_discordant_are_exclusive():
    with pytest.raises(SystemExit) as info:
        main(["plan", "--p-a", "0.9", "--p-b", "0.8", "--agreement", "0.8", "--discordant", "0.2"])
    assert info.value.code == 2


def test_plan_beyond_search_limit(capsys):
    assert main(["plan", "--p-a", "0.5", "--p-b", "0.49", "--max-layouts", "300"]) == 0
    assert "> 300" in capsys.readouterr().out
