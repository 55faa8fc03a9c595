"""The statistics of one pairwise comparison, with the unit of analysis decided once.

Unit of analysis. With one trial per policy on each mark the unit is the layout run and the
test is McNemar's (docs/statistics.md). When some mark has more than one pair (`repeat` column,
`trials_per_layout > 1`) the pairs of one mark are not independent, so the mark is the unit:
the clustered matched-pair test (sign-flip over marks on Durkalski et al.'s statistic) decides,
and the difference interval is Newcombe's on the table divided by the design effect
(`stats.clustered`). The pooled McNemar figures are still shown, for reference.

Optional stopping. With the pre-registered e-value rule the fixed-n interval is not valid at a
data-dependent stopping time; the anytime-valid Beta-binomial mixture confidence sequence for
the difference (`stats.sequence`, Howard et al. 2021) is given at the level the e-value
threshold uses (1 - alpha/K for K comparisons).
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.analysis import stats
from orchestrator.analysis.outcomes import OutcomeSet


@dataclass(frozen=True)
class PairedAnalysis:
    table: stats.PairedTable                               # pooled over every pair
    marks: tuple[tuple[str, stats.PairedTable], ...]       # per mark, in run order
    mcnemar: stats.McNemarResult                           # on the pooled table
    clustered: stats.ClusteredResult | None                # when some mark has more than one pair
    exact_p: float                                         # the deciding test's exact p
    mid_p: float                                           # and its mid-p
    difference: stats.Interval                             # Newcombe, clustered when the unit is the mark
    sequence: stats.Interval | None                        # anytime-valid CS (e-value rule only)

    @property
    def unit(self) -> str:
        return "mark" if self.clustered is not None else "layout"

    def p(self, primary: str) -> float:
        return self.exact_p if primary == "mcnemar_exact" else self.mid_p


def paired_analysis(data: OutcomeSet, a: str, b: str, evalue_rule: bool = False,
                    alpha: float = 0.05) -> PairedAnalysis:
    """The comparison of a and b on every (layout, repeat) judged for both. `alpha` is the
    confidence sequence's error (alpha/K with K comparisons), used only with `evalue_rule`."""
    pairs = data.pairs(a, b)
    table = stats.paired_table([x[1] for x in pairs], [x[2] for x in pairs])
    by_mark: dict[str, list[tuple[bool, bool]]] = {}
    for (layout, _repeat), sa, sb in pairs:
        by_mark.setdefault(layout, []).append((sa, sb))
    marks = tuple((m, stats.paired_table([x[0] for x in v], [x[1] for x in v])) for m, v in by_mark.items())
    mc = stats.mcnemar(table.a_only, table.b_only)
    repeats = any(t.n > 1 for _, t in marks)
    sequence = None
    if evalue_rule and table.n and not repeats:
        sequence = stats.difference_cs(table.a_only, table.b_only, table.n, alpha)
    if not repeats:
        return PairedAnalysis(table, marks, mc, None, mc.exact_p, mc.mid_p, stats.newcombe_paired(table), sequence)
    clustered = stats.clustered_mcnemar([t for _, t in marks])
    return PairedAnalysis(table, marks, mc, clustered, clustered.exact_p, clustered.mid_p,
                          clustered.difference, sequence)


def deciding_test_name(unit: str, primary: str, evalue_rule: bool = False) -> str:
    """The deciding test, as the report header names it: under the pre-registered e-value rule
    the rule itself (every fixed-n test is then for reference only)."""
    if evalue_rule:
        units = "marks" if unit == "mark" else "layouts"
        return (f"the pre-registered e-value rule (Beta-mixture e-value on the discordant {units} known for "
                "both policies of each pair, threshold K/alpha); interval: its anytime-valid confidence sequence")
    which = "exact p" if primary == "mcnemar_exact" else "mid-p"
    if unit == "mark":
        return (f"clustered McNemar {which} (Durkalski et al. 2003 statistic, exact sign-flip over marks); "
                "difference interval: Newcombe with the design effect (Rao & Scott 1992)")
    return f"McNemar {which}; difference interval: Newcombe method 10"
