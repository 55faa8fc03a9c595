"""The report as JSON: docs/design.md section 13 (schema `orchestrator.report/1`). The extra keys it
carries are additions, never changes of meaning."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from orchestrator.analysis.report.aborts import AbortSection
from orchestrator.analysis.report.corrected import corrected_json
from orchestrator.analysis.report.funnel import funnel_json
from orchestrator.analysis.report.model import SCHEMA, Comparison, JudgeSection, PolicySummary, PolicyTiming, Report
from orchestrator.analysis.report.raters import RaterAgreement, judge_flags
from orchestrator.analysis.report.start_state import InterventionSection, StartCheckSection
from orchestrator.analysis.report.stations import StationSection
from orchestrator.core.versioned import read_versioned_json


def _num(x: float | None) -> float | None:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return None
    return float(x)


def _wilson95(k: int, n: int) -> list[float]:
    from orchestrator.analysis import stats

    iv = stats.wilson(k, n)
    return [iv.lo, iv.hi]


def _policy(p: PolicySummary) -> dict[str, Any]:
    ts = p.time_to_success
    return {
        "successes": p.successes, "trials": p.trials, "rate": _num(p.rate),
        "wilson95": [p.wilson.lo, p.wilson.hi],
        "ci95": [p.interval.lo, p.interval.hi], "ci_method": p.interval.method,
        "unjudged": p.unjudged, "aborted_attempts": p.aborted_attempts, "deployment": p.deployment or None,
        "failure_modes": dict(p.failure_modes), "safety_events": dict(p.safety_events),
        "time_to_success_s": None if ts is None else {
            "n": ts.n, "median": ts.median, "mean": ts.mean, "min": ts.lo, "max": ts.hi},
    }


def _comparison(c: Comparison) -> dict[str, Any]:
    t = c.table
    return {
        "a": c.a, "b": c.b, "pairs": t.n,
        "table": {"both": t.both, "a_only": t.a_only, "b_only": t.b_only, "neither": t.neither},
        "mcnemar": {"exact_p": c.mcnemar.exact_p, "mid_p": c.mcnemar.mid_p, "chi2": c.mcnemar.chi2,
                    "chi2_p": c.mcnemar.chi2_p, "chi2_cc": c.mcnemar.chi2_cc, "chi2_cc_p": c.mcnemar.chi2_cc_p},
        "difference": {"estimate": c.difference.estimate, "ci95": [c.difference.lo, c.difference.hi],
                       "method": c.difference.method,
                       "tango95": [c.tango.lo, c.tango.hi], "bonett_price95": [c.bonett_price.lo, c.bonett_price.hi]},
        "holm_mid_p": c.holm_mid_p,
        "primary": c.primary, "primary_p": c.primary_p, "significant": c.significant,
        "unpaired": {"fisher_p": c.fisher_p, "newcombe_hybrid95": [c.unpaired_difference.lo, c.unpaired_difference.hi]},
        "discordant_floor_p": c.floor_p,
        "deciding_floor_p": _num(c.deciding_floor_p),
        "deciding_max_evalue": _num(c.deciding_max_e),
        "e_value": _num(c.evalue.e_value),
        "more_layouts_for_80pct_power": c.more_layouts_needed,
        "verdict": c.verdict,
        "strata": {s.stratum: {"both": s.table.both, "a_only": s.table.a_only, "b_only": s.table.b_only,
                               "neither": s.table.neither, "mid_p": s.mid_p} for s in c.strata},
        "unit": c.unit,
        "holm_exact_p": _num(c.holm_exact_p),
        "clustered": _clustered(c),
        "confidence_sequence": None if c.sequence is None and c.share is None else {
            "difference": None if c.sequence is None else [c.sequence.lo, c.sequence.hi],
            "level": c.sequence.level if c.sequence is not None else c.share.level if c.share is not None else None,
            "method": "beta-binomial mixture (Howard et al. 2021)",
            # the rule's own interval: A's share of the discordant units it counts; excludes 0.5
            # exactly when the e-value rule rejects
            "discordant_share": None if c.share is None else [c.share.lo, c.share.hi],
            "discordant_share_estimate": None if c.share is None else _num(c.share.estimate)},
        # the e-value rule's own data (one decision, one dataset): the units and pairs it counts;
        # every fixed-n figure above is then computed after an optional stop, for reference only
        "rule": None if c.rule_table is None else {
            "units": c.rule_units, "unit": c.unit, "pairs": c.rule_table.n,
            "table": {"both": c.rule_table.both, "a_only": c.rule_table.a_only, "b_only": c.rule_table.b_only,
                      "neither": c.rule_table.neither},
            "discordant_units": [c.evalue.a_only, c.evalue.b_only]},
        "fixed_n_after_optional_stop": c.share is not None,
        "more_layouts_note": c.more_layouts_note,
        "notes": list(c.notes),
    }


def _clustered(c: Comparison) -> dict[str, Any] | None:
    """The mark-as-unit analysis (null with one pair per mark)."""
    k = c.clustered
    if k is None:
        return None
    return {"marks": k.marks, "discordant_marks": k.discordant_marks, "exact_p": k.exact_p, "mid_p": k.mid_p,
            "durkalski_chi2": k.durkalski_chi2, "durkalski_p": k.durkalski_p, "design_effect": k.design_effect,
            "per_mark": {m: {"both": t.both, "a_only": t.a_only, "b_only": t.b_only, "neither": t.neither}
                         for m, t in c.marks}}


def _judges(j: JudgeSection) -> dict[str, Any]:
    return {
        "judges": list(j.judges),
        "cohen_kappa": [{"judges": [k.judge_1, k.judge_2], "items": k.items, "kappa": _num(k.kappa),
                         "agreement": k.agreement} for k in j.kappas],
        "fleiss_kappa": _num(j.fleiss), "fleiss_items": j.fleiss_items,
        "disagreements": [{"episode": d.episode_id, "layout": d.layout, "repeat": d.repeat,
                           "policy": d.policy, "labels": dict(d.labels), "physics": d.physics}
                          for d in j.disagreements],
        "accuracy_vs_physics": {a.judge: {"agree": a.agree, "compared": a.compared, "unsure": a.unsure,
                                          "false_success": a.false_success, "false_failure": a.false_failure}
                                for a in j.accuracy},
    }


def _timing(t: PolicyTiming) -> dict[str, Any]:
    return {
        "episodes": t.episodes, "episodes_with_timing": t.with_timing, "steps": t.steps, "paced": t.paced,
        "period_p50_ms": _num(t.period_p50_ms), "period_p99_ms": _num(t.period_p99_ms),
        "overrun_steps": t.overrun_steps, "episodes_over_5pct_overruns": t.episodes_over,
        "policy_p50_ms": _num(t.policy_p50_ms), "policy_p99_ms": _num(t.policy_p99_ms),
        "policy_p99_max_ms": _num(t.policy_p99_max_ms),
        "lost_steps": t.lost_steps, "episodes_with_lost_steps": t.episodes_lost,
        "inference_p50_ms": _num(t.inference_p50_ms), "inference_p99_ms": _num(t.inference_p99_ms),
        "frame_age_p50_ms": _num(t.frame_age_p50_ms), "frame_age_p95_ms": _num(t.frame_age_p95_ms),
        "frame_repeat_fraction": _num(t.frame_repeat_fraction),
    }


def _raters(rows: tuple[RaterAgreement, ...]) -> list[dict]:
    def num(x: float):
        return None if x != x else float(x)

    return [{"rater": r.rater, "reference": r.reference, "items": r.items, "unsure": r.unsure,
             "abstention_rate": num(r.unsure / (r.items + r.unsure)) if r.items + r.unsure else None,
             "table": dict(r.table), "agreement": num(r.agreement), "kappa": num(r.kappa),
             "kappa_ci95": [num(r.kappa_ci95[0]), num(r.kappa_ci95[1])],
             "kappa_ci_coverage": r.kappa_ci_coverage} for r in rows]


def _stations(section: StationSection | None) -> dict | None:
    if section is None:
        return None
    return {"a": section.a, "b": section.b,
            "per_station": {r.station: {"blocks": r.blocks, "pairs": r.pairs, "both": r.both, "a_only": r.a_only,
                                        "b_only": r.b_only, "neither": r.neither,
                                        "successes": {p: [k, n] for p, k, n in r.successes},
                                        "median_block_s": r.median_block_s} for r in section.rows},
            "discordance_homogeneity_p": section.homogeneity.p_value, "warnings": list(section.warnings)}


def _aborts(section: AbortSection | None) -> dict[str, Any] | None:
    if section is None:
        return None
    return {
        "rules": section.rules,
        "per_policy": {r.policy: {"trials": r.trials, "trials_with_abort": r.trials_with_abort,
                                  "aborted_attempts_by_class": dict(r.by_class),
                                  "aborted_attempts_by_cause": {c: dict(causes) for c, causes in r.by_cause},
                                  "operator_answers": {k: dict(answers) for k, answers in r.answers},
                                  "scored_failures": r.scored_failures, "excluded": r.excluded}
                       for r in section.rows},
        "rate_tests": [{"a": t.a, "b": t.b, "fisher_p": t.fisher_p, "holm_p": t.holm_p,
                        "method": "Fisher exact, two-sided, on trials with an abort; Holm over pairs"}
                       for t in section.tests],
    }


def _start_check(section: StartCheckSection | None) -> dict[str, Any] | None:
    if section is None:
        return None
    return {
        "placement_error": {r.policy: {"checked": r.checked, "measured": r.measured,
                                       "offset_p50_mm": r.offset_p50_mm, "offset_p95_mm": r.offset_p95_mm,
                                       "yaw_p50_deg": r.yaw_p50_deg, "yaw_p95_deg": r.yaw_p95_deg,
                                       "started_on_failed_check": r.started_failing, "overridden": r.overridden,
                                       "trials_started_on_failed_check": r.trials_started_failing}
                            for r in section.rows},
        "placement_tests": [{"a": t.a, "b": t.b, "mann_whitney_p": t.mann_whitney_p, "holm_p": t.holm_p,
                             "method": "Mann-Whitney U, two-sided, on the offset from the mark; Holm over pairs"}
                            for t in section.tests],
        "judges_agreement": {"attempts": section.judged, "table": section.table, "agreement": section.agreement,
                             "kappa": section.kappa, "kappa_ci95": list(section.kappa_ci95),
                             "kappa_ci_coverage": section.kappa_ci_coverage,
                             "of": "the check refused vs a judge marked an invalid start"},
    }


def _interventions(section: InterventionSection | None) -> dict[str, Any] | None:
    if section is None:
        return None
    return {"total": section.total, "per_100_trials": section.per_100_trials, "trials": section.trials,
            "by_cause": dict(section.by_cause),
            "per_100_trials_ci95": None if section.per_100_ci95 is None else list(section.per_100_ci95),
            "per_100_trials_ci_method": "poisson-exact (Garwood 1936)"}


def to_dict(r: Report) -> dict[str, Any]:
    """The JSON document (docs/design.md section 13)."""
    out: dict[str, Any] = {
        "schema": r.schema,
        "campaign": {"id": r.campaign_id, "protocol_sha256": r.protocol_sha256, "complete": r.complete,
                     "trials": r.trials_done, "aborted": r.aborted_attempts,
                     "name": r.campaign_name, "protocol_name": r.protocol_name, "source": r.source,
                     "simulated": r.simulated, "rig_kind": r.rig_kind or None, "scheduled_trials": r.trials_scheduled,
                     "stop_reason": r.stop_reason, "stopping_rule": r.stopping_rule,
                     "operator_is_judge": r.operator_is_judge, "fps": r.fps},
        "labels": r.label_source,
        "analysis": {"primary": r.primary, "alpha": r.alpha, "unit": r.unit, "test": r.test},
        "policies": {p.label: _policy(p) for p in r.policies},
        "comparisons": [_comparison(c) for c in r.comparisons],
    }
    if r.cochran is not None:
        out["cochran_q"] = {"q": r.cochran.q, "df": r.cochran.df, "p": r.cochran.p, "blocks": r.cochran.blocks}
    out["strata"] = {s.stratum: {lab: {"successes": k, "trials": n, "wilson95": _wilson95(k, n),
                                       "ci95": [iv.lo, iv.hi], "ci_method": iv.method}
                                 for lab, k, n, iv in s.per_policy} for s in r.strata}
    out["drift"] = {d.policy: {"first_half": [d.first_k, d.first_n], "second_half": [d.second_k, d.second_n],
                               "fisher_p": _num(d.fisher_p)} for d in r.drift}
    out["withheld"] = dict(r.withheld)
    if r.judges is not None:
        out["judges"] = _judges(r.judges)
    out["rater_agreement"] = _raters(r.raters)
    out["judge_flags"] = [flag.to_json() for flag in judge_flags(r.raters)]
    out["arm_never_moved"] = [{"episode": e, "layout": lay, "policy": p} for e, lay, p in r.arm_still]
    # campaign-only: null for an outcomes CSV, which holds neither timing nor sessions
    out["timing"] = {t.label: _timing(t) for t in r.timing} if r.timing else None
    out["sessions"] = None if r.sessions is None else {
        "count": r.sessions.count, "interrupted": r.sessions.interrupted, "killed": r.sessions.killed,
        "failed": r.sessions.failed, "ended": r.sessions.ended, "running": r.sessions.running}
    out["stations"] = _stations(r.stations)
    out["aborts"] = _aborts(r.aborts)
    out["start_check"] = _start_check(r.start_check)
    out["interventions"] = _interventions(r.interventions)
    out["progress_ladder"] = funnel_json(r.funnel)
    out["corrected"] = corrected_json(r.corrected)
    out["unpaired"] = [{"layout": l, "repeat": rp, "why": why} for l, rp, why in r.unpaired]
    out["warnings"] = list(r.warnings)
    out["notes"] = list(r.notes)
    out["verdict"] = r.headline
    out["evidence"] = None if r.evidence is None else r.evidence.to_dict()   # None: an outcomes CSV
    return out


def render_json(r: Report) -> str:
    return json.dumps(to_dict(r), indent=2, allow_nan=False) + "\n"


def read_report(path: Path) -> dict[str, Any]:
    """The report JSON that `render_json` wrote (`report --format json`, an export's
    meta/report.json), refused with one line unless it is readable JSON of this schema version
    (`orchestrator.report/1`: later versions add keys, never change their meaning)."""
    return read_versioned_json(Path(path), "report JSON", "schema", SCHEMA, "no report JSON here")
