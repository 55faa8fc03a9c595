"""Every sentence of one campaign's report rests on the data of the
rule or test that decides it. Each test rebuilds the issue's campaign in memory as the runner
records it, and checks the words against figures computed here by hand (the Beta-mixture
e-value 2^n/(n+1) for n one-sided discordant units, scipy's Fisher test, enumeration of every
sign pattern over marks), never by the project's statistics."""

from __future__ import annotations

import itertools
import re
from dataclasses import replace

import pytest
from scipy.stats import fisher_exact

from orchestrator.analysis.outcomes import OutcomeSet, TrialOutcome
from orchestrator.analysis.report import build_report, render_text, to_dict
from orchestrator.analysis.report.aborts import build_aborts
from orchestrator.analysis.stopping import stopping_decision
from support.campaign_sim import Scenario, run

EVALUE = {"kind": "evalue", "max_layouts": 60}


def _outcome(mark: str, repeat: int, policy: str, success: bool | None, slot: int, **kw) -> TrialOutcome:
    return TrialOutcome(layout=mark, repeat=repeat, policy=policy, success=success, slot=slot, **kw)


def _campaign(rows: list[tuple[str, int, dict[str, bool | None]]], policies: tuple[str, ...],
              **kw) -> OutcomeSet:
    """rows: (mark, repeat, {policy: success or None}); stop_reason from the runner's rule."""
    outs = [_outcome(m, r, p, ok, 10 * i + j) for i, (m, r, per) in enumerate(rows)
            for j, (p, ok) in enumerate(per.items())]
    proto = {"policies": {p: {} for p in policies}, "analysis": {"alpha": 0.05, "stopping": EVALUE}}
    decision = stopping_decision(outs, proto)
    return OutcomeSet(outcomes=tuple(outs), policies=policies, source="memory", label_source="physics",
                      stopping=EVALUE, stop_reason=decision.reason if decision.stop else None, **kw)


def _beta_mixture_one_sided(n: int) -> float:
    """The e-value of n discordant units all on one side: B(n + 1, 1) / 0.5^n = 2^n / (n + 1)."""
    return 2 ** n / (n + 1)


def test_the_verdict_names_the_winner_the_rule_stopped_on():
    """3 repeats; 8 complete marks each won by A once (A-only, both, neither): the rule stops on
    8-0 discordant marks (e = 2^8/9 = 28.4 >= 20). Five more marks hold two B-only pairs each and a
    third repeat labelled unsure, so the pooled pairs read 8 A-only to 10 B-only. The verdict
    named B (-6 points, from the pooled table); it names A, with the difference on the rule's
    marks (8 A-only of 24 pairs), and a note gives the 10 other pairs."""
    rows = []
    for m in range(8):
        rows += [(f"M{m}", 0, {"A": True, "B": False}), (f"M{m}", 1, {"A": True, "B": True}),
                 (f"M{m}", 2, {"A": False, "B": False})]
    for m in range(8, 13):
        rows += [(f"M{m}", 0, {"A": False, "B": True}), (f"M{m}", 1, {"A": False, "B": True}),
                 (f"M{m}", 2, {"A": None, "B": True})]
    data = _campaign(rows, ("A", "B"))
    assert "8-0 discordant marks, A ahead" in (data.stop_reason or "")
    (c,) = build_report(data).comparisons
    assert c.evalue.e_value == pytest.approx(_beta_mixture_one_sided(8)) and c.significant
    assert c.verdict.startswith("A better than B"), c.verdict
    assert "difference +33 points on the 8 marks the rule counts" in c.verdict     # 8/24 by hand
    (note,) = [n for n in c.notes if "not counted" in n]
    assert "10 other pairs" in note and "0 A-only, 10 B-only" in note
    rule = to_dict(build_report(data))["comparisons"][0]["rule"]
    assert rule["units"] == 8 and rule["pairs"] == 24 and rule["table"]["a_only"] == 8


def test_a_policy_that_never_ran_takes_nothing_from_the_other_pairs():
    """Three policies; every attempt of C aborted by the rig (settled: excluded). A vs B is 13-0
    over 20 layouts: e = 2^13/14 = 585 >= 3/0.05. The rule kept a block only if every policy was
    known on it, so it saw nothing (e 1.0); it counts per pair now, stops, and the report agrees."""
    rows = [(f"L{i:02d}", 0, {"A": True, "B": i >= 13, "C": None}) for i in range(20)]
    outs = [_outcome(m, r, p, ok, 10 * i + j, **({"settled": "excluded", "abort_classes": ("rig",) * 4}
                                                   if p == "C" else {}))
            for i, (m, r, per) in enumerate(rows) for j, (p, ok) in enumerate(per.items())]
    proto = {"policies": {"A": {}, "B": {}, "C": {}}, "analysis": {"alpha": 0.05, "stopping": EVALUE}}
    decision = stopping_decision(outs, proto)
    assert decision.stop and decision.e_value == pytest.approx(_beta_mixture_one_sided(13))
    assert _beta_mixture_one_sided(13) >= 3 / 0.05
    data = OutcomeSet(outcomes=tuple(outs), policies=("A", "B", "C"), source="memory", label_source="physics",
                      stopping=EVALUE, stop_reason=decision.reason)
    ab = build_report(data).comparisons[0]
    assert (ab.a, ab.b) == ("A", "B") and ab.evalue.e_value == pytest.approx(_beta_mixture_one_sided(13))
    assert ab.verdict.startswith("A better than B") and "probably smaller" not in ab.verdict


