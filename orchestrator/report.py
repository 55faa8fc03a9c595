"""The campaign report: a frozen `Report` built from an `OutcomeSet`, and its renderings.

`build_report` is the only place that calls the statistics (`orchestrator.stats`); the
renderers (`render_text`, `render_markdown`, `render_json`, `render_html`) only format what
the Report holds. JSON follows DESIGN section 4 (schema `orchestrator.report/1`); the extra
keys it carries are additions, never changes of meaning. HTML is one self-contained file
with matplotlib PNGs embedded as base64 (matplotlib is imported only for HTML).
"""

from __future__ import annotations

import html as _html
import json
import math
from collections import Counter
from dataclasses import dataclass, field
from itertools import accumulate, combinations
from typing import Any

from . import stats
from .outcomes import OutcomeSet, SessionCounts

SCHEMA = "orchestrator.report/1"
PLAN_MAX_LAYOUTS = 2000
# An episode "could not keep the rate" when more than this fraction of its steps overran the
# control period: the same threshold as the runner's warning (runner.OVERRUN_WARN_FRACTION).
OVERRUN_WARN_FRACTION = 0.05


# ------------------------------------------------------------------ the report object


@dataclass(frozen=True)
class TimeSummary:
    n: int
    median: float
    mean: float
    lo: float
    hi: float


@dataclass(frozen=True)
class PolicySummary:
    label: str
    successes: int
    trials: int                       # trials with a known outcome
    wilson: stats.Interval
    scheduled: int
    done: int
    unjudged: int                     # done but no usable label
    aborted_attempts: int
    failure_modes: tuple[tuple[str, int], ...]
    safety_events: tuple[tuple[str, int], ...]
    episodes_with_safety_events: int
    time_to_success: TimeSummary | None
    first_successes: int              # successes when this policy went first in its pair
    first_trials: int
    second_successes: int
    second_trials: int

    @property
    def rate(self) -> float | None:
        return self.successes / self.trials if self.trials else None


@dataclass(frozen=True)
class PolicyTiming:
    """Control-loop timing of one policy's episodes (milliseconds).

    paced is False for a simulated campaign: its steps are not paced in real time, so the
    periods are compute time and overruns are not measured (None)."""

    label: str
    episodes: int                     # done episodes
    with_timing: int                  # of those, episodes with a stored timing summary
    steps: int | None                 # steps per episode (the common value)
    paced: bool
    period_p50_ms: float | None       # median over episodes of the episode's period p50
    period_p99_ms: float | None       # worst episode's period p99
    overrun_steps: int | None         # total over episodes (None when not paced)
    episodes_over: int | None         # episodes with more than OVERRUN_WARN_FRACTION overruns
    policy_p50_ms: float | None       # median over episodes of the policy's compute p50
    policy_p99_ms: float | None       # median over episodes of the policy's compute p99
    policy_p99_max_ms: float | None   # worst episode's policy compute p99


@dataclass(frozen=True)
class StratumComparison:
    stratum: str
    table: stats.PairedTable
    mid_p: float
    exact_p: float


@dataclass(frozen=True)
class Comparison:
    a: str
    b: str
    table: stats.PairedTable
    mcnemar: stats.McNemarResult
    difference: stats.Interval        # Newcombe method 10 (the reported interval)
    tango: stats.Interval
    bonett_price: stats.Interval
    primary: str                      # mcnemar_midp | mcnemar_exact
    primary_p: float
    holm_mid_p: float
    holm_primary_p: float
    fisher_p: float                   # the same trials treated as unpaired
    unpaired_difference: stats.Interval
    floor_p: float                    # smallest exact p reachable with these discordant pairs
    evalue: stats.EValueResult
    significant: bool
    more_layouts_needed: int | None   # for 80 % power at the observed cells (None: cannot say)
    more_layouts_note: str
    verdict: str
    pairing_note: str
    strata: tuple[StratumComparison, ...]

    @property
    def pairs(self) -> int:
        return self.table.n


@dataclass(frozen=True)
class StratumRow:
    stratum: str
    layouts: int
    per_policy: tuple[tuple[str, int, int, stats.Interval], ...]    # label, k, n, wilson


@dataclass(frozen=True)
class DriftRow:
    policy: str
    first_k: int
    first_n: int
    second_k: int
    second_n: int
    fisher_p: float


@dataclass(frozen=True)
class KappaRow:
    judge_1: str
    judge_2: str
    items: int
    kappa: float
    agreement: float


@dataclass(frozen=True)
class Disagreement:
    episode_id: str
    layout: str
    repeat: int
    policy: str
    labels: tuple[tuple[str, str], ...]   # (judge, label)
    physics: bool | None


@dataclass(frozen=True)
class JudgeAccuracy:
    judge: str
    agree: int
    compared: int
    unsure: int
    false_success: int                # judge said success, physics said failure
    false_failure: int


@dataclass(frozen=True)
class JudgeSection:
    judges: tuple[str, ...]
    labels_per_judge: tuple[tuple[str, int], ...]
    kappas: tuple[KappaRow, ...]
    fleiss: float | None
    fleiss_items: int
    disagreements: tuple[Disagreement, ...]
    accuracy: tuple[JudgeAccuracy, ...]


