"""The campaign simulator that can fail the report's tests (tests/support/campaign_sim.py) and the
code path of bench/report_type1.py, whose figures (type-I error of "better" under equal
policies, coverage of the verdict's interval) docs/statistics.md gives. Small runs: the bench
runs the large ones."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from orchestrator.analysis.report import build_report
from support.campaign_sim import Scenario, run

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location("report_type1", ROOT / "bench" / "report_type1.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_simulator_draws_what_it_says():
    """Unsure labels leave outcomes unknown, a missing policy never has one (its trials settled
    as excluded), per-mark effects make A and B differ by mark though equal on average."""
    s = Scenario({"A": 0.6, "B": 0.6, "C": 0.6}, marks=20, repeats=3, mark_effect=1.5, unsure=0.2, missing=("C",))
    data = run(s, seed=4)
    mine = {p: [o for o in data.outcomes if o.policy == p] for p in "ABC"}
    assert len(mine["A"]) == 60 and all(o.success is None and o.settled == "excluded" for o in mine["C"])
    unknown = sum(o.success is None for o in mine["A"] + mine["B"]) / 120
    assert 0.1 <= unknown <= 0.3
    per_mark = {}
    for o in mine["A"] + mine["B"]:
        if o.success is not None:
            per_mark.setdefault(o.layout, {"A": [], "B": []})[o.policy].append(o.success)
    gaps = [sum(v["A"]) / len(v["A"]) - sum(v["B"]) / len(v["B"]) for v in per_mark.values() if v["A"] and v["B"]]
    assert max(gaps) >= 0.5 and min(gaps) <= -0.5 and len(gaps) >= 15


def test_a_never_measured_third_policy_leaves_the_rule_its_power():
    """A 0.95 vs B 0.2 under the e-value rule with C never measured: the rule stops early in most
    campaigns (before, it kept no block without C and never stopped)."""
    s = Scenario({"A": 0.95, "B": 0.2, "C": 0.5}, marks=30, repeats=1, spread=0.5, missing=("C",), evalue=True,
                 max_layouts=30)
    stops = [run(s, seed=i).stop_reason or "" for i in range(8)]
    early = [r for r in stops if r.startswith("stopped early") and "for A vs B" in r]
    assert len(early) >= 6, stops


def test_the_type1_bench_measures_and_finds_a_true_difference():
    """bench/report_type1.py's measure on a few campaigns: the keys and ranges, and a positive
    control (a large difference is found: the measure can say "better")."""
    bench = _bench()
    m = bench.measure(bench.SCENARIOS["repeats, unsure labels"], campaigns=6)
    assert set(m) == {"type1", "se", "upper95", "coverage"} and 0 <= m["type1"] <= m["upper95"] <= 1
    strong = Scenario({"A": 0.95, "B": 0.2}, marks=20, repeats=3, spread=0.5, unsure=0.1)
    found = bench.measure(strong, campaigns=4)
    assert found["type1"] == 1.0
    r = build_report(run(strong, seed=1))
    assert r.comparisons[0].verdict.startswith("A better than B")
