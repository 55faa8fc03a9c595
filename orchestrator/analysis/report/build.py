"""Building the report: `build_report` is the only place that calls the statistics
(`orchestrator.analysis.stats`); everything it computes lands in the frozen `Report` (model.py)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from itertools import combinations
from typing import Any

from orchestrator.analysis import stats
from orchestrator.analysis.outcomes import OutcomeSet
from orchestrator.analysis.report.aborts import build_aborts
from orchestrator.analysis.report.analysis import PairedAnalysis, deciding_test_name, paired_analysis
from orchestrator.analysis.report.corrected import CorrectedSection, corrected_notes, corrected_section
from orchestrator.analysis.report.decision import (
    EARLY_STOP,
    disagreement_note,
    other_pairs_note,
    rule_data,
    stop_note,
)
from orchestrator.analysis.report.format import fmt_p, p_eq, p_name
from orchestrator.analysis.report.funnel import build_funnel
from orchestrator.analysis.report.judges import judge_section
from orchestrator.analysis.report.model import (
    OVERRUN_WARN_FRACTION,
    SCHEMA,
    Comparison,
    DriftRow,
    PolicySummary,
    PolicyTiming,
    Report,
    StratumComparison,
    StratumRow,
)
from orchestrator.analysis.report.more_layouts import more_layouts
from orchestrator.analysis.report.raters import rater_agreement
from orchestrator.analysis.report.timing import lost_step_warnings, policy_timing, time_summary
from orchestrator.analysis.report.verdict import Evidence, verdict_notes, verdict_text
from orchestrator.analysis.stopping import RuleView
from orchestrator.store.records import RIG_TWIN


def _has_repeats(data: OutcomeSet) -> bool:
    """Some mark has more than one (mark, repeat) block: the mark is the unit of analysis."""
    return len({o.key for o in data.outcomes}) > len({o.layout for o in data.outcomes})


def _rate_interval(judged: list, repeats: bool) -> stats.Interval:
    """Wilson's interval; with repeats, clustered over marks (`stats.clustered_wilson`)."""
    k = sum(1 for o in judged if o.success)
    if not repeats:
        return stats.wilson(k, len(judged))
    per: dict[str, list[int]] = {}
    for o in judged:
        per.setdefault(o.layout, [0, 0])
        per[o.layout][0] += bool(o.success)
        per[o.layout][1] += 1
    return stats.clustered_wilson([(v[0], v[1]) for v in per.values()])


def _policy_summary(label: str, data: OutcomeSet) -> PolicySummary:
    mine = [o for o in data.outcomes if o.policy == label]
    judged = [o for o in mine if o.success is not None]
    k = sum(1 for o in judged if o.success)
    n = len(judged)
    done = sum(1 for o in mine if o.state == "done")
    modes = Counter(o.failure_mode or "unspecified" for o in judged if not o.success)
    safety = Counter(ev for o in mine for ev in o.safety_events)
    times = [o.time_to_success_s for o in judged if o.success and o.time_to_success_s is not None]
    first = [o for o in judged if o.position == 0]
    second = [o for o in judged if o.position is not None and o.position > 0]
    return PolicySummary(
        label=label, successes=k, trials=n, wilson=stats.wilson(k, n), scheduled=len(mine), done=done,
        unjudged=sum(1 for o in mine if o.state == "done" and o.success is None),
        aborted_attempts=sum(o.aborted_attempts for o in mine),
        failure_modes=tuple(sorted(modes.items(), key=lambda kv: (-kv[1], kv[0]))),
        safety_events=tuple(sorted(safety.items(), key=lambda kv: (-kv[1], kv[0]))),
        episodes_with_safety_events=sum(1 for o in mine if o.safety_events),
        time_to_success=time_summary(times),
        first_successes=sum(1 for o in first if o.success), first_trials=len(first),
        second_successes=sum(1 for o in second if o.success), second_trials=len(second),
        ci=_rate_interval(judged, _has_repeats(data)), deployment=data.deployments.get(label, ""))


def _max_layouts(stopping: Any) -> int | None:
    if isinstance(stopping, dict):
        return stopping.get("max_layouts")
    return getattr(stopping, "max_layouts", None)


def _evalue_rule(stopping: Any) -> bool:
    if isinstance(stopping, dict):
        return stopping.get("kind") == "evalue"
    return getattr(stopping, "kind", None) == "evalue"


