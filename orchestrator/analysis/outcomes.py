"""Trial outcomes: the common input of reports and of the stopping rule.

Two sources give the same `OutcomeSet`:

- `analysis.outcomes_csv.load_outcomes_csv(path)` reads the Outcomes CSV (`report --outcomes`).
- `outcomes_from_store(store, judge)` reads a campaign: whose labels count is a judge's name,
  `physics`, or `consensus` (default: majority of the human judges, ties -> unsure; when no
  human has judged a simulated campaign, the physics test).

Pairs are formed on (layout, repeat). A layout whose policies are not all present (or whose
success is unknown) cannot form a pair: it is listed in `OutcomeSet.unpaired`, never hidden.

A campaign also gives what a CSV cannot: each episode's control-loop timing
(`TrialOutcome.timing`), the `orchestrator run` sessions (`OutcomeSet.sessions`) and whether
the operator was also a judge; for a CSV these stay None.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from orchestrator.analysis.ladders import progress_ladders
from orchestrator.analysis.sessions import SessionCounts, session_counts
from orchestrator.core.errors import BadInput
from orchestrator.design.audit import AuditSample
from orchestrator.design.protocol import deployment_label
from orchestrator.rigs.profile import campaign_rig_kind
from orchestrator.store.records import RIG_TWIN
from orchestrator.store.sqlite import AUTO_JUDGE, PHYSICS_JUDGE, CampaignStore, Judgment

CONSENSUS = "consensus"
ABORT_RULE = "aborts rule"     # who decided an outcome the protocol's `aborts` rules scored
UNRECORDED = "unrecorded"      # the cause of an abort whose row has none (written without one)


def _inference_latency(inference: Any) -> dict[str, float]:
    """The chunk latency an asynchronous policy stored with its episode's timing (`inference`)."""
    if not isinstance(inference, dict):
        return {}
    out = {}
    for key in ("p50", "p99"):
        value = inference.get(f"latency_{key}_ms")
        if isinstance(value, (int, float)) and math.isfinite(value):
            out[f"inference_{key}_ms"] = float(value)
    return out


@dataclass(frozen=True)
class LoopTiming:
    """One episode's control-loop timing as stored by the runner (milliseconds).

    overruns = steps whose period exceeded the control period by more than 5 % (always 0 for
    a simulated rig, whose steps are not paced in real time)."""

    period_p50_ms: float
    period_p99_ms: float
    overruns: int
    policy_p50_ms: float
    policy_p99_ms: float
    steps: int
    lost_steps: int = 0               # planned steps the episode did not run (real rigs end on time)
    inference_p50_ms: float | None = None   # an RTC thread's or a policy server's chunk latency
    inference_p99_ms: float | None = None
    frames: dict[str, float] = field(default_factory=dict)  # frame_age_p50_ms, _p95_ms, frame_repeat_fraction

    @classmethod
    def from_dict(cls, timing: Any) -> LoopTiming | None:
        """From an episode's stored `timing` JSON; None when absent or not understood."""
        if not isinstance(timing, dict):
            return None
        try:
            out = cls(period_p50_ms=float(timing["period_p50_ms"]), period_p99_ms=float(timing["period_p99_ms"]),
                      overruns=int(timing["overruns"]), policy_p50_ms=float(timing["policy_p50_ms"]),
                      policy_p99_ms=float(timing["policy_p99_ms"]), steps=int(timing["steps"]),
                      lost_steps=int(timing.get("lost_steps") or 0),
                      frames={k: float(v) for k in ("frame_age_p50_ms", "frame_age_p95_ms", "frame_repeat_fraction")
                              if isinstance(v := timing.get(k), (int, float))},
                      **_inference_latency(timing.get("inference")))
        except (KeyError, TypeError, ValueError, OverflowError):
            return None
        values = (out.period_p50_ms, out.period_p99_ms, out.policy_p50_ms, out.policy_p99_ms)
        if not all(math.isfinite(v) for v in values) or out.steps <= 0 or out.overruns < 0:
            return None
        return out


