"""The report's intervals cover what they say, or print what they cover: the per-policy rate with
repeats at 0 % and 100 % and near them, Cohen's kappa with few of one label, the exact Poisson
interval on "per 100 trials", trials (not attempts) started on a failed check, and the
placement warning under `reset: auto`. Oracles: Wilson's formula and Garwood's bounds written
out here with scipy's t and Poisson distributions; coverage by seeded simulation
(tests/support/interval_sim.py; the grids: bench/interval_coverage.py)."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest
from scipy import optimize
from scipy import stats as st

from orchestrator.analysis import stats
from orchestrator.analysis.outcomes import OutcomeSet, TrialOutcome
from orchestrator.analysis.report import build_report, render_text, to_dict
from orchestrator.analysis.start_records import StartRecord
from support.interval_sim import kappa_coverage, poisson_coverage, rate_coverage

ROOT = Path(__file__).resolve().parents[1]


def test_a_rate_of_100_percent_with_repeats_counts_each_mark_once():
    """100/100 on 20 marks x 5 repeats printed [0.958, 1.000] (no design effect at 100 %); with the
    mark as the unit it is Wilson's lower bound for 20 of 20 with t(19): 20 / (20 + t^2) = 0.820."""
    t = st.t.ppf(0.975, 19)
    iv = stats.clustered_wilson([(5, 5)] * 20)
    assert iv.lo == pytest.approx(20 / (20 + t * t), abs=1e-9) and iv.hi == 1.0
    low = stats.clustered_wilson([(0, 5)] * 20)
    assert low.lo == 0.0 and low.hi == pytest.approx(1 - 20 / (20 + t * t), abs=1e-9)
    # with 100 of 100 a policy's row in the report says the same
    outs = [TrialOutcome(layout=f"M{m:02d}", repeat=r, policy=p, success=p == "A" or r % 2 == 0, slot=10 * m + 2 * r + i)
            for m in range(20) for r in range(5) for i, p in enumerate("AB")]
    r = build_report(OutcomeSet(outcomes=tuple(outs), policies=("A", "B"), source="memory", label_source="test"))
    assert (r.policies[0].interval.lo, r.policies[0].interval.hi) == pytest.approx((20 / (20 + t * t), 1.0))


@pytest.mark.parametrize("marks, repeats, rate, rho", [(20, 3, 0.9, 0.6), (20, 5, 0.95, 0.6)])
def test_the_rate_with_repeats_covers_near_100_percent(marks, repeats, rate, rho):
    """Beta-binomial marks (intra-mark correlation 0.6): the interval covered 0.90 and 0.84 (a
    handful of failures, all on one or two marks, gave a design effect near 1)."""
    cov, se = rate_coverage(marks, repeats, rate, rho, runs=1200, seed=marks + repeats)
    assert cov >= 0.93, (cov, se)


def test_kappa_with_few_of_one_label_prints_its_measured_coverage():
    """n = 20, prevalence 0.9, kappa 0.85: the interval labelled 95 % covered 0.80 (0.88 of the
    tables where it is defined). With fewer than 10 of a label the result carries the lowest
    coverage measured and the report prints it; on the tables labelled plainly it covers >= 0.93."""
    few = stats.binary_agreement([True] * 18 + [False] * 2, [True] * 17 + [False] * 3)
    assert few["kappa_ci_coverage"] is not None and few["kappa_ci_coverage"] < 0.93
    plain = stats.binary_agreement([True] * 25 + [False] * 25, [True] * 22 + [False] * 3 + [True] * 3 + [False] * 22)
    assert plain["kappa_ci_coverage"] is None
    checked = 0
    for n, prevalence, kappa in ((50, 0.7, 0.66), (100, 0.8, 0.85), (200, 0.9, 0.66)):
        cov, se, undefined = kappa_coverage(n, prevalence, kappa, runs=600, seed=n)
        assert cov >= 0.93 and undefined == 0, (n, prevalence, kappa, cov, se)
        checked += 1
    assert checked == 3
    physics = {f"e{i}": i < 17 for i in range(20)}
    judge = {f"e{i}": ("success" if i < 18 else "failure") for i in range(20)}
    data = OutcomeSet(outcomes=(), policies=("A", "B"), source="memory", label_source="test", physics=physics,
                      auto_labels=judge)
    text = render_text(build_report(data))
    assert f"its coverage was measured as low as {few['kappa_ci_coverage']:.2f}" in text


