"""The simulations behind docs/statistics.md's figures for `orchestrator compare` (not a test;
prints figures): tests/support/compare_sim.py with more runs than the tests use.

Run: uv run python bench/compare_sims.py [--section NAME] [--runs N]
(sections: checkpoints, seeds, ladders, board, intervals, improvement, last-step; `--runs` scales the
last-step grid only)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from scipy import stats as st

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from support.compare_sim import (  # noqa: E402
    aggregate_coverage,
    board,
    bradley_terry_coverage,
    improvement_coverage,
    ladder_null,
    method_null,
    paired_test,
    rate_coverage,
    seed_pairing_sim,
    trend_null,
)


def show(name: str, rate) -> None:
    print(f"{name}: {rate.value:.4f} (SE {rate.se:.4f}, {rate.runs} runs)", flush=True)


def show_upper(name: str, rate) -> None:
    """A type-I error with its one-sided 95 % Clopper-Pearson upper bound."""
    hits = round(rate.value * rate.runs)
    upper = float(st.beta.ppf(0.95, hits + 1, rate.runs - hits)) if hits < rate.runs else 1.0
    print(f"{name}: {rate.value:.4f} (SE {rate.se:.4f}, upper 95% {upper:.4f}, {rate.runs} runs)", flush=True)


def checkpoints() -> None:
    mid, exact, coverage = paired_test(4000, delta=0.0, seed=1)
    show("paired across tasks, H0, 3 campaigns x 10 marks x 3 seeds: mid-p rejects", mid)
    show("  exact rejects", exact)
    show("  clustered 95% interval covers the difference", coverage)
    mid, exact, coverage = paired_test(2000, delta=0.8, seed=2)
    show("paired across tasks, log-odds +0.8: mid-p rejects (power)", mid)
    show("  clustered 95% interval covers the difference", coverage)
    mid, exact = trend_null(20000, seed=3)
    show("trend test, 3 steps x 40 layout runs, no trend: mid-p rejects", mid)
    show("  exact rejects", exact)
    show("Bradley-Terry 95% basic bootstrap, 6 policies, 3 campaigns x 20 marks: covers", bradley_terry_coverage(500, seed=4))
    show("Bradley-Terry 95% basic bootstrap, 6 policies, 10 campaigns x 20 marks: covers",
         bradley_terry_coverage(200, campaigns=10, seed=5))


def seeds() -> None:
    for seed_sd, seed in ((0.6, 101), (1.0, 102)):
        better, differ, coverage = method_null(1000, seed_sd, seed=seed)
        show(f"methods equal, seed log-odds sd {seed_sd}, 3 tasks x 10 marks x 3+3 seeds: 'better' (seed the unit)",
             better)
        show("  these checkpoints 'succeeded more often' (they do differ)", differ)
        show("  Welch t 95% interval of the mean difference covers 0", coverage)
    power, _, _ = method_null(500, 0.6, delta=1.5, seed=103)
    show("methods +1.5 log-odds, seed sd 0.6: 'better' (power)", power)
    for delta, seed in ((0.0, 104), (0.8, 105)):
        paired, unpaired = seed_pairing_sim(1000, 1.0, delta=delta, seed=seed)
        what = "equal methods" if delta == 0 else f"X +{delta} log-odds"
        show(f"seeds sharing a shift N(0, 1) by number (own sd 0.3), 3 tasks x 10 marks x 3 seed pairs, {what}: "
             "'better', paired by seed (pre-registered)", paired)
        show("  'better', seeds unpaired (the default)", unpaired)


def ladders() -> None:
    for steps, seed in ((2, 111), (3, 112)):
        trend, last, _ = ladder_null(2000, repeats=5, step_sd=1.5, steps=steps, seed=seed)
        show(f"ladder of {steps} steps, no trend on average, per-mark step effects sd 1.5, 20 marks x 5 repeats: "
             "'rises/falls'", trend)
        show("  'still improves / is worse'", last)


def last_step(runs: int) -> None:
    """The last-step statement's type-I error over a grid of ladders (steps equal on average)."""
    for marks, repeats, step_sd, steps in ((20, 5, 1.5, 3), (20, 5, 1.5, 2), (20, 3, 1.5, 2), (20, 1, 1.5, 2),
                                           (10, 5, 1.5, 2), (40, 5, 1.5, 2), (20, 5, 0.0, 2), (10, 1, 0.0, 2)):
        _, mid, exact = ladder_null(runs, repeats=repeats, step_sd=step_sd, steps=steps, marks=marks,
                                    seed=marks * 1000 + repeats * 100 + int(step_sd * 10) + steps)
        where = f"{steps} steps, {marks} marks x {repeats} repeats, per-mark step effects sd {step_sd}"
        show_upper(f"'still improves / is worse', {where}: mid-p", mid)
        show_upper("  exact p", exact)


def board_sims() -> None:
    equal, _, coverage = board(500, (0.0, 0.0, 0.0, 0.0), seed=121)
    show("leaderboard, 4 equal policies, 20 marks: boards with a 'separated'", equal)
    show("  head-to-head 95% interval covers", coverage)
    for campaigns, seed in ((1, 122), (3, 123)):
        _, leader, coverage = board(500, (3.0, 0.0, -0.3), campaigns=campaigns, seed=seed)
        show(f"leaderboard, leader +3 log-odds, {campaigns} x 20 marks: leader separated from the runner-up", leader)
        show("  head-to-head 95% interval covers", coverage)


def intervals() -> None:
    for repeats, mark_sd, seed in ((3, 1.2, 131), (5, 2.0, 132)):
        per_seed, per_step = rate_coverage(1000, repeats, mark_sd=mark_sd, seed=seed)
        show(f"per-seed clustered Wilson 95%, 20 marks x {repeats} repeats, mark sd {mark_sd}: covers", per_seed)
        show("  per-step", per_step)
    for n, sd, seed in ((3, 0.6, 141), (3, 1.0, 142), (5, 1.0, 143), (10, 1.0, 144)):
        mean, iqm, task = aggregate_coverage(400, n, sd, reps=1000, seed=seed)
        show(f"3 tasks x {n} seeds, seed sd {sd}: the mean's t interval (Welch-Satterthwaite) covers", mean)
        show("  the IQM's stratified bootstrap covers", iqm)
        show("  each task's Student t interval over seeds covers", task)


def improvement() -> None:
    """The probability of improvement's and the profiles' stratified bootstrap 95% intervals."""
    for n, sd, delta, seed in ((3, 0.6, 0.0, 151), (3, 1.0, 0.0, 152), (3, 1.0, 0.5, 153), (5, 1.0, 0.0, 154),
                               (10, 1.0, 0.0, 155), (10, 0.6, 0.5, 156)):
        p, profile = improvement_coverage(400, n, sd, delta=delta, seed=seed)
        where = f"3 tasks x {n} seeds, seed sd {sd}, X +{delta} log-odds"
        show(f"P(X > Y) stratified bootstrap 95%, {where}: covers", p)
        for tau, rate in zip((0.25, 0.5, 0.75, 0.9), profile, strict=True):
            show(f"  profile at tau {tau}: covers", rate)


SECTIONS = {"checkpoints": checkpoints, "seeds": seeds, "ladders": ladders, "board": board_sims,
            "intervals": intervals, "improvement": improvement}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--section", choices=(*SECTIONS, "last-step"), action="append")
    parser.add_argument("--runs", type=int, default=20000)
    args = parser.parse_args()
    for name in args.section or (*SECTIONS, "last-step"):
        if name == "last-step":
            last_step(args.runs)
        else:
            SECTIONS[name]()


if __name__ == "__main__":
    main()
