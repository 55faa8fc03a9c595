"""The report's `start_check` and `interventions` sections: where the cube stood at each trial's
start as the camera measured it (`run/start_state.py`), per policy, and how often a person had
to act.

Placement error. For each attempt a start check admitted (`analysis.start_records`): the offset
of the cube's centre from the mark's, sqrt(dx^2 + dy^2) in mm, and |dyaw| in degrees (reduced
by the cube's symmetry). Per policy: the count, the median and the 95th percentile (numpy's
linear interpolation), and how many started on a failed check (advise mode, or the operator's
override).

Whether placement differs between policies: the offsets of every pair of policies are compared
with the two-sided Mann-Whitney U test (Mann & Whitney 1947; `stats.mann_whitney`), and the
p-values are Holm-adjusted over the pairs (Holm 1979). Under the randomised, interleaved
schedule the person placing the cube does not know which policy runs next (`blinding`), so
under a fair placement the offsets of the policies are one distribution; a difference is a
warning (the placement favoured a policy), not a verdict on the policies.

Agreement with the judges: on the attempts whose start was both checked and judged, the check's
verdict (refused or passed) against the judges' invalid-start marks (a judge sent the trial
back), as a 2x2 table, the share that agree and Cohen's kappa with its interval
(`stats.binary_agreement`; kappa is undefined, null, when both are constant).

Interventions (`analysis.start_records.INTERVENTION_CAUSES`): the total, by cause, and per 100
trials done (100 * total / trials done), with the exact Poisson 95 % interval of that rate
(`stats.poisson_per_100`, Garwood 1936): 2 in 80 trials is 2.5 per 100, 0.3 to 9.0.

Trials, not attempts: "N trials of C started on a failed start check" counts the trials (a trial
re-run after an abort has several attempts, each checked), and gives the attempts beside it.
With `reset: auto` the arm places each trial's cube after the previous episode, which may have
been the other policy's: a placement difference between A and B can then come from where the
other policy's episodes left the cube, not only from the placing; the warning says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from orchestrator.analysis import stats
from orchestrator.analysis.outcomes import OutcomeSet
from orchestrator.analysis.report.format import p_eq
from orchestrator.analysis.start_records import intervention_line, per_100_trials

AUTO_RESET_NOTE = ("; with reset: auto the arm placed each trial's cube after the previous episode, which may "
                   "have been the other policy's, so the difference can come from where the other policy's "
                   "episodes left the cube, not only from the placing")


@dataclass(frozen=True)
class PlacementRow:
    policy: str
    checked: int                   # attempts a start check admitted
    measured: int                  # ... with a cube measured
    offset_p50_mm: float | None
    offset_p95_mm: float | None
    yaw_p50_deg: float | None      # |dyaw|
    yaw_p95_deg: float | None
    started_failing: int           # attempts started on a failed check (advise, or an override)
    overridden: int
    trials_started_failing: int = 0    # trials (distinct slots) with such an attempt


@dataclass(frozen=True)
class PlacementTest:
    a: str
    b: str
    mann_whitney_p: float
    holm_p: float


@dataclass(frozen=True)
class StartCheckSection:
    rows: tuple[PlacementRow, ...]
    tests: tuple[PlacementTest, ...]
    judged: int                    # checked attempts a judge saw (they have an episode and labels)
    table: dict[str, int]          # "refused_invalid", "refused_valid", "passed_invalid", "passed_valid"
    agreement: float | None
    kappa: float | None
    kappa_ci95: tuple[float | None, float | None]
    alpha: float
    warnings: tuple[str, ...]
    kappa_ci_coverage: float | None = None    # the kappa interval's lowest measured coverage when below 0.93


@dataclass(frozen=True)
class InterventionSection:
    total: int
    per_100_trials: float | None   # None: no trial done
    by_cause: tuple[tuple[str, int], ...]
    trials: int
    per_100_ci95: tuple[float, float] | None = None   # exact Poisson (Garwood) interval of the rate


def _quantile(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 2) if values else None


def _finite(value: float) -> float | None:
    return None if value is None or not math.isfinite(value) else round(float(value), 4)


def build_start_check(data: OutcomeSet) -> StartCheckSection | None:
    """The section for a campaign whose starts were checked (None otherwise)."""
    records = data.start_records
    if not records:
        return None
    policy_of = {o.slot: o.policy for o in data.outcomes}
    rows = []
    offsets: dict[str, list[float]] = {}
    for p in data.policies:
        mine = [r for r in records if policy_of.get(r.slot) == p]
        off = [r.offset_mm for r in mine if r.offset_mm is not None]
        yaw = [abs(r.dyaw_deg) for r in mine if r.dyaw_deg is not None]
        offsets[p] = off
        rows.append(PlacementRow(
            policy=p, checked=len(mine), measured=len(off), offset_p50_mm=_quantile(off, 50),
            offset_p95_mm=_quantile(off, 95), yaw_p50_deg=_quantile(yaw, 50), yaw_p95_deg=_quantile(yaw, 95),
            started_failing=sum(1 for r in mine if not r.passes), overridden=sum(1 for r in mine if r.overridden),
            trials_started_failing=len({r.slot for r in mine if not r.passes})))
    pairs = list(combinations(data.policies, 2))
    raw = [stats.mann_whitney(offsets[a], offsets[b]) for a, b in pairs]
    adjusted = stats.holm(raw) if raw else []
    tests = tuple(PlacementTest(a, b, p, h) for (a, b), p, h in zip(pairs, raw, adjusted, strict=True))
    judged_episodes = {j.episode_id for j in data.human_labels}
    seen = [r for r in records if r.judged_invalid or r.episode_id in judged_episodes]
    agreement = stats.binary_agreement([not r.passes for r in seen], [r.judged_invalid for r in seen])
    t = agreement["table"]
    table = {"refused_invalid": t["success_success"], "refused_valid": t["success_failure"],
             "passed_invalid": t["failure_success"], "passed_valid": t["failure_failure"]}
    low, high = agreement["kappa_ci95"]
    warnings = [f"placement error differs between {x.a} and {x.b} (Mann-Whitney p {p_eq(x.mann_whitney_p)}, "
                f"Holm-adjusted {p_eq(x.holm_p)}): the cubes were placed differently for the two policies"
                + (AUTO_RESET_NOTE if data.reset_mode == "auto" else "")
                for x in tests if x.holm_p <= data.alpha]
    for r in rows:
        if r.started_failing:
            n = r.trials_started_failing
            warnings.append(f"{n} trial{'s' if n != 1 else ''} of {r.policy} started on a failed start check "
                            f"({r.started_failing} attempt{'s' if r.started_failing != 1 else ''}, "
                            f"{r.overridden} by the operator's override)")
    return StartCheckSection(rows=tuple(rows), tests=tests, judged=len(seen), table=table,
                             agreement=_finite(agreement["agreement"]), kappa=_finite(agreement["kappa"]),
                             kappa_ci95=(_finite(low), _finite(high)), alpha=data.alpha, warnings=tuple(warnings),
                             kappa_ci_coverage=agreement["kappa_ci_coverage"])


def build_interventions(data: OutcomeSet) -> InterventionSection | None:
    """The section for a campaign (None for an outcomes CSV, which records no operator)."""
    if data.interventions is None:
        return None
    done = sum(1 for o in data.outcomes if o.state == "done")
    total = sum(data.interventions.values())
    iv = stats.poisson_per_100(total, done) if done else None
    return InterventionSection(total=total, per_100_trials=per_100_trials(total, done),
                               by_cause=tuple(data.interventions.items()), trials=done,
                               per_100_ci95=None if iv is None else (iv.lo, iv.hi))


def describe_interventions(section: InterventionSection) -> str:
    return intervention_line(dict(section.by_cause), section.trials, section.per_100_ci95)
