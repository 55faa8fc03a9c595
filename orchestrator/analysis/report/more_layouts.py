""""How many more layouts": the sentence after a verdict that did not establish a difference.

It is computed for the rule that decides, by that rule's exact power:
- the pre-registered e-value rule: the probability that the rule has stopped, rejecting, by
  layout n (`stats.evalue_power`, threshold K/alpha for K comparisons), capped by its
  `max_layouts`;
- the fixed-n McNemar test (mid-p or exact): its exact power at Holm's first-step level alpha/K
  for K comparisons (`stats.layouts_needed`; with one comparison, alpha).
The planning effect is stated: the observed cell rates (A-only and B-only shares of the layouts),
and, because an observed difference that fell just short is as likely to overstate the truth
as not, the same figure at half the observed difference (same discordance). "0 more" is never
printed: when the campaign already has the layouts the rule would need at the observed rates,
the sentence says so. With repeats (the mark as the unit) no figure is given: the clustered
test's power depends on the within-mark correlation, which a handful of marks does not pin.
"""

from __future__ import annotations

from orchestrator.analysis import stats

PLAN_MAX_LAYOUTS = 2000
TARGET_POWER = 0.8


def _needed(p10: float, p01: float, level: float, evalue_rule: bool, primary: str) -> int | None:
    if evalue_rule:
        return stats.evalue_layouts_needed(p10, p01, TARGET_POWER, level, PLAN_MAX_LAYOUTS)
    return stats.layouts_needed(p10, p01, TARGET_POWER, level, primary, PLAN_MAX_LAYOUTS)


def rule_name(evalue_rule: bool, primary: str, comparisons: int) -> str:
    if evalue_rule:
        return "the e-value rule" + (f" (threshold {comparisons} / alpha)" if comparisons > 1 else "")
    test = "exact" if primary == "mcnemar_exact" else "mid-p"
    return (f"the Holm-adjusted McNemar {test} test (alpha / {comparisons}, Holm's first step)"
            if comparisons > 1 else f"the McNemar {test} test")


def more_layouts(table: stats.PairedTable, alpha: float, primary: str, comparisons: int = 1,
                 evalue_rule: bool = False, max_layouts: int | None = None,
                 names: tuple[str, str] = ("A", "B")) -> tuple[int | None, str]:
    """(layouts still needed or None, the sentence saying it) for a comparison not established;
    `names` are the two policies of the table, in its order (a_only is the first's)."""
    n = table.n
    if n == 0:
        return None, "no complete pairs yet"
    b, c = table.a_only, table.b_only
    interval_hint = "its interval shows how large a difference the data still allow"
    if b == c:
        return None, (f"the policies won the same number of discordant layouts ({b} each): the data show "
                      f"no difference, which is not evidence that they are equivalent ({interval_hint}); "
                      "`orchestrator plan` sizes a campaign for a difference worth detecting")
    level = alpha / max(comparisons, 1)
    rule = rule_name(evalue_rule, primary, comparisons)
    p10, p01 = b / n, c / n
    needed = _needed(p10, p01, level, evalue_rule, primary)
    q, d = p10 + p01, p10 - p01
    half = _needed((q + d / 2) / 2, (q - d / 2) / 2, level, evalue_rule, primary)
    at = f"at the observed rates ({b}/{n} {names[0]}-only, {c}/{n} {names[1]}-only layouts)"
    half_text = (f"; at half the observed difference about {half}" if half is not None else
                 f"; at half the observed difference not even {PLAN_MAX_LAYOUTS}")
    rough = f"; a rough guide from only {n} layouts" if n < 20 else ""
    if needed is None:
        return None, (f"even {PLAN_MAX_LAYOUTS} layouts would not give {rule} {TARGET_POWER:.0%} power {at}: "
                      "the difference is too small to establish with this design")
    cap = ""
    if evalue_rule and max_layouts is not None and needed > max_layouts:
        cap = (f"; the pre-registered max_layouts = {max_layouts} gives it only "
               f"{stats.evalue_power(max_layouts, p10, p01, level):.0%} power")
    if needed <= n:
        return None, (f"{needed} layouts would already give {rule} {TARGET_POWER:.0%} power {at}, and this "
                      f"campaign has {n}: the true difference is probably smaller than observed"
                      f"{half_text} layouts in all{cap}")
    how = "" if evalue_rule else (
        f"; the protocol is frozen, so they are a new campaign: a layout of {needed} marks (size it with "
        "`orchestrator plan`), decided on its own; adding trials to this campaign after seeing its result "
        "is optional stopping, which only a pre-registered e-value rule (`stopping: {kind: evalue}`) allows")
    more = needed - n
    return more, (f"need about {more} more layout{'' if more == 1 else 's'}: {needed} in all give {rule} "
                        f"{TARGET_POWER:.0%} power {at}{half_text} in all (the observed difference is "
                        f"uncertain{rough}){cap}{how}")