@dataclass(frozen=True)
class TrialOutcome:
    """One trial's outcome as the report sees it.

    success is True/False, or None when nobody has judged it (or the judges were unsure, or
    the trial has not run). slot is the run order (None for a CSV without order: its row
    order is used); position is the place within the pair (0 = went first)."""

    layout: str
    repeat: int
    policy: str
    success: bool | None
    stratum: str | None = None
    judge: str | None = None
    failure_mode: str | None = None
    slot: int | None = None
    unit: int | None = None
    position: int | None = None
    episode_id: str | None = None
    state: str = "done"
    time_to_success_s: float | None = None
    safety_events: tuple[str, ...] = ()
    aborted_attempts: int = 0
    line: int | None = None           # CSV line number, for messages
    timing: LoopTiming | None = None  # the episode's control-loop timing (campaigns only)
    disputed: bool = False            # the human judges disagree on it (no majority either way)
    abort_classes: tuple[str, ...] = ()   # the class of each aborted attempt, in order
    abort_causes: tuple[str, ...] = ()    # ... and its cause within the class (store.abort_causes)
    abort_answers: tuple[str | None, ...] = ()   # ... and the operator's later answer (store.abort_answers)
    settled: str | None = None        # `failure` / `excluded`: an abort settled the trial (no episode)

    @property
    def key(self) -> tuple[str, int]:
        return (self.layout, self.repeat)


@dataclass(frozen=True)
class JudgeLabel:
    episode_id: str
    judge: str
    label: str                        # success | failure | unsure
    failure_mode: str | None = None


@dataclass(frozen=True)
class OutcomeSet:
    """Everything the report needs, statistics-free."""

    outcomes: tuple[TrialOutcome, ...]
    policies: tuple[str, ...]
    source: str                                   # CSV path or campaign directory
    label_source: str                             # judge name, physics, consensus(...), csv
    campaign_id: str = ""
    campaign_name: str = ""
    protocol_name: str = ""
    protocol_sha256: str = ""
    simulated: bool = False
    rig_kind: str = ""                            # records.campaign_rig_kind ("" for an outcomes CSV)
    complete: bool = True
    stop_reason: str | None = None
    primary: str = "mcnemar_midp"
    alpha: float = 0.05
    stopping: Any = "none"                        # "none" or {"kind": "evalue", "max_layouts": N}
    marks: dict[str, tuple[float, float, str]] = field(default_factory=dict)   # id -> (x, y, stratum)
    human_labels: tuple[JudgeLabel, ...] = ()     # every human judge's current label
    physics: dict[str, bool] = field(default_factory=dict)                      # episode -> success
    warnings: tuple[str, ...] = ()
    aborted_attempts: int = 0
    scheduled_trials: int = 0
    sessions: SessionCounts | None = None         # None: the source has no sessions (CSV)
    operator_is_judge: bool | None = None         # None: unknown (CSV)
    fps: int | None = None                        # the protocol's control rate
    deployments: dict[str, str] = field(default_factory=dict)   # policy -> how it runs (`deployment_label`)
    auto_labels: dict[str, str] = field(default_factory=dict)   # episode -> the `auto` rater's label
    arm_still: tuple[str, ...] = ()               # episodes in which the arm never moved
    ladders: dict[str, dict[str, Any]] = field(default_factory=dict)   # analysis.ladders.progress_ladders

    @property
    def wall_clock(self) -> bool:
        """Whether the episodes were paced in wall-clock time (a real arm, the twin), so their
        overruns and lost steps are measured; the simulated rig steps in simulated time."""
        return not self.simulated or self.rig_kind == RIG_TWIN
    station_blocks: tuple[dict[str, Any], ...] = ()   # unit, station, state, claimed_at, finished_at
    abort_rules: dict[str, Any] | None = None     # the protocol's `aborts` (None: a CSV)
    disagreement: str = "unsure"                  # the protocol's judging.disagreement rule
    evidence: Any = None                          # store.chain.ChainStatus of a campaign (None: a CSV)
    start_records: tuple[Any, ...] = ()           # start_records.StartRecord per checked attempt
    interventions: dict[str, int] | None = None   # by cause (start_records; None: a CSV)
    reset_mode: str = "operator"                  # the protocol's reset.mode (auto: the arm places the cube)
    audit: AuditSample | None = None              # the store's audit sample (None: no audit, or a CSV)

    # ---------------------------------------------------------------- views

    @cached_property
    def _by_key(self) -> dict[tuple[str, int], dict[str, TrialOutcome]]:
        out: dict[tuple[str, int], dict[str, TrialOutcome]] = defaultdict(dict)
        for o in self.outcomes:
            out[o.key][o.policy] = o
        return dict(out)

    def by_key(self) -> dict[tuple[str, int], dict[str, TrialOutcome]]:
        """{(layout, repeat): {policy: outcome}} (computed once; do not mutate)."""
        return self._by_key

    @cached_property
    def _pairs_cache(self) -> dict[tuple[str, str], list]:
        return {}

    def pairs(self, a: str, b: str) -> list[tuple[tuple[str, int], bool, bool]]:
        """(key, a_success, b_success) for every (layout, repeat) where both are known, in run order."""
        cached = self._pairs_cache.get((a, b))
        if cached is None:
            cached = self._pairs_cache[(a, b)] = self._pairs(a, b)
        return list(cached)

    def _pairs(self, a: str, b: str) -> list[tuple[tuple[str, int], bool, bool]]:
        rows = []
        for key, per in self.by_key().items():
            oa, ob = per.get(a), per.get(b)
            if oa is None or ob is None or oa.success is None or ob.success is None:
                continue
            order = min((o.slot if o.slot is not None else (o.line or 0)) for o in (oa, ob))
            rows.append((order, key, oa.success, ob.success))
        rows.sort(key=lambda r: (r[0], r[1]))
        return [(key, sa, sb) for _, key, sa, sb in rows]

    def complete_blocks(self) -> list[tuple[tuple[str, int], tuple[bool, ...]]]:
        """(key, successes in `policies` order) for every (layout, repeat) judged for all policies."""
        out = []
        for key, per in sorted(self.by_key().items(), key=lambda kv: _order_of(kv[1].values())):
            vals = [per.get(p) for p in self.policies]
            if any(v is None or v.success is None for v in vals):
                continue
            out.append((key, tuple(bool(v.success) for v in vals)))  # type: ignore[union-attr]
        return out

    def unpaired(self) -> list[tuple[tuple[str, int], str]]:
        """(key, why) for every (layout, repeat) that cannot form a full block."""
        out = []
        for key, per in sorted(self.by_key().items(), key=lambda kv: _order_of(kv[1].values())):
            missing = [p for p in self.policies if p not in per]
            not_run = [p for p in self.policies if p in per and per[p].state != "done"]
            unknown = [p for p in self.policies
                       if p in per and per[p].state == "done" and per[p].success is None]
            why = []
            if missing:
                why.append("no row for " + ", ".join(missing))
            if not_run:
                why.append("not run yet: " + ", ".join(not_run))
            excluded = [p for p in unknown if per[p].settled == "excluded"]
            unknown = [p for p in unknown if p not in excluded]
            if excluded:
                why.append("left out at the re-run limit (aborts.max_reruns): " + ", ".join(
                    f"{p} ({len(per[p].abort_classes)} aborts: {', '.join(sorted(set(per[p].abort_classes)))})"
                    for p in excluded))
            if unknown:
                why.append("unjudged or unsure: " + ", ".join(unknown))
            if why:
                out.append((key, "; ".join(why)))
        return out

    def judged(self, policy: str) -> list[TrialOutcome]:
        return [o for o in self.outcomes if o.policy == policy and o.success is not None]