def _pairing_note(table: stats.PairedTable, fisher: float, p_primary: float, test: str) -> str:
    n = table.n
    if n == 0:
        return ""
    agree = table.both + table.neither
    head = (f"Treated as unpaired samples the same trials give Fisher p {p_eq(fisher)}; "
            f"paired, {test} {fmt_p(p_primary)}: ")
    if p_primary < 0.8 * fisher:
        return head + (f"pairing gave the stronger evidence; the policies agreed on {agree} of {n} layouts "
                       f"and only the {table.discordant} discordant "
                       f"layout{'s' if table.discordant != 1 else ''} carry the comparison.")
    if p_primary <= 1.25 * fisher:
        return head + (f"pairing made little difference here; the policies agreed on {agree} of {n} "
                       "layouts, about what unrelated outcomes would give.")
    return head + (f"pairing bought nothing here; the policies agreed on only {agree} of {n} "
                   "layouts, so their outcomes were barely correlated across layouts.")


def _stratum_rows(pairs: list, data: OutcomeSet) -> tuple[StratumComparison, ...]:
    """Per stratum: the pooled table and the test over marks (`stats.clustered_p_values`, which
    is McNemar's when each mark has one pair)."""
    by_stratum: dict[str, dict[str, list[tuple[bool, bool]]]] = {}
    key_stratum = {o.key: (o.stratum or "all") for o in data.outcomes}
    for key, sa, sb in pairs:
        by_stratum.setdefault(key_stratum.get(key, "all"), {}).setdefault(key[0], []).append((sa, sb))
    if len(by_stratum) < 2:
        return ()
    rows = []
    for s in sorted(by_stratum):
        marks = [stats.paired_table([x[0] for x in v], [x[1] for x in v]) for v in by_stratum[s].values()]
        pooled = stats.paired_table([x[0] for v in by_stratum[s].values() for x in v],
                                    [x[1] for v in by_stratum[s].values() for x in v])
        exact, mid = stats.clustered_p_values([t.a_only - t.b_only for t in marks])
        rows.append(StratumComparison(s, pooled, mid, exact))
    return tuple(rows)


def _compare(an: PairedAnalysis, a: str, b: str, data: OutcomeSet, holm_mid: float, holm_exact: float,
             comparisons: int = 1, rule: RuleView | None = None) -> Comparison:
    table = an.table
    primary = data.primary if data.primary in ("mcnemar_midp", "mcnemar_exact") else "mcnemar_midp"
    p_primary = an.p(primary)
    holm_primary = holm_exact if primary == "mcnemar_exact" else holm_mid
    n = table.n
    fisher = stats.fisher_exact(table.successes_a, n, table.successes_b, n) if n else 1.0
    unpaired = stats.newcombe_independent(table.successes_a, n, table.successes_b, n) if n else \
        stats.Interval(0.0, -1.0, 1.0, "newcombe-hybrid")
    # with a pre-registered e-value stopping rule the anytime-valid e-value decides (the McNemar
    # p-values assume a fixed number of layouts); K comparisons share alpha (threshold K/alpha)
    evalue_rule = _evalue_rule(data.stopping)
    # under the e-value rule the report's e-value is the runner's (`stopping.RuleView`: complete
    # marks only), so the verdict never contradicts the recorded stop; otherwise, with repeats,
    # the e-value counts discordant marks (`stats.mark_split`), like the test
    level = data.alpha / max(comparisons, 1)
    rd = rule_data(rule, a, b) if evalue_rule and rule is not None else None
    if rd is not None:
        split = rd.split
    else:
        split = stats.mark_split([t for _, t in an.marks]) if an.unit == "mark" else (table.a_only, table.b_only)
    ev = stats.evalue_discordant(*split, level)
    share = stats.beta_binomial_cs(split[0], split[0] + split[1], level) if evalue_rule else None
    significant = n > 0 and (ev.reject if evalue_rule else holm_primary <= data.alpha)
    more, more_note = (None, "")
    stopped_early = evalue_rule and (data.stop_reason or "").startswith(EARLY_STOP)
    if not significant and stopped_early:
        more_note = ("the e-value rule stopped the campaign early: no more layouts are run for this pair "
                     "(`orchestrator plan` sizes a new campaign)")
    elif not significant and an.unit == "layout":
        more, more_note = more_layouts(table, data.alpha, primary, comparisons, evalue_rule,
                                       _max_layouts(data.stopping), (a, b))
    discordant_units = an.clustered.discordant_marks if an.clustered is not None else table.discordant
    evidence = Evidence(a=a, b=b, table=table, unit=an.unit, discordant_units=discordant_units, primary=primary,
                        alpha=data.alpha, p=holm_primary, p_raw=p_primary, mid_p=holm_mid, exact_p=holm_exact,
                        difference=an.difference, sequence=an.sequence, evalue=ev, evalue_rule=evalue_rule,
                        significant=significant, share=share, comparisons=comparisons,
                        rule_units=rd.units if rd is not None else 0,
                        rule_table=rd.table if rd is not None else None, stopped_early=stopped_early)
    return Comparison(
        a=a, b=b, table=table, mcnemar=an.mcnemar, difference=an.difference,
        tango=stats.tango_paired(table) if n else an.difference,
        bonett_price=stats.bonett_price_paired(table) if n else an.difference, primary=primary, primary_p=p_primary,
        holm_mid_p=holm_mid, holm_primary_p=holm_primary, fisher_p=fisher, unpaired_difference=unpaired,
        floor_p=stats.discordant_floor(table.discordant), evalue=ev, significant=significant,
        deciding_floor_p=stats.discordant_floor(discordant_units),
        more_layouts_needed=more, more_layouts_note=more_note,
        verdict=verdict_text(evidence, more, more_note),
        pairing_note=_pairing_note(table, fisher, p_primary, p_name(primary)) if an.unit == "layout" else "",
        strata=_stratum_rows(data.pairs(a, b), data), unit=an.unit, clustered=an.clustered, marks=an.marks,
        sequence=an.sequence, notes=verdict_notes(evidence) + stop_note(data, a, b, significant, ev)
        + (other_pairs_note(rd, table, a, b, an.unit == "mark") if rd is not None else ())
        + disagreement_note(data, a, b, evalue_rule),
        holm_exact_p=holm_exact, share=share, rule_table=rd.table if rd is not None else None,
        rule_units=rd.units if rd is not None else None,
        deciding_max_e=stats.evalue_discordant(sum(split), 0, level).e_value if evalue_rule else None)


