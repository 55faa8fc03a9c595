"""The report's timing section: per policy, the control loop's periods and overruns, the policy's
latency and the camera frames' age (`model.PolicyTiming`), and the warning when a policy lost
steps more often than another (docs/statistics.md)."""

from __future__ import annotations

import statistics
from collections import Counter
from itertools import combinations

from orchestrator.analysis import stats
from orchestrator.analysis.outcomes import OutcomeSet
from orchestrator.analysis.report.format import p_eq
from orchestrator.analysis.report.model import (
    OVERRUN_WARN_FRACTION,
    PolicyTiming,
    TimeSummary,
)


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def time_summary(values: list[float]) -> TimeSummary | None:
    if not values:
        return None
    return TimeSummary(len(values), statistics.median(values), sum(values) / len(values), min(values), max(values))


def policy_timing(data: OutcomeSet) -> tuple[PolicyTiming, ...]:
    """Per-policy control-loop timing; () when the source is not a campaign (an outcomes CSV)."""
    if not data.campaign_id:
        return ()
    paced = data.wall_clock
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
            policy_p99_max_ms=max((t.policy_p99_ms for t in ts), default=None),
            lost_steps=sum(t.lost_steps for t in ts) if paced else None,
            episodes_lost=sum(1 for t in ts if t.lost_steps) if paced else None,
            inference_p50_ms=_median([t.inference_p50_ms for t in ts if t.inference_p50_ms is not None]),
            inference_p99_ms=_median([t.inference_p99_ms for t in ts if t.inference_p99_ms is not None]),
            **_frame_rows(ts)))
    return tuple(rows)


def _frame_rows(ts: list) -> dict:
    """Camera frame age and repeats over a policy's episodes (those whose rig reports them)."""
    with_frames = [t.frames for t in ts if len(t.frames) == 3]
    if not with_frames:
        return {}
    return {"frame_age_p50_ms": _median([f["frame_age_p50_ms"] for f in with_frames]),
            "frame_age_p95_ms": max(f["frame_age_p95_ms"] for f in with_frames),
            "frame_repeat_fraction": sum(f["frame_repeat_fraction"] for f in with_frames) / len(with_frames)}


def lost_step_warnings(timing: tuple[PolicyTiming, ...], alpha: float) -> list[str]:
    """Episodes that lost steps, compared between policies (Fisher's exact test, Holm over the
    pairs): a policy whose episodes lose steps more often had less control in the same time."""
    rows = [t for t in timing if t.paced and t.with_timing]
    pairs = list(combinations(rows, 2))
    if not any(t.episodes_lost for t in rows) or not pairs:
        return []
    lost = {t.label: t.episodes_lost or 0 for t in rows}   # paced rows: never None
    raw = [stats.fisher_exact(lost[x.label], x.with_timing, lost[y.label], y.with_timing) for x, y in pairs]
    out = []
    for (x, y), p in zip(pairs, stats.holm(raw), strict=True):
        if p <= alpha:
            out.append(f"episodes lost control steps more often with {x.label if lost[x.label] / x.with_timing > lost[y.label] / y.with_timing else y.label}: "
                       f"{x.label} {x.episodes_lost}/{x.with_timing}, {y.label} {y.episodes_lost}/{y.with_timing} "
                       f"episodes (Fisher exact p {p_eq(p)}, Holm): every episode lasts the protocol's duration, so "
                       "the slower policy acted fewer times in it")
    return out