def _order_of(outcomes: Iterable[TrialOutcome]) -> tuple:
    best = None
    for o in outcomes:
        v = o.slot if o.slot is not None else (o.line or 0)
        best = v if best is None else min(best, v)
    return (best if best is not None else 0,)


# ---------------------------------------------------------------- campaign store


def consensus_label(labels: Sequence[str]) -> str:
    """Majority of the human judges who labelled an episode: `success` or `failure` needs more
    than half of their labels (unsure counts in the total); otherwise, ties included, `unsure`."""
    if not labels:
        return "unsure"
    counts = Counter(labels)
    for label in ("success", "failure"):
        if counts[label] * 2 > len(labels):
            return label
    return "unsure"


@dataclass(frozen=True)
class _Labels:
    """Whose labels count: `mode` physics | judge | consensus, and the votes it uses."""

    mode: str
    source: str                                   # human-readable
    requested: str
    voters: list[str]                             # the consensus's judges (humans, + auto if counted)
    latest: dict[str, dict[str, Judgment]]        # voter -> episode -> latest label
    physics: dict[str, bool]


def _choose_labels(store: CampaignStore, judge: str | None, auto_counted: bool, simulated: bool,
                   warnings: list[str]) -> _Labels:
    all_judges = store.judges()
    voters = [j for j in all_judges if j not in (PHYSICS_JUDGE, AUTO_JUDGE)]
    # `auto` votes in the consensus only when the protocol pre-registered it (judging.auto: counted)
    if AUTO_JUDGE in all_judges and auto_counted:
        voters.append(AUTO_JUDGE)
    latest = {h: store.latest_labels(h) for h in voters}
    physics = {ep: j.label == "success" for ep, j in store.latest_labels(PHYSICS_JUDGE).items()
               if j.label in ("success", "failure")}
    for rec in store.episodes():
        if rec["id"] not in physics and rec.get("physics_success") is not None:
            physics[rec["id"]] = bool(rec["physics_success"])
    requested = judge or CONSENSUS
    if requested == CONSENSUS:
        if voters:
            people = [v for v in voters if v != AUTO_JUDGE]
            source = (f"consensus of {len(people)} human judge{'s' if len(people) != 1 else ''} "
                      f"({', '.join(people) or 'none has judged yet'})")
            if AUTO_JUDGE in voters:
                source += " and the auto rater (judging.auto: counted; abstains where unsure)"
            mode = CONSENSUS
        elif simulated:
            mode, source = "physics", "physics (simulated campaign, no human judge yet)"
        else:
            mode, source = CONSENSUS, "consensus of human judges (none has judged yet)"
            warnings.append("nobody has judged this campaign yet: every outcome is unknown; run "
                            "`orchestrator judge CAMPAIGN --judge NAME`")
    elif requested == PHYSICS_JUDGE:
        mode, source = "physics", "physics"
        if not physics:
            warnings.append("this campaign has no physics labels (hardware campaigns have none)")
    else:
        if requested not in all_judges:
            known = ", ".join(all_judges) or "none"
            raise BadInput(f"{store.directory}: judge {requested!r} has no labels in this campaign "
                           f"(judges with labels: {known}; or use physics / consensus)")
        mode, source = "judge", requested
        latest.setdefault(requested, store.latest_labels(requested))
    return _Labels(mode, source, requested, voters, latest, physics)


