"""Trial bookkeeping shared by the sequential runner (`sequential.py`), the parallel one
(`parallel.py`) and the stations (`stations.py`): the run summary, the progress line, the
referees asked between units and after each episode, what a policy may know about a trial, and
committing a finished episode (with the overrun warning).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from orchestrator.core.progress import ProgressBar
from orchestrator.design.protocol import LoadedProtocol
from orchestrator.design.schedule import Trial
from orchestrator.policies.base import EpisodeContext
from orchestrator.rigs.base import EmergencyStop
from orchestrator.rigs.device_fault import ALARM_CHECK, RESET_CHECK, DeviceFault
from orchestrator.run.campaign import OpenedCampaign
from orchestrator.store.abort_answers import UNANSWERED_CLASS
from orchestrator.store.sqlite import INTERRUPTED_CLASS, SETTLES_EXCLUDED, SETTLES_FAILURE, CampaignStore, EpisodeRecord

# The recorded reason of an attempt a Ctrl-C or SIGTERM cut short (the runner and the parallel pool).
INTERRUPTED_BY_USER = "interrupted by the user (Ctrl-C)"
# ... of a real arm's episode (or the twin's), where a person may have meant it as an emergency stop
INTERRUPTED_UNANSWERED = "interrupted during the episode (Ctrl-C, SIGTERM or SIGHUP): no reason given"
OVERRUN_WARN_FRACTION = 0.05  # warn when more than 5 % of an episode's steps overran the period


# Servo alarms that the policy's own commands cause (driving into the table, the cube, a joint
# stop); the others (supply voltage, angle sensor, overheating) are the rig's.
POLICY_ALARMS = ("overload", "overcurrent")
SETTLED_SAY = {None: "it will be re-run",
               SETTLES_FAILURE: "counted as a failure of the policy that ran (the protocol's `aborts` rules)",
               SETTLES_EXCLUDED: "its re-run limit (`aborts.max_reruns`) is reached: it is left out and "
                                 "listed in the report"}
OPERATOR_CAUSES = {"unsafe": "operator_unsafe", "misplaced": "operator_misplaced", "other": "operator_other",
                   "unanswered": UNANSWERED_CLASS}


def abort_class(cause: BaseException, overload: str = "policy") -> str:
    """The class of an aborted attempt's cause (the protocol's `aborts` rules say what each
    class counts as): `interrupted` (Ctrl-C, SIGTERM), `operator_unsafe` / `operator_misplaced` /
    `operator_other` / `operator_unanswered` (an emergency stop, by the reason the operator
    chose at the prompt, its `cause`, `unanswered` when the question got no answer; a redo is
    `operator_other`), `policy` (a `DeviceFault` of kind `policy`: the policy raised or returned
    a non-finite action), `overload` (the protocol's `aborts.overload`: `policy` or `rig`) for a
    servo overload/overcurrent alarm during the episode (the arm may have hit something under
    the policy's commands), `rig` (every other fault: USB, camera, servo reset, power, or an
    error of unknown origin)."""
    if isinstance(cause, KeyboardInterrupt):
        return INTERRUPTED_CLASS
    if isinstance(cause, EmergencyStop):
        return OPERATOR_CAUSES.get(cause.cause or "other", "operator_other")
    if isinstance(cause, DeviceFault) and cause.kind == "policy":
        return "policy"
    return overload if is_policy_alarm(cause) else "rig"


def is_policy_alarm(cause: BaseException) -> bool:
    """Whether `cause` is (or was raised from) a servo overload or overcurrent alarm."""
    chain: BaseException | None = cause
    while chain is not None:
        if type(chain).__name__ == "ServoAlarm" and any(a in str(chain) for a in POLICY_ALARMS):
            return True
        chain = chain.__cause__ or chain.__context__
    return (isinstance(cause, DeviceFault) and any(a in cause.cause for a in POLICY_ALARMS)
            and "servo alarm" in cause.cause)


def is_servo_fault(cause: BaseException) -> bool:
    """Whether `cause` is a servo alarm or a servo reset (`DeviceFault.servo`): the arm cannot
    move again until its power is cycled (an alarm stays set; a reset servo lost its torque)."""
    return isinstance(cause, DeviceFault) and cause.check in (ALARM_CHECK, RESET_CHECK)


def settle_interrupt(store: CampaignStore, attempt: int, trial: Trial, loaded: LoadedProtocol, summary: RunSummary,
                     person_at_the_arm: bool) -> str | None:
    """Record an episode a Ctrl-C, SIGTERM or SIGHUP cut short. With a person at the arm (a real
    arm, the twin) it may have been an emergency stop whose reason nobody gave: class
    `operator_unanswered`, settled by the protocol's rule for it (the next session asks why);
    else (a simulation) class `interrupted`, re-run (within `aborts.max_interruptions`)."""
    if person_at_the_arm:
        return settle_abort(store, attempt, trial, INTERRUPTED_UNANSWERED, UNANSWERED_CLASS, loaded, summary)
    store.abort_attempt(attempt, INTERRUPTED_BY_USER, INTERRUPTED_CLASS)
    return None


def leave_out_interrupted(store: CampaignStore, loaded: LoadedProtocol, say: Callable[[str], None]) -> None:
    """The protocol's `aborts.max_interruptions`: a trial interrupted more often than that (a
    simulated run's Ctrl-C, a killed process, a station whose claim ran out) is left out, its
    last interruption settling it as `excluded` (listed in the report, as past `max_reruns`)."""
    limit = loaded.protocol.aborts.max_interruptions
    for trial in store.trials():
        if trial.state == "aborted" and store.interruptions(trial.slot) > limit:
            store.exclude_interrupted(trial.slot, limit)
            say(f"trial {trial.slot + 1}: interrupted more than {limit} times (aborts.max_interruptions); "
                "it is left out and listed in the report")


def settle_abort(store: CampaignStore, attempt: int, trial: Trial, reason: str, cause_class: str,
                 loaded: LoadedProtocol, summary: RunSummary) -> str | None:
    """Record an aborted attempt with its class and what the protocol's `aborts` rules make of
    it: `failure` (the trial is scored as its policy's failure and done), `excluded` (a re-run
    class past `max_reruns`: done, left out of the pairs, listed in the report) or None (it is
    re-run). Counted in `summary` (a settled trial is done)."""
    rules = loaded.protocol.aborts
    settles = None
    if cause_class != INTERRUPTED_CLASS:
        if getattr(rules, cause_class, "rerun") == "failure":
            settles = SETTLES_FAILURE
        elif store.reruns(trial.slot) >= rules.max_reruns:
            settles = SETTLES_EXCLUDED
    store.abort_attempt(attempt, reason, cause_class, settles)
    summary.aborted_now += 1
    if settles is not None:
        summary.done_now += 1
        summary.done_total += 1
        summary.settled[settles] = summary.settled.get(settles, 0) + 1
    return settles


@dataclass
class RunSummary:
    done_now: int = 0
    aborted_now: int = 0
    total: int = 0
    done_total: int = 0
    stopped_early: str | None = None
    slow_episodes: int = 0     # episodes whose loop could not keep the protocol's rate
    settled: dict[str, int] = field(default_factory=dict)  # aborts that settled a trial: failure / excluded

    @property
    def complete(self) -> bool:
        return self.done_total == self.total or self.stopped_early is not None


class Progress(ProgressBar):
    """The runners' progress: a bar with ETA on a terminal, else `trial k/N  mark M07  elapsed 1:23
    ETA 4:56` lines (no policy label, ever)."""

    def __init__(self, total: int, done_before: int, say: Callable[[str], None], console: Any = None):
        super().__init__(total, done_before, "trial", say, console)

    def update(self, mark_id: str) -> None:
        self.step(f"mark {mark_id}")


@dataclass(frozen=True)
class Referees:
    """What the runners ask of later stages, handed to them by the command that runs them
    (`commands/referees.py`), so that running a campaign imports neither the statistics nor the
    automatic rater. `stop_rule(store, protocol)` evaluates the pre-registered stopping rule on the
    outcomes so far and returns a reason to stop or None; `rate_episode(timeseries_path, cube_size_m,
    success, mark, simulated=...)` is the automatic rater's (label, reason, progress ladder) of a recorded episode
    (stored as judge `auto`), or None.
    Both must be module-level functions: the parallel runner sends `rate_episode` to its workers."""

    stop_rule: Callable[[CampaignStore, LoadedProtocol], str | None] | None = None
    rate_episode: Callable[..., Any] | None = None


NO_REFEREES = Referees()


def stop_decision(opened: OpenedCampaign, referees: Referees) -> str | None:
    """The pre-registered stopping rule, evaluated on outcomes so far; a reason or None."""
    if isinstance(opened.protocol.protocol.analysis.stopping, str) or referees.stop_rule is None:
        return None
    return referees.stop_rule(opened.store, opened.protocol)


def stopped_early(opened: OpenedCampaign, referees: Referees, summary: RunSummary, say: Callable[[str], None]) -> bool:
    """The stopping rule's decision at a layout's first trial: when it stops, the campaign is
    marked finished with the reason, which the summary keeps and the operator is told."""
    reason = stop_decision(opened, referees)
    if not reason:
        return False
    opened.store.mark_finished(reason)
    summary.stopped_early = reason
    say(f"stopping: {reason}")
    return True


def episode_context(loaded: LoadedProtocol, trial: Trial) -> EpisodeContext:
    """What the policy may know about a trial: its mark, the cube, its stored seed, the timing."""
    return EpisodeContext(mark=loaded.layout.mark(trial.mark_id), cube=loaded.layout.cube,
                          seed=trial.seed, fps=loaded.protocol.episode.fps,
                          duration_s=loaded.protocol.episode.duration_s, task=loaded.protocol.task)


def episode_record(episode_id: str, context: EpisodeContext, cameras, recorded, facts, timing,
                   success=None, rate_episode: Callable[..., Any] | None = None) -> EpisodeRecord:
    """What `finish_attempt` commits; with the protocol's `success` test and a `rate_episode`
    referee, the automatic rater's label and progress ladder (from the recorded joints) go in the
    same transaction, as does the simulator's ladder (`facts.ladder`). The referee is told whether
    the episode ran in the simulated scene (physics judged it), whose wrist camera it can measure."""
    auto, auto_ladder = None, None
    if (rate_episode is not None and success is not None and "timeseries" in recorded.files
            and recorded.root is not None):
        label, reason, auto_ladder = rate_episode(recorded.root / recorded.files["timeseries"], context.cube.size_m,
                                                  success, context.mark,
                                                  simulated=facts.physics_success is not None)
        auto = (label, reason)
    return EpisodeRecord(
        # frames: the planned count (what a judge's view shows: the same for every episode);
        # the steps that ran and those lost are in `timing`, which judges never see
        episode_id=episode_id, frames=round(context.fps * context.duration_s), duration_s=context.duration_s,
        cameras=list(cameras), files=recorded.files, digests=recorded.digests,
        physics_success=facts.physics_success,
        max_lift_m=facts.max_lift_m, time_to_success_s=facts.time_to_success_s, longest_hold_s=facts.longest_hold_s,
        safety_events=tuple(facts.safety_events),
        timing={**timing.as_dict(), "video_frames": recorded.video_frames}, auto=auto, auto_ladder=auto_ladder,
        physics_ladder=facts.ladder)


def commit_episode(store: CampaignStore, attempt: int, trial: Trial, record: EpisodeRecord, fps: int,
                   summary: RunSummary) -> None:
    """Commit a finished episode (one transaction) and count it; an episode whose loop overran
    the control period on more than OVERRUN_WARN_FRACTION of its steps is logged and counted
    as slow (never said per trial: which episode was slow could hint at which policy ran)."""
    store.finish_attempt(attempt, record)
    summary.done_now += 1
    summary.done_total += 1
    timing = record.timing or {}
    steps, overruns = int(timing.get("steps") or 0), int(timing.get("overruns") or 0)
    if steps and overruns > OVERRUN_WARN_FRACTION * steps:
        summary.slow_episodes += 1
        store.log_event("overrun", f"{overruns} of {steps} steps overran the {fps} Hz period "
                        f"(p99 {float(timing.get('period_p99_ms') or 0):.1f} ms)", slot=trial.slot)