def _strata(data: OutcomeSet) -> tuple[StratumRow, ...]:
    names = sorted({o.stratum for o in data.outcomes if o.stratum})
    if len(names) < 2:
        return ()
    rows = []
    for s in names:
        mine = [o for o in data.outcomes if o.stratum == s]
        per = []
        for p in data.policies:
            judged = [o for o in mine if o.policy == p and o.success is not None]
            k = sum(1 for o in judged if o.success)
            per.append((p, k, len(judged), _rate_interval(judged, _has_repeats(data))))
        rows.append(StratumRow(s, len({o.key for o in mine}), tuple(per)))
    return tuple(rows)


def _drift(data: OutcomeSet) -> tuple[DriftRow, ...]:
    """Success in the first and second half of the campaign (by run order), per policy."""
    rows = []
    for p in data.policies:
        judged = [o for o in data.outcomes if o.policy == p and o.success is not None]
        judged.sort(key=lambda o: (o.slot if o.slot is not None else (o.line or 0)))
        if len(judged) < 2:
            continue
        half = len(judged) // 2
        first, second = judged[:half], judged[half:]
        k1 = sum(1 for o in first if o.success)
        k2 = sum(1 for o in second if o.success)
        # with repeats Fisher's test would count the repeats of a mark as independent: withheld
        rows.append(DriftRow(p, k1, len(first), k2, len(second),
                             float("nan") if _has_repeats(data) else stats.fisher_exact(k1, len(first), k2, len(second))))
    return tuple(rows)


def _grid(data: OutcomeSet) -> tuple[tuple[str, float | None, float | None, str, str], ...]:
    if len(data.policies) < 2:
        return ()
    a, b = data.policies[0], data.policies[1]
    out = []
    for key, per in data.by_key().items():
        oa, ob = per.get(a), per.get(b)
        if oa is None or ob is None or oa.success is None or ob.success is None:
            cat = "incomplete"
        elif oa.success and ob.success:
            cat = "both"
        elif oa.success:
            cat = f"{a} only"
        elif ob.success:
            cat = f"{b} only"
        else:
            cat = "neither"
        mark = data.marks.get(key[0])
        stratum = (mark[2] if mark else None) or next((o.stratum for o in per.values() if o.stratum), "all")
        out.append((f"{key[0]}" + (f"#{key[1]}" if key[1] else ""), mark[0] if mark else None,
                    mark[1] if mark else None, stratum or "all", cat))
    return tuple(out)


def _timeline(data: OutcomeSet) -> tuple[tuple[str, tuple[bool, ...]], ...]:
    out = []
    for p in data.policies:
        judged = sorted((o for o in data.outcomes if o.policy == p and o.success is not None),
                        key=lambda o: (o.slot if o.slot is not None else (o.line or 0)))
        out.append((p, tuple(bool(o.success) for o in judged)))
    return tuple(out)