def _votes(labels: _Labels, episode_id: str) -> list[Judgment]:
    """The consensus's votes on one episode: each voter's latest label. The `auto` rater's
    `unsure` is no vote: it abstains and leaves the episode to people (judging/auto/rater.py),
    whereas a person's `unsure` is a judgement and counts in the total (`consensus_label`)."""
    return [labels.latest[h][episode_id] for h in labels.voters if episode_id in labels.latest[h]
            and not (h == AUTO_JUDGE and labels.latest[h][episode_id].label == "unsure")]


def _disputed(labels: _Labels, episode_id: str) -> bool:
    """The consensus's judges labelled it both success and failure, with no majority."""
    if labels.mode != CONSENSUS:
        return False
    votes = [v.label for v in _votes(labels, episode_id)]
    return "success" in votes and "failure" in votes and consensus_label(votes) == "unsure"


def _label_of(labels: _Labels, episode_id: str) -> tuple[bool | None, str | None, str]:
    """(success or None, failure mode, who decided) for one done episode."""
    if labels.mode == "physics":
        return labels.physics.get(episode_id), None, PHYSICS_JUDGE
    if labels.mode == "judge":
        lab = labels.latest[labels.requested].get(episode_id)
        if lab is None or lab.label == "unsure":
            return None, None, labels.requested
        success = lab.label == "success"
        return success, (lab.failure_mode if not success else None), labels.requested
    votes = _votes(labels, episode_id)
    verdict = consensus_label([v.label for v in votes])
    if verdict == "unsure":
        return None, None, CONSENSUS
    if verdict == "success":
        return True, None, CONSENSUS
    modes = Counter(v.failure_mode for v in votes if v.label == "failure" and v.failure_mode)
    return False, (sorted(modes.items(), key=lambda kv: (-kv[1], kv[0]))[0][0] if modes else None), CONSENSUS


def _trial_outcome(t: Any, rec: dict[str, Any] | None, aborts: list[dict[str, Any]], labels: _Labels,
                   disagreement: str, marks: dict[str, tuple[float, float, str]]) -> TrialOutcome:
    """One scheduled trial's outcome: its episode's label under `labels` (judges that disagree
    are a failure when the protocol pre-registered `disagreement: failure`), or the failure an
    `aborts` rule scored it as, or unknown."""
    success, failure_mode, who = None, None, None
    settled = next((a for a in aborts if a.get("settles")), None)
    disputed = False
    if t.state == "done" and rec is not None:
        success, failure_mode, who = _label_of(labels, rec["id"])
        disputed = _disputed(labels, rec["id"])
        if disputed and disagreement == "failure":
            success, failure_mode = False, "judges disagree"   # pre-registered
    elif t.state == "done" and settled is not None and settled["settles"] == "failure":
        # the protocol's `aborts` rule scored the aborted trial as its policy's failure
        success, failure_mode, who = False, f"aborted ({settled.get('abort_class')})", ABORT_RULE
    mark = marks.get(t.mark_id)
    return TrialOutcome(
        layout=t.mark_id, repeat=t.repeat, policy=t.policy, success=success,
        stratum=mark[2] if mark else None, judge=who, failure_mode=failure_mode,
        slot=t.slot, unit=t.unit, position=t.position, episode_id=t.episode_id, state=t.state,
        time_to_success_s=(rec.get("time_to_success_s") if rec else None),
        safety_events=tuple(rec.get("safety_events") or ()) if rec else (),
        aborted_attempts=len(aborts), timing=LoopTiming.from_dict(rec.get("timing")) if rec else None,
        disputed=disputed, abort_classes=tuple(a.get("abort_class") or "unclassified" for a in aborts),
        abort_causes=tuple(a.get("abort_cause") or UNRECORDED for a in aborts),
        abort_answers=tuple(a.get("operator_answer") for a in aborts),
        settled=settled["settles"] if settled is not None and t.state == "done" else None)


