"""The report's start_check and interventions sections from planted store rows: which start check
admits which attempt (the last before it, overrides between them), the Mann-Whitney test against
a brute-force permutation oracle, the agreement of the check with the judges' invalid starts,
and the intervention counts by cause."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from orchestrator.analysis import stats
from orchestrator.analysis.outcomes import JudgeLabel, OutcomeSet, TrialOutcome
from orchestrator.analysis.report.build import build_report
from orchestrator.analysis.report.json import to_dict
from orchestrator.analysis.start_records import StartRecord, intervention_counts, start_records
from support.oracles import holm_oracle


def _check(at, slot, passes, dx=1.0, dy=0.0, dyaw=2.0, mode="enforce"):
    return {"kind": "start_check", "at": at, "slot": slot,
            "data": json.dumps({"passes": passes, "dx_mm": dx, "dy_mm": dy, "dyaw_deg": dyaw, "mode": mode})}


def _attempt(i, slot, started, abort_class=None):
    return {"id": i, "slot": slot, "episode_id": f"ep{i}", "started_at": started, "abort_class": abort_class}


def test_each_attempt_takes_the_last_check_before_it_and_the_override_between():
    events = [
        _check(1.0, 0, False, dx=10.0), {"kind": "start_correction", "at": 1.1, "slot": 0},
        _check(1.2, 0, True, dx=2.0),                                      # admits attempt 1
        _check(3.0, 0, False, dx=9.0), {"kind": "start_override", "at": 3.1, "slot": 0},   # admits 2
        _check(5.0, 1, True, dx=0.0, dy=3.0),                              # admits 3
        _check(9.0, 1, False, dx=30.0),                                    # no attempt followed
    ]
    attempts = [_attempt(1, 0, 2.0, "rig"), _attempt(2, 0, 4.0), _attempt(3, 1, 6.0, "invalid_start"),
                _attempt(4, 2, 7.0)]                                        # slot 2: never checked
    records = start_records(events, attempts)
    assert [(r.episode_id, r.passes, r.overridden, r.offset_mm, r.judged_invalid) for r in records] == [
        ("ep1", True, False, 2.0, False), ("ep2", False, True, 9.0, False), ("ep3", True, False, 3.0, True)]
    counts = intervention_counts(events + [{"kind": "operator_stop", "at": 9.5, "slot": 1}],
                                 attempts + [_attempt(5, 1, 8.0, "operator_unsafe")])
    assert counts == {"placement": 5, "correction": 1, "override": 1, "cube lost": 0, "stop": 2}


def _reset(at, slot, passes):
    return {"kind": "cube_reset", "at": at, "slot": slot, "data": json.dumps({"passes": passes})}


def test_each_act_of_the_operator_after_an_autonomous_reset_is_counted_once():
    events = [
        _check(1.0, 0, True),                                              # slot 0: placed by hand, cued
        _reset(2.0, 1, True), _check(2.1, 1, True),                        # slot 1: the arm placed it
        _reset(3.0, 2, False), _check(3.1, 2, False),                      # slot 2: the arm missed,
        {"kind": "start_correction", "at": 3.2, "slot": 2}, _check(3.3, 2, True),   # the person corrects once
        {"kind": "cube_lost", "at": 4.0, "slot": 3}, _reset(4.01, 3, False), _check(4.1, 3, False),
        {"kind": "start_correction", "at": 4.2, "slot": 3}, _check(4.3, 3, False),  # the lost cube fetched,
        {"kind": "start_correction", "at": 4.4, "slot": 3}, _check(4.5, 3, True),   # then corrected again
        _reset(5.0, 1, True), _check(5.1, 1, True),                        # slot 1's re-run: the arm again
    ]
    attempts = [_attempt(1, 0, 1.5), _attempt(2, 1, 2.5, "rig"), _attempt(3, 2, 3.5), _attempt(4, 3, 4.6),
                _attempt(5, 1, 5.5), _attempt(6, 4, 6.0)]                   # slot 4: cued, by hand
    counts = intervention_counts(events, attempts)
    assert counts == {"placement": 2, "correction": 2, "override": 0, "cube lost": 1, "stop": 0}
    # the control: without the arm's resets every attempt was a person's placement
    plain = [e for e in events if e["kind"] != "cube_reset"]
    assert intervention_counts(plain, attempts)["placement"] == len(attempts) == 6


def _exact_mann_whitney(x, y):
    """Brute force: the two-sided permutation p of U over every split of the pooled sample."""
    pooled = list(x) + list(y)

    def u(a, b):
        return sum((p > q) + 0.5 * (p == q) for p in a for q in b)

    centre = len(x) * len(y) / 2
    observed = abs(u(x, y) - centre)
    splits = list(itertools.combinations(range(len(pooled)), len(x)))
    extreme = 0
    for idx in splits:
        a = [pooled[i] for i in idx]
        b = [pooled[i] for i in range(len(pooled)) if i not in idx]
        extreme += abs(u(a, b) - centre) >= observed - 1e-12
    return extreme / len(splits)


@pytest.mark.parametrize("x, y", [([1.2, 3.4, 0.5, 2.2], [5.1, 4.4, 6.0, 3.9, 7.7]),
                                  ([0.1, 0.2, 0.3], [0.15, 0.25, 0.35, 0.05]),
                                  ([2.0, 9.0, 4.0, 1.0, 8.0], [3.0, 5.0, 6.0, 7.0])])
def test_mann_whitney_is_the_exact_permutation_test_for_small_untied_samples(x, y):
    assert stats.mann_whitney(x, y) == pytest.approx(_exact_mann_whitney(x, y), abs=1e-12)


def test_mann_whitney_of_an_empty_or_constant_sample_is_one():
    assert stats.mann_whitney([], [1.0, 2.0]) == 1.0
    assert stats.mann_whitney([10.0, 10.0], [10.0]) == 1.0   # scipy: NaN (a simulated hand's fixed offset)


def _data(records, labels=()):
    outcomes = []
    for r in records:
        policy = "A" if r.slot % 2 == 0 else "B"
        outcomes.append(TrialOutcome(layout=f"M{r.slot // 2:02d}", repeat=0, policy=policy, success=True,
                                     slot=r.slot, episode_id=r.episode_id, state="done"))
    return OutcomeSet(outcomes=tuple(outcomes), policies=("A", "B"), source="planted", label_source="physics",
                      start_records=tuple(records), human_labels=tuple(labels),
                      interventions={"placement": len(records), "correction": 0, "override": 1, "cube lost": 0,
                                     "stop": 0})


def _record(slot, offset, passes=True, invalid=False, overridden=False):
    return StartRecord(slot=slot, episode_id=f"ep{slot}", passes=passes, overridden=overridden,
                       dx_mm=offset, dy_mm=0.0, dyaw_deg=-offset / 2, judged_invalid=invalid)


def test_placement_per_policy_its_test_and_the_agreement_with_the_judges():
    # A's cubes 1-3 mm off, B's 6-9 mm (advise: they ran); one of B's refused starts a judge sent back
    a = [1.0, 2.0, 3.0, 1.5, 2.5]
    b = [6.0, 7.0, 8.0, 9.0, 6.5]
    records = [_record(2 * i, off) for i, off in enumerate(a)]
    records += [_record(2 * i + 1, off, passes=False, invalid=(i == 0), overridden=(i == 1)) for i, off in enumerate(b)]
    labels = [JudgeLabel(r.episode_id, "ana", "success", None) for r in records if not r.judged_invalid]
    report = to_dict(build_report(_data(records, labels)))
    rows = report["start_check"]["placement_error"]
    assert rows["A"]["offset_p50_mm"] == float(np.median(a)) and rows["B"]["offset_p95_mm"] == round(
        float(np.percentile(b, 95)), 2)
    assert rows["A"]["yaw_p50_deg"] == float(np.median([x / 2 for x in a]))
    assert rows["B"]["started_on_failed_check"] == 5 and rows["B"]["overridden"] == 1
    (test,) = report["start_check"]["placement_tests"]
    assert test["mann_whitney_p"] == pytest.approx(_exact_mann_whitney(a, b)) and test["mann_whitney_p"] < 0.05
    assert any("placement error differs between A and B" in w for w in report["warnings"])
    agreement = report["start_check"]["judges_agreement"]
    assert agreement["attempts"] == 10
    assert agreement["table"] == {"refused_invalid": 1, "refused_valid": 4, "passed_invalid": 0, "passed_valid": 5}
    assert agreement["agreement"] == 0.6
    kappa = stats.cohen_kappa([not r.passes for r in records], [r.judged_invalid for r in records])
    assert agreement["kappa"] == pytest.approx(kappa, abs=1e-4)
    assert report["interventions"]["per_100_trials"] == 110.0 and report["interventions"]["total"] == 11


def test_without_start_checks_the_section_is_null_and_the_interventions_stay():
    report = to_dict(build_report(_data([])))
    assert report["start_check"] is None
    assert report["interventions"]["by_cause"]["override"] == 1 and report["interventions"]["per_100_trials"] is None


def test_three_policies_with_repeats_get_a_row_each_and_holm_over_every_pair():
    # A and B placed alike (1-3 mm), C's cubes 6-9 mm off; two repeats of 6 marks, policies by slot
    offsets = {"A": [1.0, 2.0, 3.0, 1.5, 2.5, 2.2] * 2, "B": [1.2, 2.1, 2.9, 1.4, 2.6, 1.9] * 2,
               "C": [6.0, 7.0, 8.0, 9.0, 6.5, 7.5] * 2}
    records, outcomes = [], []
    for i in range(36):
        policy, k = "ABC"[i % 3], i // 3
        records.append(_record(i, offsets[policy][k]))
        outcomes.append(TrialOutcome(layout=f"M{k % 6:02d}", repeat=k // 6, policy=policy, success=True, slot=i,
                                     episode_id=f"ep{i}", state="done"))
    data = OutcomeSet(outcomes=tuple(outcomes), policies=("A", "B", "C"), source="planted", label_source="physics",
                      start_records=tuple(records), human_labels=(),
                      interventions=dict.fromkeys(("placement", "correction", "override", "cube lost", "stop"), 0))
    section = to_dict(build_report(data))["start_check"]
    assert sorted(section["placement_error"]) == ["A", "B", "C"]
    assert all(row["checked"] == 12 for row in section["placement_error"].values())
    tests = section["placement_tests"]
    assert [(t["a"], t["b"]) for t in tests] == [("A", "B"), ("A", "C"), ("B", "C")]
    raw = [stats.mann_whitney(offsets[t["a"]], offsets[t["b"]]) for t in tests]
    holm = holm_oracle(raw)                                          # statsmodels as the oracle
    assert [t["holm_p"] for t in tests] == pytest.approx(holm, abs=1e-4)
    assert tests[0]["holm_p"] > 0.05 and tests[1]["holm_p"] < 0.05 and tests[2]["holm_p"] < 0.05
