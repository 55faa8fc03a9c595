"""The verdict of one comparison in words, and the one-line notes that go beside it.

Rules:
- the deciding test is the pre-registered primary (mid-p or exact; Holm-adjusted with 3+
  policies), or the e-value when the protocol pre-registers the e-value stopping rule;
- whenever mid-p and exact p fall on different sides of alpha, both are quoted (mid-p's actual
  size exceeds alpha for some n, e.g. 0.077 at 16 all-discordant pairs);
- when the test and the 95 % interval disagree, in either direction, a one-line note says so;
- after optional stopping the verdict quotes the anytime-valid confidence sequence and says
  that the fixed-n interval is not valid; after an early stop a pair the rule did not establish
  gets the rule's decision only (no "need about N more layouts": the campaign is over);
- numbers are printed with enough digits that an interval's bounds differ from each other and
  from the estimate (`format.points`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from orchestrator.analysis import stats
from orchestrator.analysis.report.format import fmt_p, p_name, points


@dataclass(frozen=True)
class Evidence:
    """What the verdict of a vs b rests on."""

    a: str
    b: str
    table: stats.PairedTable             # pooled pairs
    unit: str                            # layout | mark
    discordant_units: int                # discordant layouts, or marks with b_k != c_k
    primary: str
    alpha: float
    p: float                             # the primary p (Holm-adjusted with 3+ policies)
    p_raw: float                         # before adjustment
    mid_p: float                         # Holm-adjusted like p
    exact_p: float
    difference: stats.Interval           # the fixed-n interval (clustered with repeats)
    sequence: stats.Interval | None      # anytime-valid CS (e-value rule)
    evalue: stats.EValueResult
    evalue_rule: bool
    significant: bool
    share: stats.Interval | None = None  # e-value rule: CS for A's share of the rule's discordant units
    comparisons: int = 1                 # K pairwise comparisons (Holm; the rule's level 1 - alpha/K)
    rule_units: int = 0                  # the units the rule counts (complete marks / layouts)
    rule_table: stats.PairedTable | None = None   # e-value rule: the pairs on the units it counts
    stopped_early: bool = False          # the e-value rule stopped the campaign before its end


def interval_text(iv: stats.Interval, anytime: bool = False) -> str:
    est, lo, hi = points(iv.estimate, iv.lo, iv.hi)
    level = f"{100 * iv.level:g}%"
    kind = f"anytime-valid {level} confidence sequence" if anytime else f"{level} CI"
    return f"difference {est} points, {kind} {lo} to {hi}"


def share_text(e: Evidence) -> str:
    """The interval the e-value rule implies: A's share of the discordant units it counts, as an
    anytime-valid confidence sequence at the rule's level; it excludes 50 % exactly when the
    rule rejects (at 1/2 the mixture martingale is the e-value)."""
    iv = e.share
    assert iv is not None
    units = "marks" if e.unit == "mark" else "layouts"
    discordant = e.evalue.a_only + e.evalue.b_only
    share = f"{100 * iv.estimate:.0f}%" if discordant else "undefined"
    return (f"{e.a}'s share of the {discordant} discordant {units} {share}, anytime-valid "
            f"{100 * iv.level:.4g}% confidence sequence {100 * iv.lo:.1f}% to {100 * iv.hi:.1f}% "
            "(50% = no difference)")


def _rule_difference(e: Evidence) -> str:
    """The difference on the pairs the e-value rule counts (`decision.rule_data`): one decision,
    one dataset."""
    t = e.rule_table if e.rule_table is not None else e.table
    units = "marks" if e.unit == "mark" else "layouts"
    if t.n == 0:
        return f"no {units[:-1]} is complete for both yet"
    where = (f" on the {e.rule_units} {units} the rule counts" if e.rule_table is not None and t.n != e.table.n
             else "")
    return f"difference {points((t.a_only - t.b_only) / t.n)[0]} points{where}"


def _p_text(e: Evidence) -> tuple[str, str]:
    """(label, value) of the deciding statistic, quoting the other McNemar p when mid-p and
    exact p fall on different sides of alpha."""
    if e.evalue_rule:
        return "e-value", f"{e.evalue.e_value:.1f} (anytime-valid; decides at >= {e.evalue.threshold:g})"
    test = p_name(e.primary)
    label = test if math.isclose(e.p, e.p_raw) else f"Holm-adjusted {test}"
    if e.unit == "mark":
        label = f"{label} over marks"
    value = fmt_p(e.p)
    if (e.mid_p <= e.alpha) != (e.exact_p <= e.alpha):
        other, other_p = ("exact p", e.exact_p) if e.primary != "mcnemar_exact" else ("mid-p", e.mid_p)
        if e.comparisons > 1:
            other = f"Holm-adjusted {other}"
        value += f" ({other} {fmt_p(other_p)}: the two fall on different sides of {e.alpha:g})"
    return label, value


def verdict_text(e: Evidence, more: int | None, more_note: str) -> str:
    a, b, n = e.a, e.b, e.table.n
    if n == 0:
        return f"{a} vs {b}: no layout has a known outcome for both yet; nothing can be said."
    label, value = _p_text(e)
    if e.evalue_rule and e.share is not None:
        ci = f"{_rule_difference(e)}; {share_text(e)}"
        ahead = e.evalue.a_only > e.evalue.b_only        # the rule's own counts decide the winner
    else:
        shown = e.sequence if e.sequence is not None else e.difference
        ci = interval_text(shown, anytime=e.sequence is not None)
        ahead = e.table.a_only > e.table.b_only
    if e.significant:
        better, worse = (a, b) if ahead else (b, a)
        return f"{better} better than {worse}: {label} {value}; {ci}."
    if e.stopped_early:
        # the campaign is over: the headline gives the rule and its decision only (no "more
        # layouts": none will be run; `orchestrator plan` sizes a new campaign)
        return f"{a} vs {b}: not established when the e-value rule stopped the campaign ({label} {value}; {ci})."
    units = "marks" if e.unit == "mark" else "layouts"
    text = f"{a} vs {b}: not established at this n ({label} {value}; {ci})."
    if e.discordant_units < stats.min_discordant_for_alpha(e.alpha, e.primary):
        one = "mark" if e.unit == "mark" else "layout"
        text += (f" Only {e.discordant_units} discordant {one if e.discordant_units == 1 else units}: "
                 f"too few for any split to reach p <= {e.alpha:g}.")
    if more is not None and more > 0:
        text += f" {more_note[0].upper()}{more_note[1:]}."
    elif more_note:
        text += f" {more_note[0].upper()}{more_note[1:]}."
    return text


def verdict_notes(e: Evidence) -> tuple[str, ...]:
    """One-line notes: test and interval disagreeing (either way), the fixed-n interval after
    optional stopping, the unit of analysis with repeats."""
    if e.table.n == 0:
        return ()
    notes = []
    if e.evalue_rule and e.share is not None:
        # the quoted interval is the rule's own: it excludes 50 % exactly when the rule rejects
        if e.significant == (e.share.lo <= 0.5 <= e.share.hi):   # only at a bound equal to 1/2
            notes.append("The e-value sits on its threshold: the rule's interval touches 50%.")
        notes.append("Stopping was optional (pre-registered e-value rule): the fixed-n interval is not "
                     "valid after optional stopping, so the verdict quotes the anytime-valid confidence "
                     f"sequence of the rule ({100 * e.share.level:.4g}%, the level of its threshold).")
    else:
        iv = e.difference
        name = "clustered Newcombe" if e.unit == "mark" else "Newcombe"
        level = f"{100 * iv.level:g}%"
        test = f"{p_name(e.primary)} test"
        reaches_zero = iv.lo <= 0 <= iv.hi
        if e.significant and reaches_zero:
            notes.append(f"The {test} says better, but the {name} {level} interval still reaches 0 "
                         f"({points(iv.lo)[0]} to {points(iv.hi)[0]} points): a borderline result.")
        elif not e.significant and not reaches_zero:
            if e.comparisons > 1 and e.p_raw <= e.alpha:
                notes.append(f"The {name} {level} interval excludes 0 and the unadjusted {p_name(e.primary)} "
                             f"({fmt_p(e.p_raw)}) is below {e.alpha:g}, but Holm's adjustment for the "
                             f"{e.comparisons} comparisons is not: the interval is not adjusted for "
                             "multiplicity; the adjusted test decides, so nothing is established.")
            else:
                notes.append(f"The {name} {level} interval excludes 0 but the {test} does not reject: the two "
                             "methods disagree at this n; the pre-registered test decides, so nothing is "
                             "established.")
    if e.unit == "mark":
        notes.append(f"The mark is the unit of analysis: {e.table.n} pairs on marks with repeats are not "
                     "independent, so the test and interval count marks, not pairs.")
    return tuple(notes)