@dataclass(frozen=True)
class Report:
    schema: str
    source: str
    label_source: str
    campaign_id: str
    campaign_name: str
    protocol_name: str
    protocol_sha256: str
    simulated: bool
    complete: bool
    stop_reason: str | None
    stopping_rule: str
    primary: str
    alpha: float
    trials_done: int
    trials_scheduled: int
    aborted_attempts: int
    policies: tuple[PolicySummary, ...]
    comparisons: tuple[Comparison, ...]
    cochran: stats.CochranQResult | None
    strata: tuple[StratumRow, ...]
    drift: tuple[DriftRow, ...]
    judges: JudgeSection | None
    unpaired: tuple[tuple[str, int, str], ...]      # layout, repeat, why
    warnings: tuple[str, ...]
    headline: str
    # what the plots draw (no statistics: positions and outcomes only)
    grid: tuple[tuple[str, float | None, float | None, str, str], ...] = ()   # layout, x, y, stratum, category
    timeline: tuple[tuple[str, tuple[bool, ...]], ...] = ()                   # policy, outcomes in run order
    extra: dict[str, Any] = field(default_factory=dict)
    # campaign-only facts (empty / None for an outcomes CSV)
    timing: tuple[PolicyTiming, ...] = ()
    sessions: SessionCounts | None = None
    operator_is_judge: bool | None = None
    fps: int | None = None


# ------------------------------------------------------------------ building


def _pct(x: float) -> str:
    """Signed percentage points, e.g. +16 or -3."""
    v = round(100 * x)
    return f"{'+' if v > 0 else ('-' if v < 0 else '')}{abs(v)}" if v != 0 else "0"


def _fmt_p(p: float) -> str:
    if p < 0.0001:
        return "< 0.0001"
    if p < 0.001:
        return f"{p:.4f}"
    return f"{p:.3f}"


def _p_eq(p: float) -> str:
    """'= 0.012' or '< 0.0001', to follow a 'p'."""
    text = _fmt_p(p)
    return text if text.startswith("<") else f"= {text}"


def _test_name(primary: str) -> str:
    return "exact p" if primary == "mcnemar_exact" else "mid-p"


def _time_summary(values: list[float]) -> TimeSummary | None:
    if not values:
        return None
    values = sorted(values)
    n = len(values)
    med = values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2
    return TimeSummary(n, med, sum(values) / n, values[0], values[-1])


def _median(values: list[float]) -> float | None:
    if not values:
        return None
    values = sorted(values)
    n = len(values)
    return values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2


def _timing(data: OutcomeSet) -> tuple[PolicyTiming, ...]:
    """Per-policy control-loop timing; () when the source is not a campaign (an outcomes CSV)."""
    if not data.campaign_id:
        return ()
    paced = not data.simulated
    rows = []
    for p in data.policies:
        done = [o for o in data.outcomes if o.policy == p and o.state == "done" and o.episode_id]
        ts = [o.timing for o in done if o.timing is not None]
        over = [t for t in ts if t.overruns > OVERRUN_WARN_FRACTION * t.steps]
        steps = Counter(t.steps for t in ts).most_common(1)
        rows.append(PolicyTiming(
            label=p, episodes=len(done), with_timing=len(ts), steps=steps[0][0] if steps else None, paced=paced,
            period_p50_ms=_median([t.period_p50_ms for t in ts]),
            period_p99_ms=max((t.period_p99_ms for t in ts), default=None),
            overrun_steps=sum(t.overruns for t in ts) if paced else None,
            episodes_over=len(over) if paced else None,
            policy_p50_ms=_median([t.policy_p50_ms for t in ts]),
            policy_p99_ms=_median([t.policy_p99_ms for t in ts]),
            policy_p99_max_ms=max((t.policy_p99_ms for t in ts), default=None)))
    return tuple(rows)


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
        time_to_success=_time_summary(times),
        first_successes=sum(1 for o in first if o.success), first_trials=len(first),
        second_successes=sum(1 for o in second if o.success), second_trials=len(second))


def _more_layouts(table: stats.PairedTable, alpha: float, primary: str) -> tuple[int | None, str]:
    """Layouts still needed for 80 % power if the observed cell rates were the truth."""
    n = table.n
    if n == 0:
        return None, "no complete pairs yet"
    b, c = table.a_only, table.b_only
    if b == c:
        return None, ("the policies won the same number of discordant layouts, so the observed "
                      "difference is zero and no number of layouts is expected to separate them")
    needed = stats.layouts_needed(b / n, c / n, 0.8, alpha, primary, PLAN_MAX_LAYOUTS)
    if needed is None:
        return None, (f"even {PLAN_MAX_LAYOUTS} layouts would not give 80 % power at the observed "
                      "difference: it is too small to establish with this design")
    return max(needed - n, 0), (f"with the observed rates ({b}/{n} A-only, {c}/{n} B-only layouts) "
                                f"about {needed} layouts in all give 80 % power")


def _evalue_rule(stopping: Any) -> bool:
    if isinstance(stopping, dict):
        return stopping.get("kind") == "evalue"
    return getattr(stopping, "kind", None) == "evalue"