def _three_policy_early_stop() -> OutcomeSet:
    """A succeeds, B fails on every layout, C on every other: the rule stops on A vs B at 10-0
    (e = 2^10/11 = 93 >= 60); A vs C and B vs C are 5-0 (e = 5.3) and not established."""
    return _campaign([(f"L{i:02d}", 0, {"A": True, "B": False, "C": i % 2 == 0}) for i in range(10)],
                     ("A", "B", "C"))


def test_no_stopped_on_other_labels_note_on_a_pair_the_stop_did_not_name():
    data = _three_policy_early_stop()
    assert "for A vs B (10-0 discordant, A ahead)" in (data.stop_reason or "")
    r = build_report(data)
    notes = {(c.a, c.b): [n for n in c.notes if "labels of that moment" in n] for c in r.comparisons}
    assert notes == {("A", "B"): [], ("A", "C"): [], ("B", "C"): []}
    assert [c.significant for c in r.comparisons] == [True, False, False]
    # the note stays where it is true: the named pair, relabelled after the stop
    relabelled = replace(data, outcomes=tuple(
        o if o.policy != "B" or o.layout > "L05" else _outcome(o.layout, 0, "B", True, o.slot or 0)
        for o in data.outcomes))
    ab = build_report(relabelled).comparisons[0]
    assert not ab.significant and any("on A vs B with the labels of that moment" in n for n in ab.notes)


def test_after_an_early_stop_the_headline_is_the_rule_and_fixed_n_figures_are_labelled():
    """Cochran's Q stood in the headline of every early-stopped three-policy campaign; now the
    headline holds the rule's decisions only, and every fixed-n figure in the details says it was
    computed after an optional stop. The difference's confidence sequence, wider than the rule's
    interval (it also bounds the discordance), says why it may reach 0 beside "better"."""
    r = build_report(_three_policy_early_stop())
    assert r.cochran is not None and "Cochran" not in r.headline
    assert r.headline.startswith("A better than B")
    text = render_text(r)
    fixed = [line for line in text.splitlines()
             if re.match(r"\s*(McNemar|Holm-adjusted|Difference [ABC] - |Cochran's Q =|Treated as unpaired|"
                         r"Per stratum)", line)]
    labelled = [line for line in text.splitlines() if "Computed after an optional stop" in line]
    assert fixed == [] and len(labelled) >= 3 * 3 + 1      # McNemar, Holm, difference per pair; Q
    assert all(c["fixed_n_after_optional_stop"] for c in to_dict(r)["comparisons"])
    (unit_line,) = [line for line in text.splitlines() if line.startswith("Unit of analysis")]
    assert "test: the pre-registered e-value rule" in unit_line and "McNemar" not in unit_line


def test_after_an_early_stop_the_headline_asks_for_no_more_layouts():
    """Seeded three-policy campaigns under the e-value rule (tests/support/campaign_sim.py: A 0.9,
    B 0.3, C 0.6, mark difficulty sd 1), stopped early on A vs B: the pairs the rule did not
    establish read "Need about N more layouts" in the headline of the stopped campaign, which will
    run no more. The headline now gives the rule and its decision only."""
    scenario = Scenario({"A": 0.9, "B": 0.3, "C": 0.6}, marks=40, repeats=1, spread=1.0, evalue=True,
                        max_layouts=40)
    checked = 0
    for seed in range(6):
        data = run(scenario, seed)
        if not (data.stop_reason or "").startswith("stopped early by the pre-registered e-value rule"):
            continue
        r = build_report(data)
        open_pairs = [c for c in r.comparisons if not c.significant]
        assert re.search(r"more layouts?\b", r.headline, re.IGNORECASE) is None, r.headline
        for c in open_pairs:
            assert f"{c.a} vs {c.b}: not established when the e-value rule stopped the campaign" in r.headline
            assert c.more_layouts_needed is None and "stopped the campaign early" in c.more_layouts_note
        checked += len(open_pairs)
    assert checked >= 6, checked       # count guard: at least six open pairs in stopped campaigns


