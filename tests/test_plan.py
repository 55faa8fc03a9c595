"""`orchestrator plan`: numbers from the power functions, validation with exit 2."""

from __future__ import annotations

import pytest
from scipy import stats as sps

from orchestrator.analysis import stats
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
    assert row80.split()[-1] == str(stats.fisher_trials_needed(0.9, 0.8, 0.8))   # exact Fisher, checked below
    assert "at least 5 discordant layouts" in out   # mid-p: 0.5^5 = 0.031 <= 0.05
    assert "smallest mid-p is 0.5^k (exact test: 2 x 0.5^k)" in out
    # the last line quotes the mid-p floor 0.5^k of the expected discordant count
    last = lines[-1]
    k = round(n80 * (p10 + p01))
    assert f"about {k} discordant layouts" in last and f"smallest mid-p they allow is {0.5 ** k:.2g}." in last


def test_plan_requested_power_and_exact_test(capsys):
    assert main(["plan", "--p-a", "0.9", "--p-b", "0.85", "--discordant", "0.1", "--power", "0.95",
                 "--test", "mcnemar_exact"]) == 0
    out = capsys.readouterr().out
    _, p10, p01, _ = stats.cell_probabilities(0.9, 0.85, discordance=0.1)
    n95 = stats.layouts_needed(p10, p01, 0.95, test="mcnemar_exact")
    row = next(line for line in out.splitlines() if line.strip().startswith("95%"))
    assert row.split()[1] == str(n95)
    assert "at least 6 discordant layouts" in out   # exact: 2 * 0.5^6 = 0.031
    last = out.strip().splitlines()[-1]
    k = round(stats.layouts_needed(p10, p01, 0.8, test="mcnemar_exact") * 0.1)
    assert f"smallest exact p they allow is {2 * 0.5 ** k:.2g}." in last


def _fisher_power_brute(p1, p2, n, alpha=0.05):
    """Oracle: enumerate every (k1, k2) that carries probability, scipy's own Fisher test on
    each table. Returns (power from those tables, probability of the tables left out): the
    true power lies between the first and the sum."""
    pm1 = sps.binom.pmf(range(n + 1), n, p1)
    pm2 = sps.binom.pmf(range(n + 1), n, p2)
    keep1 = [k for k in range(n + 1) if pm1[k] > 1e-5]
    keep2 = [k for k in range(n + 1) if pm2[k] > 1e-5]
    total = 0.0
    for k1 in keep1:
        for k2 in keep2:
            if sps.fisher_exact([[k1, n - k1], [k2, n - k2]]).pvalue < alpha:
                total += pm1[k1] * pm2[k2]
    return total, 1 - pm1[keep1].sum() * pm2[keep2].sum()


@pytest.mark.slow   # seconds of simulation or enumeration: the full run, not the fast lane
@pytest.mark.parametrize("p2, n", [(0.6, 36), (0.7, 69)])
def test_unpaired_column_is_exact_fisher_power(capsys, p2, n):
    # Fisher needs 36 and 69 trials per policy (the normal formula said 32 and 62)
    (below, miss_below), (at, miss_at) = _fisher_power_brute(0.9, p2, n - 1), _fisher_power_brute(0.9, p2, n)
    assert below + miss_below < 0.8 <= at
    assert below <= stats.fisher_power(0.9, p2, n - 1) <= below + miss_below + 1e-9
    assert at <= stats.fisher_power(0.9, p2, n) <= at + miss_at + 1e-9
    assert stats.fisher_trials_needed(0.9, p2, 0.8) == n
    assert main(["plan", "--p-a", "0.9", "--p-b", str(p2)]) == 0
    row80 = next(line for line in capsys.readouterr().out.splitlines() if line.strip().startswith("80%"))
    assert row80.split()[-1] == str(n)


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


@pytest.mark.subprocess
def test_plan_stopping_evalue_gives_the_rule_s_layouts():
    """`plan --stopping evalue` (a fresh process): the layouts the e-value rule needs, by its exact
    power (enumeration-checked in test_stats_evalue_rule.py). The issue's case: the fixed-n test's
    53 layouts give the rule only 0.49 power; it needs 88."""
    from support.cli import run_module

    result = run_module("plan", "--p-a", "0.5", "--p-b", "0.3", "--discordant", "0.3", "--stopping", "evalue")
    assert result.code == 0, result.err
    rows = [line.split() for line in result.out.split("With the pre-registered e-value rule")[1].splitlines()
            if line.strip().endswith(")") and "%" in line]
    assert [(r[0], r[1]) for r in rows] == [("80%", "88"), ("90%", str(stats.evalue_layouts_needed(0.25, 0.05, 0.9)))]
    assert stats.evalue_power(88, 0.25, 0.05) >= 0.8 > stats.evalue_power(87, 0.25, 0.05)
    assert stats.evalue_power(53, 0.25, 0.05) == pytest.approx(0.494, abs=0.001)
    assert "(fixed-n test: 53)" in result.out
    plain = run_module("plan", "--p-a", "0.5", "--p-b", "0.3", "--discordant", "0.3")
    assert "e-value rule" not in plain.out