def _compare(a: str, b: str, data: OutcomeSet, holm_mid: float, holm_primary: float,
             comparisons: int = 1) -> Comparison:
    pairs = data.pairs(a, b)
    table = stats.paired_table([x[1] for x in pairs], [x[2] for x in pairs])
    mc = stats.mcnemar(table.a_only, table.b_only)
    primary = data.primary if data.primary in ("mcnemar_midp", "mcnemar_exact") else "mcnemar_midp"
    p_primary = mc.exact_p if primary == "mcnemar_exact" else mc.mid_p
    diff = stats.newcombe_paired(table)
    n = table.n
    fisher = stats.fisher_exact(table.successes_a, n, table.successes_b, n) if n else 1.0
    unpaired = stats.newcombe_independent(table.successes_a, n, table.successes_b, n) if n else \
        stats.Interval(0.0, -1.0, 1.0, "newcombe-hybrid")
    # with a pre-registered e-value stopping rule the anytime-valid e-value decides (the McNemar
    # p-values assume a fixed number of layouts); K comparisons share alpha (threshold K/alpha)
    evalue_rule = _evalue_rule(data.stopping)
    ev = stats.evalue_discordant(table.a_only, table.b_only, data.alpha / max(comparisons, 1))
    significant = n > 0 and (ev.reject if evalue_rule else holm_primary <= data.alpha)
    more, more_note = _more_layouts(table, data.alpha, primary)
    floor = stats.discordant_floor(table.discordant)
    test = _test_name(primary)
    if evalue_rule:
        p_label, p_value_text = "e-value", f"{ev.e_value:.1f} (anytime-valid; decides at >= {ev.threshold:g})"
    else:
        p_label = test if math.isclose(holm_primary, p_primary) else f"Holm-adjusted {test}"
        p_value_text = _fmt_p(holm_primary)
    ci = f"difference {_pct(diff.estimate)} points, 95% CI {_pct(diff.lo)} to {_pct(diff.hi)}"
    if n == 0:
        verdict = f"{a} vs {b}: no layout has a known outcome for both yet; nothing can be said."
    elif significant:
        better, worse = (a, b) if table.a_only > table.b_only else (b, a)
        verdict = f"{better} better than {worse}: {p_label} {p_value_text}; {ci}"
        if diff.lo <= 0 <= diff.hi:
            verdict += " (the interval still reaches 0: a borderline result)"
        verdict += "."
    else:
        verdict = f"{a} vs {b}: not established at this n ({p_label} {p_value_text}; {ci})."
        if table.discordant < stats.min_discordant_for_alpha(data.alpha, primary):
            verdict += (f" Only {table.discordant} discordant layout{'s' if table.discordant != 1 else ''}: "
                        f"too few for any split to reach p <= {data.alpha:g}.")
        if more is not None:
            verdict += f" Need about {more} more layouts (80 % power at the observed rates"
            verdict += f"; a rough guide from only {n} layouts)." if n < 20 else ")."
        else:
            verdict += f" {more_note[0].upper()}{more_note[1:]}."
    if n == 0:
        pairing = ""
    else:
        agree = table.both + table.neither
        head = (f"Treated as unpaired samples the same trials give Fisher p {_p_eq(fisher)}; "
                f"paired, {test} {_fmt_p(p_primary)}: ")
        if p_primary < 0.8 * fisher:
            pairing = head + (f"pairing gave the stronger evidence; the policies agreed on {agree} of {n} layouts "
                              f"and only the {table.discordant} discordant "
                              f"layout{'s' if table.discordant != 1 else ''} carry the comparison.")
        elif p_primary <= 1.25 * fisher:
            pairing = head + (f"pairing made little difference here; the policies agreed on {agree} of {n} "
                              "layouts, about what unrelated outcomes would give.")
        else:
            pairing = head + (f"pairing bought nothing here; the policies agreed on only {agree} of {n} "
                              "layouts, so their outcomes were barely correlated across layouts.")
    strata_rows = []
    by_stratum: dict[str, list[tuple[bool, bool]]] = {}
    key_stratum = {o.key: (o.stratum or "all") for o in data.outcomes}
    for key, sa, sb in pairs:
        by_stratum.setdefault(key_stratum.get(key, "all"), []).append((sa, sb))
    if len(by_stratum) > 1:
        for s in sorted(by_stratum):
            t = stats.paired_table([x[0] for x in by_stratum[s]], [x[1] for x in by_stratum[s]])
            m = stats.mcnemar(t.a_only, t.b_only)
            strata_rows.append(StratumComparison(s, t, m.mid_p, m.exact_p))
    return Comparison(
        a=a, b=b, table=table, mcnemar=mc, difference=diff, tango=stats.tango_paired(table) if n else diff,
        bonett_price=stats.bonett_price_paired(table) if n else diff, primary=primary, primary_p=p_primary,
        holm_mid_p=holm_mid, holm_primary_p=holm_primary, fisher_p=fisher, unpaired_difference=unpaired,
        floor_p=floor, evalue=ev, significant=significant, more_layouts_needed=more,
        more_layouts_note=more_note, verdict=verdict, pairing_note=pairing, strata=tuple(strata_rows))


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
            per.append((p, k, len(judged), stats.wilson(k, len(judged))))
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
        rows.append(DriftRow(p, k1, len(first), k2, len(second),
                             stats.fisher_exact(k1, len(first), k2, len(second))))
    return tuple(rows)


