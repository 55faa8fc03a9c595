"""Seeded simulations of compare's tests and intervals (tests/support/compare_sim.py): the type-I
error of the paired test across tasks and of the exact trend test, the coverage of the clustered
difference interval and of the Bradley-Terry intervals, each within Monte Carlo error of its
target (docs/statistics.md gives the figures of longer runs, bench/compare_sims.py)."""

from __future__ import annotations

from support.compare_sim import bradley_terry_coverage, paired_test, trend_null


def test_paired_test_across_tasks_keeps_its_level_and_its_interval_covers():
    mid, exact, coverage = paired_test(600, delta=0.0, seed=11)
    assert exact.value <= 0.05 + 2 * exact.se, exact          # the exact test is conservative
    assert mid.value <= 0.05 + 3 * mid.se, mid                # mid-p: close to the level
    assert abs(coverage.value - 0.95) <= 3 * coverage.se + 0.01, coverage
    power, _, coverage_alt = paired_test(300, delta=0.8, seed=12)
    assert power.value > 0.4, power                             # positive control: it does reject
    assert abs(coverage_alt.value - 0.95) <= 3 * coverage_alt.se + 0.01, coverage_alt


def test_trend_test_keeps_its_level():
    mid, exact = trend_null(2000, seed=13)
    assert exact.value <= 0.05 + 2 * exact.se, exact
    assert mid.value <= 0.05 + 3 * mid.se, mid
    assert exact.value < mid.value                              # the mid-p is the less conservative


def test_bradley_terry_intervals_cover():
    coverage = bradley_terry_coverage(80, reps=300, seed=14)
    assert abs(coverage.value - 0.95) <= 3 * coverage.se + 0.01, coverage
