"""The frozen campaign report: every number the renderers show, computed once by `build.py`.

Field meanings follow docs/design.md section 13 (the report JSON); the renderers only format what these objects hold.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from orchestrator.analysis import stats
from orchestrator.analysis.sessions import SessionCounts

SCHEMA = "orchestrator.report/1"
# An episode "could not keep the rate" when more than this fraction of its steps overran the
# control period: the same threshold as the runner's warning (trials.OVERRUN_WARN_FRACTION).
OVERRUN_WARN_FRACTION = 0.05


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
    ci: stats.Interval | None = None  # the interval shown: Wilson, or clustered over marks with repeats
    deployment: str = ""              # how the policy ran: sync, rtc (horizon N), server host:port

    @property
    def interval(self) -> stats.Interval:
        return self.ci if self.ci is not None else self.wilson

    @property
    def rate(self) -> float | None:
        return self.successes / self.trials if self.trials else None


@dataclass(frozen=True)
class PolicyTiming:
    """Control-loop timing of one policy's episodes (milliseconds).

    paced is False for a campaign on the simulated rig: its steps are not paced in real time, so
    the periods are compute time and overruns are not measured (None). A real arm and the twin
    are paced in wall-clock time (`OutcomeSet.wall_clock`): the twin shows what the arm will."""

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
    lost_steps: int | None = None     # planned steps not run, total (None when not paced)
    episodes_lost: int | None = None  # episodes that lost at least one step (None when not paced)
    inference_p50_ms: float | None = None   # median over episodes of an asynchronous policy's chunk latency
    inference_p99_ms: float | None = None
    frame_age_p50_ms: float | None = None       # median over episodes of the frames' age p50
    frame_age_p95_ms: float | None = None       # worst episode's frame age p95
    frame_repeat_fraction: float | None = None  # mean over episodes of the repeated-frame share


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
    floor_p: float                    # smallest exact p reachable with these discordant pairs (pooled)
    evalue: stats.EValueResult
    significant: bool
    more_layouts_needed: int | None   # for 80 % power at the observed cells (None: cannot say)
    more_layouts_note: str
    verdict: str
    pairing_note: str
    strata: tuple[StratumComparison, ...]
    # the unit of analysis, the mark-level analysis with repeats, the anytime-valid
    # confidence sequence after optional stopping, one-line notes beside the verdict
    unit: str = "layout"                                   # layout | mark
    clustered: stats.ClusteredResult | None = None         # the deciding test when unit == mark
    marks: tuple[tuple[str, stats.PairedTable], ...] = ()  # per-mark counts (shown when unit == mark)
    sequence: stats.Interval | None = None                 # CS for the difference (e-value rule)
    notes: tuple[str, ...] = ()
    holm_exact_p: float = float("nan")
    share: stats.Interval | None = None   # e-value rule: A's share of the rule's discordant units (CS)
    deciding_floor_p: float | None = None  # the smallest exact p the deciding test could give
    # e-value rule: the largest e-value the rule's discordant units could give (all on one side)
    deciding_max_e: float | None = None
    # e-value rule: the pairs on the units the rule counts (`report/decision.py`), and their number
    rule_table: stats.PairedTable | None = None
    rule_units: int | None = None

    @property
    def pairs(self) -> int:
        return self.table.n


@dataclass(frozen=True)
class StratumRow:
    stratum: str
    layouts: int
    per_policy: tuple[tuple[str, int, int, stats.Interval], ...]    # label, k, n, interval (clustered with repeats)


@dataclass(frozen=True)
class DriftRow:
    policy: str
    first_k: int
    first_n: int
    second_k: int
    second_n: int
    fisher_p: float                   # nan when withheld (marks with repeats)


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
    raters: tuple[Any, ...] = ()                    # raters.RaterAgreement rows
    arm_still: tuple[tuple[str, str, str], ...] = ()   # episode, layout, policy: the arm never moved
    unit: str = "layout"              # the unit of analysis: layout, or mark when marks have repeats
    test: str = ""                    # the deciding test and interval, as the header names them
    notes: tuple[str, ...] = ()       # report-level notes (e.g. Cochran's Q beside a pairwise "better")
    stations: Any = None    # report/stations.StationSection for a campaign run by several arms
    aborts: Any = None      # report/aborts.AbortSection for a campaign (None for an outcomes CSV)
    withheld: tuple[tuple[str, str], ...] = ()   # (statistic, why) not computed, e.g. with repeats
    evidence: Any = None    # store.chain.ChainStatus: the campaign's evidence chain (None: a CSV)
    start_check: Any = None     # report/start_state.StartCheckSection (None: starts not checked)
    interventions: Any = None   # report/start_state.InterventionSection (None: an outcomes CSV)
    rig_kind: str = ""          # store.records.campaign_rig_kind: simulated, twin, real_arm ("": a CSV)
    corrected: Any = None       # report/corrected.CorrectedSection (None: no audit)
    funnel: Any = None          # report/funnel.FunnelSection: the progress ladder (None: none recorded)