def _judges(data: OutcomeSet) -> JudgeSection | None:
    if not data.human_labels and not data.physics:
        return None
    judges = tuple(sorted({j.judge for j in data.human_labels}))
    if not judges:
        return None
    by_ep: dict[str, dict[str, str]] = {}
    for j in data.human_labels:
        by_ep.setdefault(j.episode_id, {})[j.judge] = j.label
    where = {o.episode_id: o for o in data.outcomes if o.episode_id}
    kappas = []
    for j1, j2 in combinations(judges, 2):
        items = [(v[j1], v[j2]) for v in by_ep.values() if j1 in v and j2 in v]
        if items:
            kappas.append(KappaRow(j1, j2, len(items), stats.cohen_kappa([x for x, _ in items], [y for _, y in items]),
                                   sum(1 for x, y in items if x == y) / len(items)))
    fleiss = None
    fleiss_items = 0
    if len(judges) >= 2:
        cats = ("success", "failure", "unsure")
        rows = [[sum(1 for j in judges if v[j] == c) for c in cats]
                for v in by_ep.values() if all(j in v for j in judges)]
        if rows:
            fleiss, fleiss_items = stats.fleiss_kappa(rows), len(rows)
    disagreements = []
    for ep, v in sorted(by_ep.items(), key=lambda kv: (where[kv[0]].slot if kv[0] in where and where[kv[0]].slot is not None else 0)):
        if len(v) >= 2 and len(set(v.values())) > 1:
            o = where.get(ep)
            disagreements.append(Disagreement(ep, o.layout if o else "?", o.repeat if o else 0,
                                              o.policy if o else "?", tuple(sorted(v.items())),
                                              data.physics.get(ep)))
    accuracy = []
    if data.physics:
        for j in judges:
            agree = compared = unsure = fs = ff = 0
            for ep, v in by_ep.items():
                if j not in v or ep not in data.physics:
                    continue
                if v[j] == "unsure":
                    unsure += 1
                    continue
                compared += 1
                said = v[j] == "success"
                truth = data.physics[ep]
                agree += said == truth
                fs += said and not truth
                ff += (not said) and truth
            accuracy.append(JudgeAccuracy(j, agree, compared, unsure, fs, ff))
    per_judge = Counter(j.judge for j in data.human_labels)
    return JudgeSection(judges, tuple(sorted(per_judge.items())), tuple(kappas), fleiss, fleiss_items,
                        tuple(disagreements), tuple(accuracy))


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
    # Holm over all pairwise comparisons (a single comparison is its own adjustment)
    raw = []
    for a, b in pairs:
        pr = data.pairs(a, b)
        t = stats.paired_table([x[1] for x in pr], [x[2] for x in pr])
        m = stats.mcnemar(t.a_only, t.b_only)
        raw.append((m.mid_p, m.exact_p))
    holm_mid = stats.holm([r[0] for r in raw])
    holm_exact = stats.holm([r[1] for r in raw])
    primary = data.primary
    comparisons = tuple(
        _compare(a, b, data, holm_mid[i], holm_exact[i] if primary == "mcnemar_exact" else holm_mid[i],
                 len(pairs))
        for i, (a, b) in enumerate(pairs))
    cochran = None
    if len(data.policies) >= 3:
        blocks = data.complete_blocks()
        if blocks:
            cochran = stats.cochran_q([[int(v) for v in vals] for _, vals in blocks])
    unpaired = tuple((k[0], k[1], why) for k, why in data.unpaired())
    warnings = list(data.warnings)
    if unpaired:
        warnings.append(f"{len(unpaired)} layout run{'s' if len(unpaired) != 1 else ''} cannot form a "
                        "complete pair (listed under 'Unpaired layouts'); they are not in the paired tables")
    done = sum(1 for o in data.outcomes if o.state == "done")
    timing = _timing(data)
    rate = f"{data.fps} Hz" if data.fps else "its control rate"
    for t in timing:
        if t.episodes_over:
            warnings.append(f"policy {t.label} could not keep {rate} in {t.episodes_over} "
                            f"episode{'s' if t.episodes_over != 1 else ''} of {t.with_timing} (more than "
                            f"{100 * OVERRUN_WARN_FRACTION:g}% of the steps overran the control period; "
                            f"{t.overrun_steps} overrun steps in all): its outcomes may reflect a slow loop")
    stopping_rule = _describe_stopping(data.stopping)
    if _evalue_rule(data.stopping):
        warnings.append("the protocol pre-registers the e-value stopping rule: the verdict uses the "
                        "anytime-valid e-value; McNemar p-values assume a fixed number of layouts and "
                        "are shown for reference only")
    if not data.complete:
        warnings.append(f"the campaign is not complete ({done} of {data.scheduled_trials} trials done): "
                        "these are interim numbers" + ("" if stopping_rule.startswith("e-value") else
                                                       " and, with no pre-registered stopping rule, "
                                                       "must not be used to decide when to stop"))
    if len(comparisons) == 1:
        headline = comparisons[0].verdict
    elif comparisons:
        lines = []
        if cochran is not None:
            lines.append(f"Cochran's Q = {cochran.q:.2f} (df {cochran.df}), p {_p_eq(cochran.p)} over "
                         f"{cochran.blocks} complete layouts.")
        lines.extend(c.verdict for c in comparisons)
        headline = " ".join(lines)
    else:
        headline = "no comparison possible"
    return Report(
        schema=SCHEMA, source=data.source, label_source=data.label_source, campaign_id=data.campaign_id,
        campaign_name=data.campaign_name, protocol_name=data.protocol_name, protocol_sha256=data.protocol_sha256,
        simulated=data.simulated, complete=data.complete, stop_reason=data.stop_reason,
        stopping_rule=stopping_rule, primary=primary, alpha=data.alpha, trials_done=done,
        trials_scheduled=data.scheduled_trials, aborted_attempts=data.aborted_attempts, policies=policies,
        comparisons=comparisons, cochran=cochran, strata=_strata(data), drift=_drift(data),
        judges=_judges(data), unpaired=unpaired, warnings=tuple(warnings), headline=headline,
        grid=_grid(data), timeline=_timeline(data), timing=timing, sessions=data.sessions,
        operator_is_judge=data.operator_is_judge, fps=data.fps)


def _describe_stopping(stopping: Any) -> str:
    if isinstance(stopping, dict) and stopping.get("kind") == "evalue":
        return f"e-value (anytime-valid), max_layouts {stopping.get('max_layouts')}"
    kind = getattr(stopping, "kind", None)
    if kind == "evalue":
        return f"e-value (anytime-valid), max_layouts {stopping.max_layouts}"
    return "none (fixed number of layouts)"


# ------------------------------------------------------------------ JSON


def _num(x: float | None) -> float | None:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return None
    return float(x)