def test_aborts_the_rules_score_as_failures_are_not_called_re_run():
    """B's trials abort 12 times in 20 (`policy: failure`: scored as B's failures), A's never:
    the abort rates differ (scipy's Fisher test), and the warning said "aborts that were re-run
    are not outcomes" beside aborts that are outcomes."""
    outs = []
    for i in range(20):
        outs.append(_outcome(f"L{i:02d}", 0, "A", True, 2 * i))
        aborted = i < 12
        outs.append(_outcome(f"L{i:02d}", 0, "B", False if aborted else True, 2 * i + 1,
                             **({"abort_classes": ("policy",), "abort_causes": ("exception",),
                                 "settled": "failure"} if aborted else {})))
    rules = {"policy": "failure", "operator_unsafe": "failure", "operator_misplaced": "rerun",
             "operator_other": "rerun", "rig": "rerun", "max_reruns": 3}
    data = OutcomeSet(outcomes=tuple(outs), policies=("A", "B"), source="memory", label_source="physics",
                      abort_rules=rules)
    assert fisher_exact([[0, 20], [12, 8]])[1] <= 0.05
    section = build_aborts(data)
    assert section is not None
    (warning,) = [w for w in section.warnings if w.startswith("abort rates differ")]
    assert "re-run are not outcomes" not in warning
    assert "12 trials of B (the more often aborted policy) were scored as its failure" in warning
    # a re-run class keeps the old sentence, naming the policy
    rerun = replace(data, outcomes=tuple(
        o if o.policy == "A" or not o.abort_classes else
        _outcome(o.layout, 0, "B", True, o.slot or 0, abort_classes=("rig",), abort_causes=("usb",))
        for o in outs))
    section = build_aborts(rerun)
    assert section is not None
    (warning,) = [w for w in section.warnings if w.startswith("abort rates differ")]
    assert "re-run are not outcomes, so the comparison covers only the clean runs of B" in warning


def test_more_layouts_names_the_policies_of_its_own_comparison():
    """B vs C with 4 B-only and 1 C-only layouts of 20 said "(4/20 A-only, 1/20 B-only layouts)"."""
    rows = ([(1, 1, 0)] * 4 + [(1, 0, 1)] + [(1, 1, 1)] * 10 + [(0, 0, 0)] * 5)
    outs = [_outcome(f"L{i:02d}", 0, p, bool(ok), 3 * i + j) for i, v in enumerate(rows)
            for j, (p, ok) in enumerate(zip("ABC", v, strict=True))]
    data = OutcomeSet(outcomes=tuple(outs), policies=("A", "B", "C"), source="memory", label_source="physics")
    bc = build_report(data).comparisons[2]
    assert (bc.b, bc.a, bc.table.a_only, bc.table.b_only) == ("C", "B", 4, 1) and not bc.significant
    assert "(4/20 B-only, 1/20 C-only layouts)" in bc.more_layouts_note, bc.more_layouts_note
    assert "A-only" not in bc.more_layouts_note


def _sign_flip_p(d: list[int]) -> tuple[float, float]:
    """Exact and mid-p two-sided sign-flip p-values of S = sum d_k, by enumerating all 2^K signs."""
    s = abs(sum(d))
    totals = [sum(x * e for x, e in zip(d, signs, strict=True)) for signs in itertools.product((1, -1), repeat=len(d))]
    above = sum(1 for t in totals if t > s) / len(totals)
    equal = sum(1 for t in totals if t == s) / len(totals)
    return min(1.0, 2 * (above + equal)), min(1.0, 2 * (above + equal / 2))


def test_the_judges_disagree_line_tests_at_the_mark():
    """10 marks x 5 repeats; both policies succeed everywhere except on 6 marks, where A succeeds
    and the judges disagree on B in all 5 repeats. Counted as failures: 30 A-only pairs of 50.
    The line said "mid-p < 0.0001" (the 30 pairs as independent); the test that decides counts
    marks: 6 discordant marks all for A, mid-p 2 x 2^-6 / 2 = 0.016 by enumeration."""
    outs = []
    for m in range(10):
        for r in range(5):
            disputed = m < 6
            outs.append(_outcome(f"M{m}", r, "A", True, 100 * m + 2 * r))
            outs.append(_outcome(f"M{m}", r, "B", None if disputed else True, 100 * m + 2 * r + 1,
                                 disputed=disputed))
    data = OutcomeSet(outcomes=tuple(outs), policies=("A", "B"), source="memory", label_source="consensus")
    (c,) = build_report(data).comparisons
    (note,) = [n for n in c.notes if "judges disagree" in n]
    exact, mid = _sign_flip_p([5] * 6 + [0] * 4)
    assert mid == pytest.approx(0.015625) and exact == pytest.approx(0.03125)
    assert "30 A-only to 0 B-only of 50" in note
    assert f"mid-p {mid:.3f} over 6 discordant marks of 10" in note, note
    assert "< 0.0001" not in note