def _garwood_oracle(k: int, mean_scale: float) -> tuple[float, float]:
    """The exact Poisson bounds by solving P(X >= k; mu) = 0.025 and P(X <= k; mu) = 0.025 with
    scipy's Poisson distribution (not the chi-square form the code uses)."""
    lo = 0.0 if k == 0 else optimize.brentq(lambda mu: st.poisson.sf(k - 1, mu) - 0.025, 1e-9, 100)
    hi = optimize.brentq(lambda mu: st.poisson.cdf(k, mu) - 0.025, 1e-9, 100)
    return lo * mean_scale, hi * mean_scale


def test_interventions_per_100_trials_carry_the_exact_poisson_interval():
    """"2 interventions in 80 trials, 2.5 per 100 trials" had no interval: it is 0.3 to 9.0."""
    lo, hi = _garwood_oracle(2, 100 / 80)
    iv = stats.poisson_per_100(2, 80)
    assert (iv.estimate, iv.lo, iv.hi) == pytest.approx((2.5, lo, hi), abs=1e-6)
    assert round(lo, 1) == 0.3 and round(hi, 1) == 9.0
    outs = tuple(TrialOutcome(layout=f"L{i:02d}", repeat=0, policy=p, success=True, slot=2 * i + j)
                 for i in range(40) for j, p in enumerate("AB"))
    data = OutcomeSet(outcomes=outs, policies=("A", "B"), source="memory", label_source="test",
                      interventions={"placement": 0, "correction": 2})
    r = build_report(data)
    assert "2 interventions in 80 trials, 2.5 per 100 trials (exact Poisson 95% CI 0.3 to 9.0)" in render_text(r)
    assert to_dict(r)["interventions"]["per_100_trials_ci95"] == pytest.approx([lo, hi], abs=1e-6)
    cov, se = poisson_coverage(80, 0.025, runs=2000, seed=3)
    assert cov >= 0.95 - 2 * se


def _record(slot: int, passes: bool, dx: float) -> StartRecord:
    return StartRecord(slot=slot, episode_id=f"e{slot}", passes=passes, overridden=False, dx_mm=dx, dy_mm=0.0,
                       dyaw_deg=0.0, judged_invalid=False)


def test_a_failed_start_counts_trials_and_reset_auto_names_the_other_policy():
    """C's one trial was started three times on a failed check (aborted twice): "3 trials of C"
    counted attempts. A's cubes stand 2 mm off, B's 9 mm (Mann-Whitney rejects); under
    `reset: auto` the arm placed them after the previous episode, which the warning now says."""
    outs = tuple(TrialOutcome(layout=f"L{i:02d}", repeat=0, policy=p, success=True, slot=3 * i + j)
                 for i in range(12) for j, p in enumerate("ABC"))
    records = [_record(3 * i, True, 2.0 + 0.01 * i) for i in range(12)]
    records += [_record(3 * i + 1, True, 9.0 + 0.01 * i) for i in range(12)]
    records += [_record(2, False, 30.0)] * 3 + [_record(3 * i + 2, True, 5.0) for i in range(1, 12)]
    assert st.mannwhitneyu([2.0 + 0.01 * i for i in range(12)], [9.0 + 0.01 * i for i in range(12)]).pvalue < 0.001
    data = OutcomeSet(outcomes=outs, policies=("A", "B", "C"), source="memory", label_source="test",
                      start_records=tuple(records), reset_mode="auto")
    section = build_report(data).start_check
    assert section is not None
    (failed,) = [w for w in section.warnings if "failed start check" in w]
    assert failed.startswith("1 trial of C started on a failed start check (3 attempts"), failed
    (placed,) = [w for w in section.warnings if w.startswith("placement error differs between A and B")]
    assert "reset: auto" in placed and "other policy's episodes" in placed
    operator = OutcomeSet(outcomes=outs, policies=("A", "B", "C"), source="memory", label_source="test",
                          start_records=tuple(records))
    section = build_report(operator).start_check
    assert section is not None and not any("reset: auto" in w for w in section.warnings)


def test_the_coverage_bench_runs_every_section():
    """bench/interval_coverage.py's code path, at a few runs per point."""
    spec = importlib.util.spec_from_file_location("interval_coverage", ROOT / "bench" / "interval_coverage.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        bench.rate(2)
        bench.kappa(2)
        bench.poisson(20)
    text = out.getvalue()
    assert text.count("points, lowest") >= 3 and math.isfinite(float(text.split("lowest ")[1].split()[0]))