def outcomes_from_store(store: CampaignStore, judge: str | None = None) -> OutcomeSet:
    """Outcomes of a campaign under the chosen labels, read through the frozen protocol.

    judge: a human judge's name, `physics`, `auto`, `consensus` or None (the default: consensus
    of the human judges, with `auto` only if the protocol says `judging: {auto: counted}`; when
    no human has judged and the campaign is simulated, physics)."""
    from orchestrator.analysis.start_records import intervention_counts, start_records
    from orchestrator.judging.auto.labels import still_episodes

    camp = store.campaign()
    frozen = store.frozen_protocol()
    protocol = frozen.protocol
    trials = store.trials()
    episodes = {e["id"]: e for e in store.episodes()}
    aborts_of: dict[int, list[dict[str, Any]]] = defaultdict(list)
    attempts, events = store.attempts(), store.events()
    for a in attempts:
        if a.get("status") == "aborted":
            aborts_of[a["slot"]].append(a)
    simulated = bool(camp.get("simulated"))
    warnings: list[str] = []
    labels = _choose_labels(store, judge, protocol.judging.auto == "counted", simulated, warnings)
    human_labels = [JudgeLabel(ep, h, j.label, j.failure_mode) for h in labels.voters
                    for ep, j in labels.latest[h].items()]
    marks = {m.id: (float(m.x), float(m.y), m.stratum) for m in frozen.layout.marks}
    outcomes = [_trial_outcome(t, episodes.get(t.episode_id) if t.episode_id else None, aborts_of.get(t.slot, []),
                               labels, protocol.judging.disagreement, marks) for t in trials]
    unjudged = sum(1 for o in outcomes if o.state == "done" and o.episode_id in episodes and o.success is None)
    done = sum(1 for t in trials if t.state == "done")
    if unjudged and not (labels.mode == CONSENSUS and not labels.voters and not simulated):
        warnings.append(f"{unjudged} of {done} episodes have no usable label under {labels.source} "
                        "(unjudged or unsure); they are left out of the pairs")
    return OutcomeSet(
        outcomes=tuple(outcomes), policies=tuple(protocol.policies), source=str(store.directory),
        label_source=labels.source, campaign_id=str(camp.get("id", "")), campaign_name=str(camp.get("name", "")),
        protocol_name=protocol.name, protocol_sha256=str(camp.get("protocol_sha256", "")), simulated=simulated,
        rig_kind=campaign_rig_kind(camp),
        complete=done == len(trials) or bool(camp.get("finished_at")), stop_reason=camp.get("stop_reason"),
        primary=protocol.analysis.primary, alpha=float(protocol.analysis.alpha), stopping=protocol.analysis.stopping,
        marks=marks, human_labels=tuple(human_labels), physics=labels.physics, warnings=tuple(warnings),
        aborted_attempts=sum(len(v) for v in aborts_of.values()), scheduled_trials=len(trials),
        sessions=session_counts(store.sessions()), operator_is_judge=protocol.judging.operator_is_judge,
        fps=protocol.episode.fps, deployments={k: deployment_label(v) for k, v in protocol.policies.items()},
        auto_labels={ep: j.label for ep, j in store.latest_labels(AUTO_JUDGE).items()},
        arm_still=still_episodes(store.directory, episodes.values()), ladders=progress_ladders(store),
        station_blocks=tuple(store.station_blocks()) if hasattr(store, "station_blocks") else (),
        abort_rules=protocol.aborts.model_dump(), disagreement=protocol.judging.disagreement,
        evidence=getattr(store, "evidence", None), start_records=start_records(events, attempts),
        interventions=intervention_counts(events, attempts), reset_mode=protocol.reset.mode,
        audit=store.audit_sample())