def build_report(data: OutcomeSet) -> Report:
    """Compute every statistic the report shows, once."""
    policies = tuple(_policy_summary(p, data) for p in data.policies)
    pairs = list(combinations(data.policies, 2))
    evalue_rule = _evalue_rule(data.stopping)
    analyses = [paired_analysis(data, a, b, evalue_rule, data.alpha / max(len(pairs), 1)) for a, b in pairs]
    # Holm over all pairwise comparisons (a single comparison is its own adjustment), on the
    # p-values of the deciding test (clustered over marks when marks have repeats)
    holm_mid = stats.holm([an.mid_p for an in analyses])
    holm_exact = stats.holm([an.exact_p for an in analyses])
    primary, rule = data.primary, (RuleView.of(data.outcomes, data.policies) if evalue_rule else None)
    comparisons, corrected = _corrected(data, tuple(_compare(an, a, b, data, holm_mid[i], holm_exact[i], len(pairs), rule)
                                                    for i, (an, (a, b)) in enumerate(zip(analyses, pairs, strict=True))),
                                        evalue_rule)
    unit = "mark" if any(c.unit == "mark" for c in comparisons) else "layout"
    cochran, withheld = _cochran_and_withheld(data)
    unpaired = tuple((k[0], k[1], why) for k, why in data.unpaired())
    done = sum(1 for o in data.outcomes if o.state == "done")
    timing = policy_timing(data)
    stopping_rule = _describe_stopping(data.stopping)
    warnings = _warnings(data, unpaired, timing, stopping_rule, done, unit, cochran is not None)
    warnings.extend(lost_step_warnings(timing, data.alpha))
    from orchestrator.analysis.report.start_state import build_interventions, build_start_check
    from orchestrator.analysis.report.stations import build_stations

    station_section = build_stations(data)
    if station_section is not None:
        warnings.extend(station_section.warnings)
    abort_section = build_aborts(data)
    if abort_section is not None:
        warnings.extend(abort_section.warnings)
    start_section = build_start_check(data)
    if start_section is not None:
        warnings.extend(start_section.warnings)
    return Report(
        schema=SCHEMA, source=data.source, label_source=data.label_source, campaign_id=data.campaign_id,
        campaign_name=data.campaign_name, protocol_name=data.protocol_name, protocol_sha256=data.protocol_sha256,
        simulated=data.simulated, complete=data.complete, stop_reason=data.stop_reason,
        stopping_rule=stopping_rule, primary=primary, alpha=data.alpha, trials_done=done,
        trials_scheduled=data.scheduled_trials, aborted_attempts=data.aborted_attempts, policies=policies,
        comparisons=comparisons, cochran=cochran, strata=_strata(data), drift=_drift(data),
        judges=judge_section(data), unpaired=unpaired, warnings=tuple(warnings),
        headline=_headline(comparisons, None if evalue_rule or corrected is not None else cochran),
        grid=_grid(data), timeline=_timeline(data), timing=timing, sessions=data.sessions,
        operator_is_judge=data.operator_is_judge, fps=data.fps, raters=rater_agreement(data),
        arm_still=_arm_still(data), unit=unit, test=deciding_test_name(unit, primary, evalue_rule),
        notes=() if evalue_rule else _cochran_notes(comparisons, cochran, data.alpha), stations=station_section, aborts=abort_section,
        withheld=tuple(withheld), evidence=data.evidence, start_check=start_section,
        interventions=build_interventions(data), rig_kind=data.rig_kind, corrected=corrected, funnel=build_funnel(data))


def _cochran_and_withheld(data: OutcomeSet) -> tuple[stats.CochranQResult | None, list[tuple[str, str]]]:
    """(Cochran's Q over the complete blocks, with 3 or more policies and no repeats, else None;
    the statistics withheld, each with why)."""
    cochran = None
    withheld: list[tuple[str, str]] = []
    if len(data.policies) >= 3 and _has_repeats(data):
        withheld.append(("cochran_q", "marks have repeats: Cochran's Q would count every (mark, repeat) as "
                                      "an independent block; the pairwise tests over marks, Holm-adjusted, decide"))
    elif len(data.policies) >= 3:
        blocks = data.complete_blocks()
        if blocks:
            cochran = stats.cochran_q([[int(v) for v in vals] for _, vals in blocks])
    if _has_repeats(data):
        withheld.append(("drift_fisher_p", "marks have repeats: Fisher's test of the two halves would count a "
                                           "mark's repeats as independent trials; the counts are shown"))
    return cochran, withheld