def to_dict(r: Report) -> dict[str, Any]:
    """The JSON document (DESIGN section 4) plus additional keys."""
    out: dict[str, Any] = {
        "schema": r.schema,
        "campaign": {"id": r.campaign_id, "protocol_sha256": r.protocol_sha256, "complete": r.complete,
                     "trials": r.trials_done, "aborted": r.aborted_attempts,
                     "name": r.campaign_name, "protocol_name": r.protocol_name, "source": r.source,
                     "simulated": r.simulated, "scheduled_trials": r.trials_scheduled,
                     "stop_reason": r.stop_reason, "stopping_rule": r.stopping_rule,
                     "operator_is_judge": r.operator_is_judge, "fps": r.fps},
        "labels": r.label_source,
        "analysis": {"primary": r.primary, "alpha": r.alpha},
        "policies": {},
        "comparisons": [],
    }
    for p in r.policies:
        out["policies"][p.label] = {
            "successes": p.successes, "trials": p.trials, "rate": _num(p.rate),
            "wilson95": [p.wilson.lo, p.wilson.hi],
            "unjudged": p.unjudged, "aborted_attempts": p.aborted_attempts,
            "failure_modes": dict(p.failure_modes), "safety_events": dict(p.safety_events),
            "time_to_success_s": None if p.time_to_success is None else {
                "n": p.time_to_success.n, "median": p.time_to_success.median, "mean": p.time_to_success.mean,
                "min": p.time_to_success.lo, "max": p.time_to_success.hi},
        }
    for c in r.comparisons:
        t = c.table
        out["comparisons"].append({
            "a": c.a, "b": c.b, "pairs": t.n,
            "table": {"both": t.both, "a_only": t.a_only, "b_only": t.b_only, "neither": t.neither},
            "mcnemar": {"exact_p": c.mcnemar.exact_p, "mid_p": c.mcnemar.mid_p, "chi2": c.mcnemar.chi2,
                        "chi2_p": c.mcnemar.chi2_p, "chi2_cc": c.mcnemar.chi2_cc, "chi2_cc_p": c.mcnemar.chi2_cc_p},
            "difference": {"estimate": c.difference.estimate, "ci95": [c.difference.lo, c.difference.hi],
                           "method": "newcombe",
                           "tango95": [c.tango.lo, c.tango.hi], "bonett_price95": [c.bonett_price.lo, c.bonett_price.hi]},
            "holm_mid_p": c.holm_mid_p,
            "primary": c.primary, "primary_p": c.primary_p, "significant": c.significant,
            "unpaired": {"fisher_p": c.fisher_p, "newcombe_hybrid95": [c.unpaired_difference.lo, c.unpaired_difference.hi]},
            "discordant_floor_p": c.floor_p,
            "e_value": _num(c.evalue.e_value),
            "more_layouts_for_80pct_power": c.more_layouts_needed,
            "verdict": c.verdict,
            "strata": {s.stratum: {"both": s.table.both, "a_only": s.table.a_only, "b_only": s.table.b_only,
                                   "neither": s.table.neither, "mid_p": s.mid_p} for s in c.strata},
        })
    if r.cochran is not None:
        out["cochran_q"] = {"q": r.cochran.q, "df": r.cochran.df, "p": r.cochran.p, "blocks": r.cochran.blocks}
    out["strata"] = {s.stratum: {lab: {"successes": k, "trials": n, "wilson95": [iv.lo, iv.hi]}
                                 for lab, k, n, iv in s.per_policy} for s in r.strata}
    out["drift"] = {d.policy: {"first_half": [d.first_k, d.first_n], "second_half": [d.second_k, d.second_n],
                               "fisher_p": d.fisher_p} for d in r.drift}
    if r.judges is not None:
        j = r.judges
        out["judges"] = {
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
    # campaign-only: null for an outcomes CSV, which holds neither timing nor sessions
    out["timing"] = {t.label: {
        "episodes": t.episodes, "episodes_with_timing": t.with_timing, "steps": t.steps, "paced": t.paced,
        "period_p50_ms": _num(t.period_p50_ms), "period_p99_ms": _num(t.period_p99_ms),
        "overrun_steps": t.overrun_steps, "episodes_over_5pct_overruns": t.episodes_over,
        "policy_p50_ms": _num(t.policy_p50_ms), "policy_p99_ms": _num(t.policy_p99_ms),
        "policy_p99_max_ms": _num(t.policy_p99_max_ms),
    } for t in r.timing} if r.timing else None
    out["sessions"] = None if r.sessions is None else {
        "count": r.sessions.count, "interrupted": r.sessions.interrupted, "killed": r.sessions.killed,
        "failed": r.sessions.failed, "ended": r.sessions.ended, "running": r.sessions.running}
    out["unpaired"] = [{"layout": l, "repeat": rp, "why": why} for l, rp, why in r.unpaired]
    out["warnings"] = list(r.warnings)
    out["verdict"] = r.headline
    return out


def render_json(r: Report) -> str:
    return json.dumps(to_dict(r), indent=2, allow_nan=False) + "\n"


# ------------------------------------------------------------------ text and Markdown


def _iv(iv: stats.Interval, digits: int = 3) -> str:
    return f"[{iv.lo:.{digits}f}, {iv.hi:.{digits}f}]"


def _kn(k: int, n: int) -> str:
    return f"{k}/{n}" + (f" ({100 * k / n:.0f}%)" if n else "")


def _sections(r: Report, md: bool) -> list[str]:
    """Report body as lines; md switches tables and headings to Markdown."""
    L: list[str] = []

    def h(title: str) -> None:
        L.append("")
        if md:
            L.append(f"## {title}")
        else:
            L.append(title)
            L.append("-" * len(title))

    def table(header: list[str], rows: list[list[str]]) -> None:
        if md:
            L.append("| " + " | ".join(header) + " |")
            L.append("|" + "|".join("---" for _ in header) + "|")
            for row in rows:
                L.append("| " + " | ".join(row) + " |")
        else:
            widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
            L.append("  ".join(str(x).ljust(w) for x, w in zip(header, widths)).rstrip())
            for row in rows:
                L.append("  ".join(str(x).ljust(w) for x, w in zip(row, widths)).rstrip())

    title = f"Report: {r.protocol_name or r.campaign_name}"
    L.append(f"# {title}" if md else title)
    L.append("" if md else "=" * len(title))
    L.append(f"Verdict: {r.headline}")
    L.append("")
    L.append(f"Source: {r.source}" + (f" (campaign {r.campaign_id})" if r.campaign_id else ""))
    if r.protocol_sha256:
        L.append(f"Protocol: {r.protocol_name}, sha256 {r.protocol_sha256}")
    L.append(f"Labels: {r.label_source}")
    L.append(f"Primary test: McNemar {_test_name(r.primary)}, alpha {r.alpha:g}; stopping rule: {r.stopping_rule}")
    L.append(f"Trials: {r.trials_done} done of {r.trials_scheduled} scheduled; aborted attempts: {r.aborted_attempts}; "
             f"campaign {'complete' if r.complete else 'NOT complete'}"
             + (f"; stopped: {r.stop_reason}" if r.stop_reason else ""))
    if r.sessions is not None:
        s = r.sessions
        L.append(f"Run sessions: {s.count} ({s.interrupted} interrupted, {s.killed} killed, {s.failed} failed"
                 + (f", {s.running} still running" if s.running else "") + ")")
    if r.operator_is_judge is not None:
        L.append("Operator also a judge: " + ("yes" if r.operator_is_judge else "no"))
    if r.warnings:
        h("Warnings")
        for w in r.warnings:
            L.append(f"- {w}")

    h("Success per policy (Wilson 95%)")
    table(["policy", "successes", "95% CI", "unjudged", "aborted attempts"],
          [[p.label, _kn(p.successes, p.trials), _iv(p.wilson), str(p.unjudged), str(p.aborted_attempts)]
           for p in r.policies])

    for c in r.comparisons:
        t = c.table
        h(f"{c.a} vs {c.b}: paired over {t.n} layouts")
        table(["", f"{c.b} succeeds", f"{c.b} fails"],
              [[f"{c.a} succeeds", f"both: {t.both}", f"{c.a} only: {t.a_only}"],
               [f"{c.a} fails", f"{c.b} only: {t.b_only}", f"neither: {t.neither}"]])
        L.append("")
        L.append(f"Discordant layouts: {t.discordant} ({c.a} only {t.a_only}, {c.b} only {t.b_only}); "
                 f"smallest exact p they could give: {_fmt_p(c.floor_p)}")
        prim = _test_name(c.primary)
        L.append(f"McNemar mid-p {_fmt_p(c.mcnemar.mid_p)}{' (primary)' if c.primary == 'mcnemar_midp' else ''}, "
                 f"exact {_fmt_p(c.mcnemar.exact_p)}{' (primary)' if c.primary == 'mcnemar_exact' else ''}; "
                 f"chi2 {c.mcnemar.chi2:.2f} (p {_fmt_p(c.mcnemar.chi2_p)}), with continuity correction "
                 f"{c.mcnemar.chi2_cc:.2f} (p {_fmt_p(c.mcnemar.chi2_cc_p)})")
        if len(r.comparisons) > 1:
            L.append(f"Holm-adjusted {prim}: {_fmt_p(c.holm_primary_p)}")
        d = c.difference
        L.append(f"Difference {c.a} - {c.b}: {_pct(d.estimate)} points, 95% CI {_pct(d.lo)} to {_pct(d.hi)} "
                 f"(Newcombe); Tango {_pct(c.tango.lo)} to {_pct(c.tango.hi)}, "
                 f"Bonett-Price {_pct(c.bonett_price.lo)} to {_pct(c.bonett_price.hi)}")
        if c.pairing_note:
            L.append(c.pairing_note)
        L.append(f"Anytime-valid e-value on the discordant pairs: {c.evalue.e_value:.2f} "
                 f"(rejects at >= {c.evalue.threshold:g})")
        L.append(f"Verdict: {c.verdict}")
        if c.strata:
            L.append("")
            L.append("Per stratum:")
            table(["stratum", "pairs", "both", f"{c.a} only", f"{c.b} only", "neither", "mid-p"],
                  [[s.stratum, str(s.table.n), str(s.table.both), str(s.table.a_only), str(s.table.b_only),
                    str(s.table.neither), _fmt_p(s.mid_p)] for s in c.strata])

    if r.cochran is not None:
        h("Three or more policies")
        L.append(f"Cochran's Q = {r.cochran.q:.3f}, df {r.cochran.df}, p {_p_eq(r.cochran.p)} "
                 f"({r.cochran.blocks} layouts judged for every policy); pairwise McNemar above, Holm-adjusted.")

    if r.strata:
        h("Per stratum (Wilson 95%)")
        table(["stratum", "layouts"] + [p.label for p in r.policies],
              [[s.stratum, str(s.layouts)] + [f"{_kn(k, n)} {_iv(iv, 2)}" for _, k, n, iv in s.per_policy]
               for s in r.strata])

    h("Failure modes")
    modes = sorted({m for p in r.policies for m, _ in p.failure_modes})
    if modes:
        table(["failure mode"] + [p.label for p in r.policies],
              [[m] + [str(dict(p.failure_modes).get(m, 0)) for p in r.policies] for m in modes])
    else:
        L.append("no failures recorded")

    h("Safety events")
    events = sorted({e for p in r.policies for e, _ in p.safety_events})
    if events:
        table(["event"] + [p.label for p in r.policies],
              [[e] + [str(dict(p.safety_events).get(e, 0)) for p in r.policies] for e in events])
        L.append("episodes with any safety event: " +
                 ", ".join(f"{p.label} {p.episodes_with_safety_events}" for p in r.policies))
    else:
        L.append("none recorded")

    h("Time to success (among successes)")
    rows = []
    for p in r.policies:
        ts = p.time_to_success
        rows.append([p.label, "-" if ts is None else str(ts.n),
                     "-" if ts is None else f"{ts.median:.2f} s", "-" if ts is None else f"{ts.mean:.2f} s",
                     "-" if ts is None else f"{ts.lo:.2f}-{ts.hi:.2f} s"])
    table(["policy", "n", "median", "mean", "range"], rows)

    if r.timing:
        h("Control-loop timing" + (f" ({r.fps} Hz, {1000 / r.fps:.1f} ms period)" if r.fps else ""))

        def ms(x: float | None) -> str:
            return "-" if x is None else (f"{x:.2f} ms" if x < 10 else f"{x:.1f} ms")

        if all(t.paced for t in r.timing):
            table(["policy", "episodes with timing", "period p50", "worst period p99", "overrun steps",
                   f"episodes > {100 * OVERRUN_WARN_FRACTION:g}% overruns", "policy p50", "policy p99"],
                  [[t.label, f"{t.with_timing} of {t.episodes}", ms(t.period_p50_ms), ms(t.period_p99_ms),
                    str(t.overrun_steps), str(t.episodes_over), ms(t.policy_p50_ms), ms(t.policy_p99_ms)]
                   for t in r.timing])
            L.append("")
            L.append("period p50, policy p50 and p99: median over the episodes; worst period p99: the slowest "
                     "episode; an overrun step took more than 5% longer than the period")
        else:
            L.append("simulated: not paced in real time (no overrun figures); policy compute time per step:")
            L.append("")
            table(["policy", "episodes with timing", "policy p50", "policy p99", "worst policy p99"],
                  [[t.label, f"{t.with_timing} of {t.episodes}", ms(t.policy_p50_ms), ms(t.policy_p99_ms),
                    ms(t.policy_p99_max_ms)] for t in r.timing])
            L.append("")
            L.append("policy p50 and p99: median over the episodes; worst policy p99: the slowest episode")

    h("Aborted attempts")
    L.append(", ".join(f"{p.label}: {p.aborted_attempts}" for p in r.policies) +
             " (aborted attempts are re-run, never counted as outcomes)")

    h("Drift check (success by campaign half)")
    if r.drift:
        table(["policy", "first half", "second half", "Fisher p"],
              [[d.policy, _kn(d.first_k, d.first_n), _kn(d.second_k, d.second_n), _fmt_p(d.fisher_p)]
               for d in r.drift])
        order_rows = [p for p in r.policies if p.first_trials and p.second_trials]
        if order_rows:
            L.append("")
            L.append("Order within the pair: " + "; ".join(
                f"{p.label} first {_kn(p.first_successes, p.first_trials)}, second "
                f"{_kn(p.second_successes, p.second_trials)}" for p in order_rows))
    else:
        L.append("not enough judged trials")

    if r.judges is not None:
        j = r.judges
        h("Judges")
        L.append("Labels: " + ", ".join(f"{name} {n}" for name, n in j.labels_per_judge))
        for k in j.kappas:
            L.append(f"Cohen's kappa {k.judge_1} vs {k.judge_2}: {k.kappa:.3f} on {k.items} episodes "
                     f"(raw agreement {100 * k.agreement:.0f}%)")
        if j.fleiss is not None and len(j.judges) > 2:
            L.append(f"Fleiss' kappa over {len(j.judges)} judges: {j.fleiss:.3f} on {j.fleiss_items} episodes")
        if j.disagreements:
            L.append("Disagreements:")
            for d in j.disagreements:
                phys = "" if d.physics is None else f"; physics: {'success' if d.physics else 'failure'}"
                L.append(f"- {d.episode_id} (layout {d.layout}, policy {d.policy}): "
                         + ", ".join(f"{a} {b}" for a, b in d.labels) + phys)
        for a in j.accuracy:
            if a.compared or a.unsure:
                acc = f"{a.agree}/{a.compared} ({100 * a.agree / a.compared:.0f}%)" if a.compared else "-"
                L.append(f"Accuracy of {a.judge} vs physics: {acc}; said success when physics failed: "
                         f"{a.false_success}, failure when physics succeeded: {a.false_failure}; unsure: {a.unsure}")

    if r.unpaired:
        h("Unpaired layouts")
        for lay, rep, why in r.unpaired:
            L.append(f"- {lay}" + (f" (repeat {rep})" if rep else "") + f": {why}")
    return L


def render_text(r: Report) -> str:
    return "\n".join(_sections(r, md=False)).rstrip() + "\n"


def render_markdown(r: Report) -> str:
    return "\n".join(_sections(r, md=True)).rstrip() + "\n"


# ------------------------------------------------------------------ HTML


def _png(fig: Any) -> str:
    import base64
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _plots(r: Report) -> list[tuple[str, str]]:
    """(title, base64 PNG) for each plot. Imports matplotlib (Agg) only here."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    out: list[tuple[str, str]] = []
    # 1. intervals per policy
    fig, ax = plt.subplots(figsize=(6, 0.6 + 0.5 * len(r.policies)))
    for i, p in enumerate(r.policies):
        if p.trials:
            ax.errorbar([p.rate], [i], xerr=[[p.rate - p.wilson.lo], [p.wilson.hi - p.rate]], fmt="o",
                        capsize=4, color="C0")
            ax.text(p.wilson.hi + 0.01, i, f"{p.successes}/{p.trials}", va="center", fontsize=8)
    ax.set_yticks(range(len(r.policies)), [p.label for p in r.policies])
    ax.set_xlim(0, 1.12)
    ax.set_xlabel("success rate (Wilson 95%)")
    ax.invert_yaxis()
    out.append(("Success rate per policy", _png(fig)))
    # 2. paired tables
    for c in r.comparisons:
        t = c.table
        fig, ax = plt.subplots(figsize=(3.6, 3.0))
        m = [[t.both, t.a_only], [t.b_only, t.neither]]
        ax.imshow([[0.2, 1.0], [1.0, 0.2]], cmap="Oranges", vmin=0, vmax=1.4)
        names = [["both", f"{c.a} only"], [f"{c.b} only", "neither"]]
        for i in range(2):
            for j in range(2):
                ax.text(j, i, f"{names[i][j]}\n{m[i][j]}", ha="center", va="center", fontsize=10)
        ax.set_xticks([0, 1], [f"{c.b} succeeds", f"{c.b} fails"])
        ax.set_yticks([0, 1], [f"{c.a} succeeds", f"{c.a} fails"])
        ax.set_title(f"{c.a} vs {c.b}: {t.n} pairs", fontsize=10)
        out.append((f"Paired table {c.a} vs {c.b}", _png(fig)))
    # 3. per-layout grid
    if r.grid and r.comparisons:
        c0 = r.comparisons[0]
        colours = {"both": "#2ca02c", f"{c0.a} only": "#1f77b4", f"{c0.b} only": "#ff7f0e",
                   "neither": "#d62728", "incomplete": "#bbbbbb"}
        known = all(g[1] is not None for g in r.grid)
        fig, ax = plt.subplots(figsize=(6, 4.5))
        cats = list(colours)
        if known:
            # one circle per layout run; repeats of a mark are stacked just above it
            placed: dict[tuple, int] = {}
            xs, ys, cs, labels = [], [], [], {}
            for lab, x, y, _s, cat in r.grid:
                base = (round(x, 4), round(y, 4))
                shift = placed.get(base, 0)
                placed[base] = shift + 1
                if shift >= 12:
                    continue
                xs.append(y)
                ys.append(x + 0.006 * shift)   # robot view: y across, x away from the base
                cs.append(colours.get(cat, "#999999"))
                labels.setdefault(base, (y, x, lab.split("#")[0]))
            ax.scatter(xs, ys, s=260 if len(placed) <= 60 else 60, c=cs, edgecolors="black", linewidths=0.5)
            if len(placed) <= 60:
                for px, py, text in labels.values():
                    ax.text(px, py, text, ha="center", va="center", fontsize=6)
            ax.set_xlabel("y (m, robot's left is +)")
            ax.set_ylabel("x (m, away from the base)")
            ax.invert_xaxis()
        else:
            count = len(r.grid)
            cols = max(1, math.ceil(math.sqrt(count)))
            if count <= 400:
                px = [i % cols for i in range(count)]
                py = [-(i // cols) for i in range(count)]
                ax.scatter(px, py, s=260 if count <= 100 else 40, c=[colours.get(g[4], "#999999") for g in r.grid],
                           edgecolors="black", linewidths=0.5)
                if count <= 100:
                    for i, g in enumerate(r.grid):
                        ax.text(px[i], py[i], g[0].split("#")[0], ha="center", va="center", fontsize=6)
            else:
                from matplotlib.colors import ListedColormap

                rows = math.ceil(count / cols)
                codes = [[len(cats)] * cols for _ in range(rows)]
                for i, g in enumerate(r.grid):
                    codes[i // cols][i % cols] = cats.index(g[4]) if g[4] in cats else len(cats)
                ax.imshow(codes, cmap=ListedColormap(list(colours.values()) + ["#ffffff"]),
                          vmin=-0.5, vmax=len(cats) + 0.5, interpolation="nearest")
            ax.set_axis_off()
            ax.set_title("positions unknown (CSV input): layouts in order", fontsize=9)
        for cat, col in colours.items():
            ax.scatter([], [], color=col, label=cat, s=60)
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
        out.append((f"Per layout: which policy succeeded ({c0.a} vs {c0.b})", _png(fig)))
    # 4. success over time
    if any(seq for _, seq in r.timeline):
        fig, ax = plt.subplots(figsize=(6, 3))
        for i, (p, seq) in enumerate(r.timeline):
            if not seq:
                continue
            cum = [v / (k + 1) for k, v in enumerate(accumulate(int(x) for x in seq))]
            ax.plot(range(1, len(seq) + 1), cum, label=p, color=f"C{i}")
            ax.scatter(range(1, len(seq) + 1), [1.03 + 0.03 * i if s else -0.03 - 0.03 * i for s in seq],
                       s=8, color=f"C{i}")
        ax.set_ylim(-0.15, 1.15)
        ax.set_xlabel("trial of this policy, in run order")
        ax.set_ylabel("cumulative success rate")
        ax.legend(fontsize=8)
        out.append(("Success over time", _png(fig)))
    return out


def render_html(r: Report) -> str:
    body = _html.escape(render_markdown(r))
    plots = "\n".join(f'<figure><img alt="{_html.escape(t)}" src="data:image/png;base64,{b}">'
                      f"<figcaption>{_html.escape(t)}</figcaption></figure>" for t, b in _plots(r))
    title = _html.escape(f"Report: {r.protocol_name or r.campaign_name}")
    verdict = _html.escape(r.headline)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 980px; margin: 2em auto; padding: 0 1em; color: #222; }}
.verdict {{ font-size: 1.15em; padding: .8em 1em; background: #f3f6fa; border-left: 4px solid #1f77b4; }}
pre {{ white-space: pre-wrap; font-size: .85em; background: #fafafa; padding: 1em; border: 1px solid #eee; }}
figure {{ display: inline-block; margin: .5em; vertical-align: top; }}
figcaption {{ font-size: .85em; color: #555; }}
</style></head><body>
<h1>{title}</h1>
<p class="verdict">{verdict}</p>
<section>{plots}</section>
<pre>{body}</pre>
</body></html>
"""


RENDERERS = {"text": render_text, "md": render_markdown, "json": render_json, "html": render_html}


def render(r: Report, fmt: str) -> str:
    try:
        return RENDERERS[fmt](r)
    except KeyError:
        raise ValueError(f"unknown format {fmt!r}") from None
