"""The report as a format-neutral document: one function per section, each returning blocks (a
heading, lines, list items, tables). text.py, markdown.py and html.py lay the same blocks out,
so the three formats always say the same thing."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from orchestrator.analysis.report.aborts import describe_answers, describe_causes, describe_rules
from orchestrator.analysis.report.corrected import corrected_lines
from orchestrator.analysis.report.format import fmt_p, interval, k_of_n, kappa_text, ms, p_eq, p_name, points
from orchestrator.analysis.report.funnel import funnel_tables
from orchestrator.analysis.report.model import OVERRUN_WARN_FRACTION, Comparison, Report
from orchestrator.analysis.report.raters import judge_flags, rater_lines
from orchestrator.analysis.report.start_state import describe_interventions
from orchestrator.store.records import RIG_KIND_WORDS


@dataclass(frozen=True)
class Title:
    text: str


@dataclass(frozen=True)
class Heading:
    text: str


@dataclass(frozen=True)
class Line:
    text: str
    role: str = ""              # "verdict": the headline, set apart in HTML


@dataclass(frozen=True)
class Item:
    text: str                   # one list item ("- text")


@dataclass(frozen=True)
class Gap:
    """A blank line between paragraphs (plain text and Markdown only)."""


@dataclass(frozen=True)
class Table:
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


Block = Title | Heading | Line | Item | Gap | Table


def table(header: list[str], rows: list[list[str]]) -> Table:
    return Table(tuple(header), tuple(tuple(r) for r in rows))


# ------------------------------------------------------------------ sections


UNVERIFIED_SHOWN = 20   # rows the first line of a report on a broken chain names


def unverified_line(evidence) -> str:
    """The first line of a report read with `--allow-broken-chain` from a broken chain."""
    if evidence.damage is not None:
        return (f"UNVERIFIED: the campaign store is damaged (SQLite's integrity check: {evidence.damage}); "
                "read with --allow-broken-chain, every row is unverified")
    rows = evidence.unverified
    names = ", ".join(rows[:UNVERIFIED_SHOWN]) + (f" and {len(rows) - UNVERIFIED_SHOWN} more"
                                                  if len(rows) > UNVERIFIED_SHOWN else "")
    return (f"UNVERIFIED: {len(rows)} row{'s' if len(rows) != 1 else ''} of the campaign store "
            f"{'do' if len(rows) != 1 else 'does'} not match its "
            f"evidence chain (read with --allow-broken-chain; what they hold is unverified): {names}")


def _evidence_line(evidence) -> str:
    state = (evidence.origin_text() if evidence.intact
             else "does not verify: the first line says why")
    return f"Evidence: chain head {evidence.head}, {evidence.entries} entries, {state}"


def header(r: Report) -> list[Block]:
    out: list[Block] = []
    if r.evidence is not None and not r.evidence.intact:
        out.append(Line(unverified_line(r.evidence), "verdict"))
    out += [Title(f"Report: {r.protocol_name or r.campaign_name}"),
            Line(f"Verdict: {r.headline}", "verdict"),
            *(Line(f"Judges: {flag.text()}", "verdict") for flag in judge_flags(r.raters)), Gap(),
            Line(f"Source: {r.source}" + (f" (campaign {r.campaign_id})" if r.campaign_id else ""))]
    if r.rig_kind:
        out.append(Line(f"Rig: {RIG_KIND_WORDS[r.rig_kind]}"))
    if r.protocol_sha256:
        out.append(Line(f"Protocol: {r.protocol_name}, sha256 {r.protocol_sha256}"))
    if r.evidence is not None:
        out.append(Line(_evidence_line(r.evidence)))
    out.append(Line(f"Labels: {r.label_source}"))
    out.append(Line(f"Primary test: McNemar {p_name(r.primary)}, alpha {r.alpha:g}; stopping rule: {r.stopping_rule}"))
    out.append(Line(_unit_line(r)))
    out.append(Line(f"Trials: {r.trials_done} done of {r.trials_scheduled} scheduled; aborted attempts: "
                    f"{r.aborted_attempts}; campaign {'complete' if r.complete else 'NOT complete'}"
                    + (f"; stopped: {r.stop_reason}" if r.stop_reason else "")))
    if r.sessions is not None:
        s = r.sessions
        out.append(Line(f"Run sessions: {s.count} ({s.interrupted} interrupted, {s.killed} killed, {s.failed} failed"
                        + (f", {s.running} still running" if s.running else "") + ")"))
    if r.operator_is_judge is not None:
        out.append(Line("Operator also a judge: " + ("yes" if r.operator_is_judge else "no")))
    notes = [n for c in r.comparisons for n in c.notes] + list(r.notes)
    if notes:
        out.append(Gap())
        out += [Line(f"Note: {n}") for n in dict.fromkeys(notes)]
    return out


def _unit_line(r: Report) -> str:
    """The unit of analysis and the deciding test (the header names both)."""
    if r.unit == "mark":
        c = next(c for c in r.comparisons if c.unit == "mark")
        return (f"Unit of analysis: the mark ({len(c.marks)} marks, {c.table.n} pairs: marks have repeats); "
                f"test: {r.test}")
    return f"Unit of analysis: the layout (one pair per mark); test: {r.test}"


def warnings(r: Report) -> list[Block]:
    if not r.warnings:
        return []
    blocks: list[Block] = [Heading("Warnings"), *(Item(w) for w in r.warnings)]
    return blocks


def policies(r: Report) -> list[Block]:
    clustered = any(p.interval.method == "wilson-clustered" for p in r.policies)
    blocks: list[Block] = [Heading("Success per policy (Wilson 95%" + (", clustered over marks: repeats on one "
                                                                      "mark are not independent" if clustered else "") + ")"),
            table(["policy", "successes", "95% CI", "unjudged", "aborted attempts"],
                  [[p.label, k_of_n(p.successes, p.trials), interval(p.interval), str(p.unjudged),
                    str(p.aborted_attempts)] for p in r.policies])]
    return blocks + _deployments(r)


def _deployments(r: Report) -> list[Block]:
    """One line: how each LeRobot policy was deployed (sync, rtc, a policy server)."""
    shown = [f"{p.label}: {p.deployment}" for p in r.policies if p.deployment and p.deployment != "scripted"]
    return [Gap(), Line("deployment: " + ", ".join(shown))] if shown else []


def comparison(c: Comparison, several: bool) -> list[Block]:
    """One pairwise comparison: the paired 2x2 table, the tests, the interval, the verdict."""
    t = c.table
    prim = p_name(c.primary)
    d = c.difference
    out: list[Block] = [
        Heading(f"{c.a} vs {c.b}: paired over {len(c.marks)} marks ({t.n} pairs)" if c.unit == "mark"
                else f"{c.a} vs {c.b}: paired over {t.n} layouts"),
        table(["", f"{c.b} succeeds", f"{c.b} fails"],
              [[f"{c.a} succeeds", f"both: {t.both}", f"{c.a} only: {t.a_only}"],
               [f"{c.a} fails", f"{c.b} only: {t.b_only}", f"neither: {t.neither}"]]),
        Gap(),
        Line(f"Discordant {'pairs' if c.unit == 'mark' else 'layouts'}: {t.discordant} ({c.a} only {t.a_only}, "
             f"{c.b} only {t.b_only})" + _reach(c)),
        _mcnemar_line(c)]
    if several:
        out.append(Line(_ref(c) + f"Holm-adjusted {prim}: {fmt_p(c.holm_primary_p)}"))
    out += _clustered(c)
    est, lo, hi = points(d.estimate, d.lo, d.hi)
    method = "Newcombe with the design effect over marks" if c.unit == "mark" else "Newcombe"
    # one rule for every interval: its bounds in the decimals `points` gives them with the estimate
    tango = points(d.estimate, c.tango.lo, c.tango.hi)[1:] + points(d.estimate, c.bonett_price.lo, c.bonett_price.hi)[1:]
    out.append(Line(_ref(c) + f"Difference {c.a} - {c.b}: {est} points, 95% CI {lo} to {hi} ({method}"
                    + (", fixed-n: not valid after optional stopping" if c.sequence is not None else "") + "); "
                    + ("pairs as if independent: " if c.unit == "mark" else "")
                    + f"Tango {tango[0]} to {tango[1]}, Bonett-Price {tango[2]} to {tango[3]}"))
    if c.sequence is not None:
        q = c.sequence
        est, lo, hi = points(q.estimate, q.lo, q.hi)
        out.append(Line(f"Anytime-valid {100 * q.level:g}% confidence sequence for the difference: {lo} to {hi} "
                        "points (Beta-binomial mixture, Howard et al. 2021): valid at the data-dependent stop, but "
                        "not the rule's test: it also bounds how often the policies disagree, so it is wider than "
                        "the rule's interval and can reach 0 when the rule rejects"))
    if c.pairing_note:
        out.append(Line(_ref(c) + c.pairing_note))
    out.append(Line(f"Anytime-valid e-value on the discordant {'marks' if c.unit == 'mark' else 'pairs'}: "
                    f"{c.evalue.e_value:.2f} "
                    f"(rejects at >= {c.evalue.threshold:g})"))
    out.append(Line(f"Verdict: {c.verdict}"))
    out += [Line(f"Note: {n}") for n in c.notes]
    if c.strata:
        out += [Gap(), Line(_ref(c) + "Per stratum:"),
                table(["stratum", "pairs", "both", f"{c.a} only", f"{c.b} only", "neither", "mid-p"],
                      [[s.stratum, str(s.table.n), str(s.table.both), str(s.table.a_only), str(s.table.b_only),
                        str(s.table.neither), fmt_p(s.mid_p)] for s in c.strata])]
    return out


def _ref(c: Comparison) -> str:
    """`AFTER_STOP` before a fixed-n figure of a comparison decided by the e-value rule."""
    return AFTER_STOP if c.share is not None else ""


def _reach(c: Comparison) -> str:
    """How strong a result the deciding test could give with these discordant units at best."""
    if c.deciding_max_e is not None:
        return (f"; the largest e-value the rule's {c.evalue.a_only + c.evalue.b_only} discordant units could give "
                f"is {c.deciding_max_e:.3g} (the rule decides at {c.evalue.threshold:g})")
    if c.unit == "mark" and c.clustered is not None and c.deciding_floor_p is not None:
        return (f"; {c.clustered.discordant_marks} discordant marks: the smallest exact p the test over marks "
                f"could give is {fmt_p(c.deciding_floor_p)}")
    return f"; smallest exact p they could give: {fmt_p(c.floor_p)}"


def _mcnemar_line(c: Comparison) -> Line:
    m = c.mcnemar
    layout = c.unit == "layout"
    tag = {p: " (primary)" if layout and c.primary == p else "" for p in ("mcnemar_midp", "mcnemar_exact")}
    return Line(_ref(c) + ("McNemar" if layout else "McNemar on the pairs as if independent (for reference only)")
                + f" mid-p {fmt_p(m.mid_p)}{tag['mcnemar_midp']}, exact {fmt_p(m.exact_p)}{tag['mcnemar_exact']}; "
                f"chi2 {m.chi2:.2f} (p {fmt_p(m.chi2_p)}), with continuity correction "
                f"{m.chi2_cc:.2f} (p {fmt_p(m.chi2_cc_p)})")


def _clustered(c: Comparison) -> list[Block]:
    """With repeats: the test over marks and the per-mark counts."""
    k = c.clustered
    if k is None:
        return []
    prim = "mcnemar_midp" if c.primary != "mcnemar_exact" else "mcnemar_exact"
    return [Line(_ref(c) + f"Clustered McNemar over marks (the unit): {k.discordant_marks} of {k.marks} marks discordant; "
                 f"sign-flip mid-p {fmt_p(k.mid_p)}{' (primary)' if prim == 'mcnemar_midp' else ''}, "
                 f"exact {fmt_p(k.exact_p)}{' (primary)' if prim == 'mcnemar_exact' else ''}; Durkalski chi2 "
                 f"{k.durkalski_chi2:.2f} (p {fmt_p(k.durkalski_p)}, asymptotic); design effect "
                 f"{k.design_effect:.2f}"),
            Gap(), Line("Per mark:"),
            table(["mark", "pairs", "both", f"{c.a} only", f"{c.b} only", "neither"],
                  [[m, str(t.n), str(t.both), str(t.a_only), str(t.b_only), str(t.neither)] for m, t in c.marks]),
            Gap()]


def comparisons(r: Report) -> list[Block]:
    return [b for c in r.comparisons for b in comparison(c, len(r.comparisons) > 1)]


def cochran(r: Report) -> list[Block]:
    why = dict(r.withheld).get("cochran_q")
    if why:
        return [Heading("Three or more policies"), Line(f"Cochran's Q withheld: {why}.")]
    if r.cochran is None:
        return []
    q = r.cochran
    return [Heading("Three or more policies"),
            Line(_after_stop(r.stopping_rule) + f"Cochran's Q = {q.q:.3f}, df {q.df}, p {p_eq(q.p)} ({q.blocks} "
                 "layouts judged for every policy); pairwise McNemar above, Holm-adjusted.")]


AFTER_STOP = "Computed after an optional stop (the e-value rule decides; for reference only): "


def _after_stop(stopping_rule: str) -> str:
    """The label of a fixed-n test or interval under the pre-registered e-value rule: every look
    could have stopped the campaign, so none of them is valid at the stop; the rule decides."""
    return AFTER_STOP if stopping_rule.startswith("e-value") else ""


def strata(r: Report) -> list[Block]:
    if not r.strata:
        return []
    clustered = any(iv.method == "wilson-clustered" for s in r.strata for _, _, _, iv in s.per_policy)
    return [Heading("Per stratum (95%: Wilson" + (", clustered over marks" if clustered else "") + ")"),
            table(["stratum", "layouts"] + [p.label for p in r.policies],
                  [[s.stratum, str(s.layouts)] + [f"{k_of_n(k, n)} {interval(iv, 2)}" for _, k, n, iv in s.per_policy]
                   for s in r.strata])]


def _counts_per_policy(r: Report, title: str, column: str, counts: Callable[[Any], Any],
                       empty: str) -> list[Block]:
    """A heading and a table of how often each key of `counts(policy)` (pairs key, count) occurs
    per policy, 0 where a policy has none; `empty` instead when no policy has any."""
    keys = sorted({k for p in r.policies for k, _ in counts(p)})
    if not keys:
        return [Heading(title), Line(empty)]
    return [Heading(title), table([column] + [p.label for p in r.policies],
                                  [[k] + [str(dict(counts(p)).get(k, 0)) for p in r.policies] for k in keys])]


def failure_modes(r: Report) -> list[Block]:
    return _counts_per_policy(r, "Failure modes", "failure mode", lambda p: p.failure_modes,
                              "no failures recorded")


def safety_events(r: Report) -> list[Block]:
    blocks = _counts_per_policy(r, "Safety events", "event", lambda p: p.safety_events, "none recorded")
    if not any(p.safety_events for p in r.policies):
        return blocks
    return blocks + [Line("episodes with any safety event: "
                          + ", ".join(f"{p.label} {p.episodes_with_safety_events}" for p in r.policies))]


def time_to_success(r: Report) -> list[Block]:
    rows = []
    for p in r.policies:
        ts = p.time_to_success
        rows.append([p.label, "-" if ts is None else str(ts.n),
                     "-" if ts is None else f"{ts.median:.2f} s", "-" if ts is None else f"{ts.mean:.2f} s",
                     "-" if ts is None else f"{ts.lo:.2f}-{ts.hi:.2f} s"])
    return [Heading("Time to success (among successes)"), table(["policy", "n", "median", "mean", "range"], rows)]


def timing(r: Report) -> list[Block]:
    if not r.timing:
        return []
    out: list[Block] = [Heading("Control-loop timing"
                                + (f" ({r.fps} Hz, {1000 / r.fps:.1f} ms period)" if r.fps else ""))]
    if all(t.paced for t in r.timing):
        out += [table(["policy", "episodes with timing", "period p50", "worst period p99", "overrun steps",
                       f"episodes > {100 * OVERRUN_WARN_FRACTION:g}% overruns", "lost steps", "episodes that lost steps",
                       "policy p50", "policy p99"],
                      [[t.label, f"{t.with_timing} of {t.episodes}", ms(t.period_p50_ms), ms(t.period_p99_ms),
                        str(t.overrun_steps), str(t.episodes_over), str(t.lost_steps),
                        f"{t.episodes_lost} of {t.with_timing}" if t.episodes_lost is not None else "-",
                        ms(t.policy_p50_ms), ms(t.policy_p99_ms)]
                       for t in r.timing]),
                Gap(),
                Line("period p50, policy p50 and p99: median over the episodes; worst period p99: the slowest "
                     "episode; an overrun step took more than 5% longer than the period; every episode ends at "
                     "the protocol's duration in wall-clock time, so steps lost to overruns are not made up")]
    else:
        out += [Line("simulated: not paced in real time (no overrun figures); policy compute time per step:"),
                Gap(),
                table(["policy", "episodes with timing", "policy p50", "policy p99", "worst policy p99"],
                      [[t.label, f"{t.with_timing} of {t.episodes}", ms(t.policy_p50_ms), ms(t.policy_p99_ms),
                        ms(t.policy_p99_max_ms)] for t in r.timing]),
                Gap(),
                Line("policy p50 and p99: median over the episodes; worst policy p99: the slowest episode")]
    chunks = [f"{t.label} p50 {ms(t.inference_p50_ms)}, p99 {ms(t.inference_p99_ms)}"
              for t in r.timing if t.inference_p50_ms is not None]
    if chunks:
        out.append(Line("inference latency per chunk (RTC thread or policy server, median over the episodes): "
                        + "; ".join(chunks)))
    framed = [t for t in r.timing if t.frame_age_p50_ms is not None]
    if framed:
        out += [Gap(), table(["policy", "camera frame age p50", "worst frame age p95", "repeated frames"],
                             [[t.label, ms(t.frame_age_p50_ms), ms(t.frame_age_p95_ms),
                               "-" if t.frame_repeat_fraction is None else f"{100 * t.frame_repeat_fraction:.1f}%"]
                              for t in framed]),
                Gap(), Line("frame age: from the camera's read thread receiving a frame to the step that used it "
                            "(the camera's own exposure-to-USB latency comes before and is not measured); "
                            "repeated: the step got the same frame as the step before")]
    return out


def aborted(r: Report) -> list[Block]:
    section = r.aborts
    if section is None:
        return [Heading("Aborted attempts"),
                Line(", ".join(f"{p.label}: {p.aborted_attempts}" for p in r.policies))]
    if not any(x.by_class for x in section.rows):
        return [Heading("Aborted attempts"), Line(f"none ({describe_rules(section.rules)})")]
    out: list[Block] = [
        Heading("Aborted attempts"), Line(describe_rules(section.rules)),
        table(["policy", "trials", "with an abort", "counted as failure", "left out",
               "aborted attempts by class: cause", "the operator's answers"],
              [[x.policy, str(x.trials), str(x.trials_with_abort), str(x.scored_failures), str(x.excluded),
                describe_causes(x), describe_answers(x)] for x in section.rows])]
    for t in section.tests:
        out.append(Item(f"abort rate {t.a} vs {t.b}: Fisher exact p {p_eq(t.fisher_p)}"
                        + (f", Holm-adjusted {p_eq(t.holm_p)}" if len(section.tests) > 1 else "")
                        + (" (differ)" if t.holm_p <= section.alpha else "")))
    return out


def start_check(r: Report) -> list[Block]:
    out: list[Block] = []
    s = r.start_check
    if s is not None:
        def mm(v):
            return "-" if v is None else f"{v:.1f}"

        out += [Heading("Start states (the camera's start check)"),
                table(["policy", "checked", "offset p50 mm", "p95 mm", "|yaw| p50 deg", "p95 deg",
                       "started on a failed check", "overridden"],
                      [[x.policy, str(x.checked), mm(x.offset_p50_mm), mm(x.offset_p95_mm), mm(x.yaw_p50_deg),
                        mm(x.yaw_p95_deg), str(x.started_failing), str(x.overridden)] for x in s.rows])]
        for t in s.tests:
            out.append(Item(f"placement {t.a} vs {t.b}: Mann-Whitney p {p_eq(t.mann_whitney_p)}"
                            + (f", Holm-adjusted {p_eq(t.holm_p)}" if len(s.tests) > 1 else "")
                            + (" (differ)" if t.holm_p <= s.alpha else "")))
        if s.judged:
            kappa = kappa_text(s.kappa)
            out.append(Item(f"check vs the judges' invalid starts on {s.judged} judged attempts: refused "
                            f"{s.table['refused_invalid']} invalid / {s.table['refused_valid']} valid, passed "
                            f"{s.table['passed_invalid']} invalid / {s.table['passed_valid']} valid; agreement "
                            f"{100 * (s.agreement or 0):.0f}%, Cohen's kappa {kappa}"))
    if r.interventions is not None:
        out += [Heading("Operator interventions"), Line(describe_interventions(r.interventions))]
    return out


def drift(r: Report) -> list[Block]:
    out: list[Block] = [Heading("Drift check (success by campaign half)")]
    if not r.drift:
        return out + [Line("not enough judged trials")]
    out.append(table(["policy", "first half", "second half", "Fisher p"],
                     [[d.policy, k_of_n(d.first_k, d.first_n), k_of_n(d.second_k, d.second_n),
                       fmt_p(d.fisher_p) if d.fisher_p == d.fisher_p else "withheld"] for d in r.drift]))
    why = dict(r.withheld).get("drift_fisher_p")
    if why:
        out.append(Line(f"Fisher p withheld: {why}."))
    order_rows = [p for p in r.policies if p.first_trials and p.second_trials]
    if order_rows:
        out += [Gap(), Line("Order within the pair: " + "; ".join(
            f"{p.label} first {k_of_n(p.first_successes, p.first_trials)}, second "
            f"{k_of_n(p.second_successes, p.second_trials)}" for p in order_rows))]
    return out


def judges(r: Report) -> list[Block]:
    j = r.judges
    if j is None:
        return []
    out: list[Block] = [Heading("Judges"), Line("Labels: " + ", ".join(f"{name} {n}" for name, n in j.labels_per_judge))]
    for k in j.kappas:
        out.append(Line(f"Cohen's kappa {k.judge_1} vs {k.judge_2}: {kappa_text(k.kappa, 3)} on {k.items} episodes "
                        f"(raw agreement {100 * k.agreement:.0f}%)"))
    if j.fleiss is not None and len(j.judges) > 2:
        out.append(Line(f"Fleiss' kappa over {len(j.judges)} judges: {kappa_text(j.fleiss, 3)} on {j.fleiss_items} "
                        "episodes"))
    if j.disagreements:
        out.append(Line("Disagreements:"))
        for d in j.disagreements:
            phys = "" if d.physics is None else f"; physics: {'success' if d.physics else 'failure'}"
            out.append(Item(f"{d.episode_id} (layout {d.layout}, policy {d.policy}): "
                            + ", ".join(f"{a} {b}" for a, b in d.labels) + phys))
    for a in j.accuracy:
        if a.compared or a.unsure:
            acc = f"{a.agree}/{a.compared} ({100 * a.agree / a.compared:.0f}%)" if a.compared else "-"
            out.append(Line(f"Accuracy of {a.judge} vs physics: {acc}; said success when physics failed: "
                            f"{a.false_success}, failure when physics succeeded: {a.false_failure}; "
                            f"unsure: {a.unsure}"))
    return out


def stations(r: Report) -> list[Block]:
    s = r.stations
    if s is None:
        return []
    out: list[Block] = [Heading(f"Stations ({s.a} vs {s.b}, paired per station)")]
    out.append(table(["station", "blocks", "pairs", "both", f"{s.a} only", f"{s.b} only", "neither",
                      *(f"{p} success" for p, _, _ in s.rows[0].successes), "median block"],
                     [[row.station, str(row.blocks), str(row.pairs), str(row.both), str(row.a_only),
                       str(row.b_only), str(row.neither), *(k_of_n(k, n) for _, k, n in row.successes),
                       "-" if row.median_block_s is None else f"{row.median_block_s:.1f} s"]
                      for row in s.rows]))
    h = s.homogeneity
    out.append(Line("Discordance by station (exact conditional test, Freeman-Halton): "
                    + (f"p {fmt_p(h.p_value)} over {len(h.stations)} stations with discordant pairs"
                       if h.p_value is not None else "not testable (fewer than two stations with discordant pairs)")))
    return out


def rater_trust(r: Report) -> list[Block]:
    """Agreement of every judge and of `auto` with physics and with the human consensus."""
    lines = rater_lines(r.raters, r.arm_still)
    if not lines:
        return []
    return [Heading("Raters against physics and the consensus (auto is advisory unless pre-registered)"),
            *(Item(line) for line in lines)]


def corrected(r: Report) -> list[Block]:
    """The rater's labels corrected by the audit (judging.audit): rates, differences, agreement."""
    if r.corrected is None:
        return []
    how = "decides" if r.corrected.decides else "for reference: the pre-registered e-value rule decides"
    return [Heading(f"Corrected by the audit ({how})"), *(Item(line) for line in corrected_lines(r.corrected))]


def progress_ladder(r: Report) -> list[Block]:
    """The funnel per policy (`funnel.py`), said to be recorded only: no decision uses it."""
    tables = funnel_tables(r.funnel) if r.funnel is not None else []
    return [Heading("Progress ladder (recorded; no decision uses it)"), Line(r.funnel.note),
            *(b for title, head, rows in tables for b in (Line(title), table(head, rows)))] if tables else []


def unpaired(r: Report) -> list[Block]:
    if not r.unpaired:
        return []
    return [Heading("Unpaired layouts"),
            *(Item(f"{lay}" + (f" (repeat {rep})" if rep else "") + f": {why}") for lay, rep, why in r.unpaired)]


SECTIONS: tuple[Callable[[Report], list[Block]], ...] = (
    header, warnings, policies, corrected, comparisons, cochran, strata, failure_modes, safety_events, time_to_success,
    timing, aborted, start_check, drift, stations, judges, rater_trust, progress_ladder, unpaired)


def document(r: Report) -> list[Block]:
    """Every section's blocks, in reading order."""
    return [b for section in SECTIONS for b in section(r)]