def _corrected(data: OutcomeSet, comparisons: tuple[Comparison, ...],
               evalue_rule: bool) -> tuple[tuple[Comparison, ...], CorrectedSection | None]:
    """With an audit (and no e-value rule) the corrected difference decides each pair: its verdict,
    and notes saying the McNemar figures are the uncorrected labels' (`report/corrected.py`).
    Under the e-value rule the rule decides and the corrected figures are for reference."""
    section = corrected_section(data)
    if section is None:
        return comparisons, None
    if evalue_rule:
        return comparisons, replace(section, decides=False)
    by_pair = {(p.a, p.b): p for p in section.pairs}
    return tuple(replace(c, verdict=by_pair[(c.a, c.b)].verdict, significant=by_pair[(c.a, c.b)].significant,
                         notes=corrected_notes(section)) for c in comparisons), section


def _arm_still(data: OutcomeSet) -> tuple[tuple[str, str, str], ...]:
    where = {o.episode_id: o for o in data.outcomes if o.episode_id}
    return tuple((ep, where[ep].layout, where[ep].policy) for ep in data.arm_still if ep in where)


def _warnings(data: OutcomeSet, unpaired: tuple, timing: tuple[PolicyTiming, ...], stopping_rule: str,
              done: int, unit: str, cochran: bool) -> list[str]:
    warnings = list(data.warnings)
    if unpaired:
        warnings.append(f"{len(unpaired)} layout run{'s' if len(unpaired) != 1 else ''} cannot form a "
                        "complete pair (listed under 'Unpaired layouts'); they are not in the paired tables")
    rate = f"{data.fps} Hz" if data.fps else "its control rate"
    where = " on the twin (a real arm would see the same loop)" if data.rig_kind == RIG_TWIN else ""
    for t in timing:
        if t.episodes_over:
            lost = f" and {t.lost_steps} lost steps" if t.lost_steps else ""
            warnings.append(f"policy {t.label} could not keep {rate}{where} in {t.episodes_over} "
                            f"episode{'s' if t.episodes_over != 1 else ''} of {t.with_timing} (more than "
                            f"{100 * OVERRUN_WARN_FRACTION:g}% of the steps overran the control period; "
                            f"{t.overrun_steps} overrun steps{lost} in all): its outcomes may reflect a slow loop")
    if _evalue_rule(data.stopping):
        warnings.append("the protocol pre-registers the e-value stopping rule: the verdict uses the "
                        "anytime-valid e-value; McNemar p-values assume a fixed number of layouts and "
                        "are shown for reference only")
    if not data.complete:
        warnings.append(f"the campaign is not complete ({done} of {data.scheduled_trials} trials done): "
                        "these are interim numbers" + ("" if stopping_rule.startswith("e-value") else
                                                       " and, with no pre-registered stopping rule, "
                                                       "must not be used to decide when to stop"))
    return warnings


def _headline(comparisons: tuple[Comparison, ...], cochran: stats.CochranQResult | None) -> str:
    if len(comparisons) == 1:
        return comparisons[0].verdict
    if not comparisons:
        return "no comparison possible"
    lines = []
    if cochran is not None:
        lines.append(f"Cochran's Q = {cochran.q:.2f} (df {cochran.df}), p {p_eq(cochran.p)} over "
                     f"{cochran.blocks} complete layouts.")
    lines.extend(c.verdict for c in comparisons)
    return " ".join(lines)


def _cochran_notes(comparisons: tuple[Comparison, ...], cochran: stats.CochranQResult | None,
                   alpha: float) -> tuple[str, ...]:
    """With 3+ policies a Holm-adjusted pairwise "better" can sit beside a Cochran's Q that does
    not reject. Holm controls the family-wise error on its own, so the pairwise result stands;
    the note says that the omnibus test does not back it."""
    if cochran is None or cochran.p <= alpha:
        return ()
    better = [c for c in comparisons if c.significant]
    if not better:
        return ()
    names = ", ".join(f"{c.a} vs {c.b}" for c in better)
    return (f"Cochran's Q does not reject (p {p_eq(cochran.p)} > {alpha:g}) although the Holm-adjusted "
            f"pairwise test finds a difference for {names}: Holm controls the family-wise error by itself, "
            "so the pairwise result stands, but the omnibus test does not back it.",)


def _describe_stopping(stopping: Any) -> str:
    if isinstance(stopping, dict) and stopping.get("kind") == "evalue":
        return f"e-value (anytime-valid), max_layouts {stopping.get('max_layouts')}"
    kind = getattr(stopping, "kind", None)
    if kind == "evalue":
        return f"e-value (anytime-valid), max_layouts {stopping.max_layouts}"
    return "none (fixed number of layouts)"

