"""One decision, one dataset: what the deciding rule of a pair counted, and notes on the pairs it
did not count.

Under the pre-registered e-value rule the verdict's winner, difference and interval come from
the units the rule counts (`stopping.RuleView`: per pair, the marks whose every scheduled repeat
is known for both policies of the pair), never from the pooled table of every known pair: a mark
with a repeat left unsure, or not yet run, holds pairs the rule does not count, and those pairs
can favour the other policy (the rule stopped on "8-0 discordant marks, A
ahead" while the pooled pairs read "B better than A"). Where the pooled pairs hold more than the
rule counted, a note says how many and what they show.

The notes beside a verdict that concern other data:
- the recorded stop, on the pair it named only, when the labels used here no longer support it;
- the judges' disagreements, with what the *deciding* test (the e-value on the rule's marks, the
  clustered test over marks with repeats, or McNemar) would give if they counted as failures.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from orchestrator.analysis import stats
from orchestrator.analysis.outcomes import OutcomeSet
from orchestrator.analysis.report.format import fmt_p, p_name
from orchestrator.analysis.stopping import RuleView

EARLY_STOP = "stopped early by the pre-registered e-value rule"


@dataclass(frozen=True)
class RuleData:
    """What the e-value rule counts for a vs b."""

    split: tuple[int, int]           # discordant units (A ahead, B ahead)
    table: stats.PairedTable         # the pairs on the units it counts, pooled
    units: int                       # marks complete for both (one repeat: layouts known for both)


def rule_data(rule: RuleView, a: str, b: str) -> RuleData:
    tables = rule.tables(a, b)
    pooled = stats.PairedTable(both=sum(t.both for t in tables), a_only=sum(t.a_only for t in tables),
                               b_only=sum(t.b_only for t in tables), neither=sum(t.neither for t in tables))
    return RuleData(stats.mark_split(tables), pooled, len(tables))


def other_pairs_note(rd: RuleData, table: stats.PairedTable, a: str, b: str, repeats: bool) -> tuple[str, ...]:
    """The pairs known for both policies that the rule does not count (marks not complete for
    both: a repeat unjudged, unsure or not yet run), and what they show."""
    extra = table.n - rd.table.n
    if extra <= 0:
        return ()
    unit = "mark" if repeats else "layout"
    x, y = table.a_only - rd.table.a_only, table.b_only - rd.table.b_only
    return (f"The e-value rule decides on the {rd.units} {unit}{'s' if rd.units != 1 else ''} complete for "
            f"{a} and {b} ({rd.table.n} pairs: {rd.table.a_only} {a}-only, {rd.table.b_only} {b}-only); "
            f"{extra} other pair{'s' if extra != 1 else ''}, on marks not complete for both (a repeat "
            f"unjudged, unsure or not run), {'are' if extra != 1 else 'is'} not counted: "
            f"{x} {a}-only, {y} {b}-only.",)


def named_pair(stop_reason: str | None, a: str, b: str) -> bool:
    """Did the recorded early stop name the pair a vs b (`stopping.stopping_decision`'s reason)?"""
    reason = stop_reason or ""
    return reason.startswith(EARLY_STOP) and f" for {a} vs {b} (" in reason


def stop_note(data: OutcomeSet, a: str, b: str, significant: bool, ev: stats.EValueResult) -> tuple[str, ...]:
    """The recorded stop and the verdict of the pair it named can differ only when the labels
    changed after the stop (the runner decides on physics in simulation, on the human consensus
    on hardware). Pairs the stop did not name get no note: the stop was not about them."""
    if named_pair(data.stop_reason, a, b) and not significant:
        return (f"The campaign was stopped early by the e-value rule on {a} vs {b} with the labels of that "
                f"moment; under the labels used here ({data.label_source}) the e-value is {ev.e_value:.2f} < "
                f"{ev.threshold:g}, so the stop stands but the difference is not established by these labels.",)
    return ()


def disagreement_note(data: OutcomeSet, a: str, b: str, evalue_rule: bool) -> tuple[str, ...]:
    """Judge disagreements that changed which layouts count, with the pre-registered rule and
    what the deciding test would give under the other rule (which layouts drop depends on the
    outcome). With repeats the test is the one over marks, never the pooled pairs."""
    disputed = {o.key for o in data.outcomes if o.disputed and o.policy in (a, b)}
    if not disputed:
        return ()
    units = "layout" + ("s" if len(disputed) != 1 else "")
    if data.disagreement == "failure":
        return (f"The judges disagree on {len(disputed)} {units} of {a} vs {b}; by the pre-registered rule "
                "(judging.disagreement: failure) a disagreement counts as a failure of the policy.",)
    alt = replace(data, outcomes=tuple(replace(o, success=False, failure_mode="judges disagree")
                                       if o.disputed and o.success is None else o for o in data.outcomes))
    pairs = alt.pairs(a, b)
    t = stats.paired_table([x[1] for x in pairs], [x[2] for x in pairs])
    return (f"The judges disagree on {len(disputed)} {units} of {a} vs {b}: by the pre-registered rule "
            "(judging.disagreement: unsure) they are left out until another judge decides; counted as "
            f"failures instead, the pairs would be {t.a_only} {a}-only to {t.b_only} {b}-only of {t.n}, and "
            f"the deciding test {_deciding_on(alt, a, b, evalue_rule)} (unadjusted).",)


def _deciding_on(data: OutcomeSet, a: str, b: str, evalue_rule: bool) -> str:
    """The deciding test's figure on `data`, naming its unit."""
    if evalue_rule:
        x, y = RuleView.of(data.outcomes, data.policies).split(a, b)
        return f"gives e-value {stats.evalue_discordant(x, y).e_value:.2f} ({x}-{y} discordant units)"
    by_mark: dict[str, list[tuple[bool, bool]]] = {}
    for (mark, _), sa, sb in data.pairs(a, b):
        by_mark.setdefault(mark, []).append((sa, sb))
    tables = [stats.paired_table([x for x, _ in v], [y for _, y in v]) for v in by_mark.values()]
    exact = data.primary == "mcnemar_exact"
    if any(t.n > 1 for t in tables):
        k = stats.clustered_mcnemar(tables)
        return (f"(over marks) gives {'exact p' if exact else 'mid-p'} {fmt_p(k.exact_p if exact else k.mid_p)} "
                f"over {k.discordant_marks} discordant marks of {k.marks}")
    t = stats.paired_table([x for v in by_mark.values() for x, _ in v], [y for v in by_mark.values() for _, y in v])
    mc = stats.mcnemar(t.a_only, t.b_only)
    return f"gives {p_name(data.primary)} {fmt_p(mc.exact_p if exact else mc.mid_p)} over {t.n} layouts"
