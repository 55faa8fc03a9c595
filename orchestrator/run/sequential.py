"""The trial loop, independent of hardware: rig + policies + recorder + store.

For each trial still to run, in schedule order: tell the operator which mark (never which
policy), prepare the layout, run the policy for the fixed episode length while recording,
then commit the episode in one transaction and return the arm to rest. A trial that fails
(device fault, policy error, emergency stop, Ctrl-C) is aborted with its cause and the cause's
class (`bookkeeping.abort_class`), its files are deleted, and the protocol's `aborts` rules say
what it counts as: a failure of the policy that ran (by default a policy error and an unsafe
motion stopped by the operator; the session goes on), or a re-run (on the next `orchestrator
run`, at most `aborts.max_reruns` times); the schedule is never re-drawn.

Simulated rigs run episodes in worker processes (`parallel.py`); episode outcomes depend only
on the trial's stored seed, so they equal those of an uninterrupted sequential run.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from contextlib import contextmanager, suppress

from orchestrator.core.disk import size_text, space_problem
from orchestrator.core.errors import BadInput, Interrupted, RuntimeFailure
from orchestrator.core.progress import say_flushed, terminal_for
from orchestrator.design.schedule import Trial
from orchestrator.policies.base import Policy
from orchestrator.rigs.base import EmergencyStop
from orchestrator.rigs.device_fault import DeviceFault
from orchestrator.run.abort_questions import POWER_CYCLE, after_servo_alarm, ask_open_questions
from orchestrator.run.bookkeeping import (
    NO_REFEREES,
    SETTLED_SAY,
    Progress,
    Referees,
    RunSummary,
    abort_class,
    commit_episode,
    episode_context,
    episode_record,
    is_policy_alarm,
    is_servo_fault,
    leave_out_interrupted,
    settle_abort,
    settle_interrupt,
    stopped_early,
)
from orchestrator.run.campaign import OpenedCampaign
from orchestrator.run.control_loop import run_episode
from orchestrator.run.first_motion import first_motion_allowed
from orchestrator.run.interrupts import deferred_interrupts
from orchestrator.run.motion import ArmMotion
from orchestrator.run.operator_protocol import UNANSWERED, AutoOperator, Operator, StopRequested, TrialCue
from orchestrator.run.recording import EpisodeRecorder, check_disk, episode_bytes_estimate
from orchestrator.run.reset import CubeReset
from orchestrator.run.reset_stop import put_cube, put_down_held
from orchestrator.run.start_state import StartGate
from orchestrator.store.sqlite import SETTLES_FAILURE, new_episode_id

MAX_ATTEMPTS_PER_SESSION = 3


def _sigterm_as_interrupt(signum, frame):
    """SIGTERM is handled as Ctrl-C is at that moment: by the SIGINT handler in place (the
    `--no-console` operator's handler only sets a flag while the arm is under control, so the
    interrupt lands between two control steps, never inside a serial transaction), else as
    KeyboardInterrupt."""
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler):
        handler(signum, frame)
        return
    raise KeyboardInterrupt


@contextmanager
def run_session(store, label: str = ""):
    """One row of the store's `sessions` table around a run: SIGTERM becomes KeyboardInterrupt
    (on the main thread only: under the operator console the runner is on a worker thread and
    the console owns signals), and how the run ended (`ended`, `interrupted`, `failed: why`,
    followed by `label`) is recorded even when the store itself is what failed."""
    on_main_thread = threading.current_thread() is threading.main_thread()
    # SIGHUP (the operator's terminal or SSH session went away) is a SIGTERM: the arm made safe,
    # the stop recorded; left at its default it would kill the process mid-episode
    previous = {sig: signal.signal(sig, _sigterm_as_interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)
                } if on_main_thread else {}
    # A process started with SIGINT ignored (a background job of a script, nohup, a test runner's
    # worker) inherits that, and Python then installs no KeyboardInterrupt handler: Ctrl-C or
    # `kill -INT` would be ignored while the arm moves. For a run an interrupt is a stop, always.
    ignored = on_main_thread and signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    if ignored:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    session = store.begin_session()
    outcome = "failed"
    try:
        yield
        outcome = "ended"
    except (Interrupted, KeyboardInterrupt):
        outcome = "interrupted"
        raise
    except BaseException as exc:
        outcome = f"failed: {exc}"[:500]
        raise
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            store.end_session(session, outcome + label)
        except Exception:
            pass  # the store may be the thing that failed (disk full); the error is already on its way


class _Redo(EmergencyStop):
    """The operator asked to redo a completed episode (its reason is already recorded)."""


def run_campaign(opened: OpenedCampaign, operator: Operator | None = None, workers: int = 1,
                 say: Callable[[str], None] = say_flushed, stop_after: int | None = None,
                 referees: Referees = NO_REFEREES) -> RunSummary:
    """Run every pending trial of an opened campaign. Raises `Interrupted` on Ctrl-C/SIGTERM.
    `referees` (the stopping rule, the automatic rater) come from the command that runs it."""
    store, loaded = opened.store, opened.protocol
    operator = operator or AutoOperator(say)
    leave_out_interrupted(store, loaded, say)
    trials = store.trials()
    pending = [t for t in trials if t.state != "done"]
    summary = RunSummary(total=len(trials), done_total=len(trials) - len(pending))
    for slot, _ in opened.recovered:
        say(f"trial {slot + 1}: its last attempt did not complete (process stopped or files damaged); it will be re-run")
    finished = store.campaign()["stop_reason"]
    if finished and finished != "complete":
        summary.stopped_early = finished
    if not pending or summary.stopped_early:
        say("campaign is complete" + (f" ({summary.stopped_early})" if summary.stopped_early else ""))
        return summary
    episode = loaded.protocol.episode
    cameras = opened.rig.profile.cameras
    per_episode = episode_bytes_estimate(cameras, episode.duration_s)
    check_disk(store.directory, per_episode, "the next episode")
    if space_problem(store.directory, per_episode * len(pending), "the remaining episodes"):
        say(f"warning: free disk space may not hold all {len(pending)} remaining episodes "
            f"(about {size_text(per_episode * len(pending))}); the run will stop cleanly before the disk fills")
    with run_session(store):
        if not _questions_answered(store, operator, say):   # before anything is loaded, connected or moved
            return summary
        # the start check and the reset run between the trials of one rig: one episode at a time
        if opened.rig.profile.simulated and workers > 1 and loaded.protocol.start_check.mode == "off":
            from orchestrator.run.parallel import run_parallel

            run_parallel(opened, pending, workers, summary, say, stop_after, referees)
        else:
            _run_sequential(opened, pending, operator, summary, say, stop_after, referees=referees)
    if summary.slow_episodes:
        # Not per trial: which episode was slow could hint at which policy ran.
        say(f"warning: {summary.slow_episodes} episode(s) could not keep the {episode.fps} Hz control "
            "rate (policy or device too slow); per-episode timing is in the report")
    summary.done_total = sum(1 for t in store.trials() if t.state == "done")
    if summary.done_total == summary.total and not summary.stopped_early:
        store.mark_finished("complete")
    return summary


def _attempt(opened: OpenedCampaign, motion: ArmMotion, policy, trial: Trial, context, cue: TrialCue,
             operator: Operator, summary: RunSummary, referees: Referees) -> str | None:
    """One attempt at a trial: record the episode and commit it; None when done, the reason when an
    emergency stop (or a redo) aborted it. Every way out of the episode goes through the one stop
    path (`ArmMotion.stop`: hold, or release; nothing moves until the operator confirms), then
    the abort is recorded with its class (`settle_abort`): Ctrl-C/SIGTERM raise `Interrupted` (the
    arm never moves again this session), faults raise `RuntimeFailure`, the stop key returns its
    reason. A second Ctrl-C during the stop and the record waits until they are done."""
    rig = motion.rig
    store, loaded = opened.store, opened.protocol
    cameras = opened.rig.profile.cameras
    episode_id = new_episode_id()
    attempt = store.begin_attempt(trial.slot, episode_id)
    recorder = EpisodeRecorder(store.directory, episode_id, cameras, context.fps,
                               round(context.fps * context.duration_s), realtime=rig.realtime,
                               camera_poses=rig.camera_poses())
    try:
        if rig.realtime:   # the start state as the operator left it (judges' audit)
            recorder.still(rig.observe(with_images=True))
        operator.episode_started(cue)
        facts, timing = run_episode(rig, policy, context, recorder, operator)
        redo = operator.episode_ended(cue, None)
        if redo:
            raise _Redo(f"redo requested by operator: {redo}")
        recorded = recorder.finish()
        record = episode_record(episode_id, context, cameras, recorded, facts, timing, loaded.protocol.success,
                                referees.rate_episode)
        commit_episode(store, attempt, trial, record, context.fps, summary)
        return None
    except KeyboardInterrupt:
        with deferred_interrupts():   # a second Ctrl-C waits until the arm is safe and the abort recorded
            motion.stop(interrupted=True)
            recorder.discard()
            settled = settle_interrupt(store, attempt, trial, loaded, summary, person_at_the_arm=rig.realtime)
        raise Interrupted(f"interrupted: arm made safe, the running trial: {SETTLED_SAY[settled]}"
                          + ("; the next run asks why it was stopped" if rig.realtime else "")
                          + "; run the same command again to resume") from None
    except EmergencyStop as stop:
        if not isinstance(stop, _Redo):
            motion.stop()  # hold (or release); nothing moves until the operator confirms
        recorder.discard()
        unanswered = None if isinstance(stop, _Redo) else _ask_why(operator, cue, stop)
        settled = settle_abort(store, attempt, trial, stop.reason, abort_class(stop), loaded, summary)
        if isinstance(unanswered, KeyboardInterrupt):
            motion.interrupted = True
            raise Interrupted(f"interrupted at the stop's question: the trial: {SETTLED_SAY[settled]}; the next "
                              "run asks why it was stopped; run the same command again to resume") from None
        if settled:
            operator.message(f"trial aborted ({stop.reason}): {SETTLED_SAY[settled]}")
            return None
        return stop.reason
    except Exception as exc:
        _fault_ended(exc, motion, recorder, attempt, trial, opened, summary, operator)
        return None


def _ask_why(operator: Operator, cue: TrialCue, stop: EmergencyStop) -> BaseException | None:
    """The operator says why they stopped (into `stop.reason`, `.cause`). A question cut short
    (Ctrl-C, SIGTERM, SIGHUP, stdin or the console closed) leaves the stop unanswered (class
    `operator_unanswered`, asked again at the next session); what cut it short is returned."""
    try:
        operator.episode_ended(cue, stop.reason)
    except (KeyboardInterrupt, StopRequested) as exc:
        stop.cause = UNANSWERED
        return exc
    return None


def _fault_ended(exc: Exception, motion: ArmMotion, recorder: EpisodeRecorder, attempt: int, trial: Trial,
                 opened: OpenedCampaign, summary: RunSummary, operator: Operator) -> None:
    """An attempt a fault ended (a device, the policy): the one stop path, the episode discarded,
    the abort recorded and settled by the protocol's `aborts` rules. Returns when the rule
    counts a policy's fault as its failure (the rig is fine: the session goes on); else raises
    `RuntimeFailure` (the arm holds until the operator confirms; the campaign is resumable)."""
    with deferred_interrupts():
        motion.stop()  # held (or released) until the operator confirms the move to rest
        recorder.discard()
        cause = f"{type(exc).__name__}: {exc}"
        cause_class = abort_class(exc, opened.protocol.protocol.aborts.overload)
        settled = settle_abort(opened.store, attempt, trial, cause, cause_class, opened.protocol, summary)
    if is_servo_fault(exc):   # the arm cannot move again this session: no "move it to rest"
        _servo_fault_ended(exc, motion, attempt, trial, opened, settled, operator)
    if settled == SETTLES_FAILURE and cause_class == "policy":  # the rig is fine: go on
        operator.message(f"trial aborted: {cause}; {SETTLED_SAY[settled]}")
        return
    hint = getattr(exc, "hint", None)
    operator.message(f"trial aborted: {cause}" + (f"; {hint}" if hint else "")
                     + "; the arm holds until you confirm")
    raise RuntimeFailure(
        f"trial {trial.slot + 1} (mark {trial.mark_id}) aborted: {cause}"
        + (f"; {hint}" if hint else "")
        + "; the arm was made safe and the campaign is resumable: fix the cause and run again") from exc


def _servo_fault_ended(exc: Exception, motion: ArmMotion, attempt: int, trial: Trial, opened: OpenedCampaign,
                       settled: str | None, operator: Operator) -> None:
    """After a servo alarm or reset: the operator supports the arm and answers what happened
    (`abort_questions.after_servo_alarm`), torque goes off where the arm is (the session ends
    without a move: `motion.ended`), and the run ends saying to power-cycle the arm."""
    motion.ended = True
    operator.message(f"trial aborted: {type(exc).__name__}: {exc}; {SETTLED_SAY[settled]}")
    try:
        after_servo_alarm(opened.store, attempt, str(exc), is_policy_alarm(exc), operator)
    except StopRequested:
        pass
    except KeyboardInterrupt:
        motion.interrupted = True
        raise
    raise RuntimeFailure(f"trial {trial.slot + 1} (mark {trial.mark_id}) aborted: {type(exc).__name__}: {exc} "
                         f"({SETTLED_SAY[settled]}); torque is off: {POWER_CYCLE}") from exc


def _run_sequential(opened: OpenedCampaign, pending: list[Trial], operator: Operator,
                    summary: RunSummary, say: Callable[[str], None], stop_after: int | None,
                    refill: Callable[[], list[Trial]] | None = None, referees: Referees = NO_REFEREES) -> None:
    """Run `pending` in order on one rig; with `refill` (a station, stations.py), ask it for the
    next block's trials whenever the queue runs dry, until it returns none."""
    from orchestrator.rigs.factory import make_rig

    store, loaded = opened.store, opened.protocol
    cameras = opened.rig.profile.cameras
    rig = make_rig(opened.rig, loaded)
    motion = ArmMotion(rig, operator, record=store.log_event, cube_size_m=loaded.layout.cube.size_m)
    policies: dict[str, Policy] = {}
    progress = None
    connected = False
    try:
        labels = dict.fromkeys(t.policy for t in pending) if refill is None else loaded.protocol.policies
        _load_and_connect(rig, loaded, labels, policies, opened.rig.allowed)
        connected = True
        if not (first_motion_allowed(motion, store.sessions(), say) and _rest_or_end(motion, say)):
            return
        gate = StartGate(loaded, rig, store, operator, say)
        gate.begin_session()
        reset = CubeReset(loaded, rig, gate, motion, store, say)
        if not _resets_allowed(reset, rig, operator, store, say):
            return
        progress = Progress(summary.total, summary.done_total, say, terminal_for(say))
        queue = list(pending)
        tries: dict[int, int] = {}
        index = 0
        while queue or (refill is not None and (queue := refill())):
            trial = queue.pop(0)
            if stop_after is not None and summary.done_now >= stop_after:
                return
            if trial.position == 0 and stopped_early(opened, referees, summary, say):
                return
            check_disk(store.directory, episode_bytes_estimate(cameras, loaded.protocol.episode.duration_s),
                       "the next episode")
            index += 1
            context = episode_context(loaded, trial)
            cue = TrialCue(index=index, total=index + len(queue), done_before=summary.done_total,
                           campaign_total=summary.total, mark=context.mark, duration_s=context.duration_s)
            if not _set_up(trial, context, cue, operator, gate, reset, say):
                return
            stopped = _attempt(opened, motion, policies[trial.policy], trial, context, cue, operator, summary, referees)
            if stopped is not None:
                _rerun_later(trial, stopped, tries, queue, operator)
            else:
                progress.update(trial.mark_id)
            if not _rest_or_end(motion, say, None if stopped else _put_down(reset, loaded, queue, context, operator, trial)):
                return
    except (KeyboardInterrupt, Interrupted):
        motion.interrupted = True   # Ctrl-C / SIGTERM anywhere: a stop, never a move to rest
        raise
    finally:
        _close_session(progress, policies, motion, connected)


def _close_session(progress: Progress | None, policies: dict, motion: ArmMotion, connected: bool) -> None:
    """The end of a session however it ends: the policies closed, then the arm to rest and torque
    off (`ArmMotion.leave`); an arm that never connected (a refusal, a fault at connect) is only
    closed, with nothing said about moving it."""
    if progress is not None:
        progress.close()
    for policy in policies.values():
        try:
            policy.close()
        except Exception:
            pass
    if connected:
        motion.leave()  # to rest (stoppable; not after an unconfirmed stop), then torque off
    else:
        with deferred_interrupts():
            motion.rig.disconnect()


def _questions_answered(store, operator: Operator, say: Callable[[str], None], asks=None) -> bool:
    """The questions earlier aborts left (a stop's reason, an overload's look), asked before
    the arm is connected (with `asks`: those it accepts, a station's own); False: the operator
    ended the session instead (stdin or console closed)."""
    try:
        ask_open_questions(store, operator, say, asks)
    except StopRequested:
        say("stopped by the operator before anything moved; run again to resume")
        return False
    return True


def _load_and_connect(rig, loaded, labels, policies: dict, allowed: frozenset[str] = frozenset()) -> None:
    """Policies first, hardware last (as LeRobot does): a checkpoint that does not match the rig
    is refused before the arm's torque is ever enabled, and on a real arm (or its twin) each
    LeRobot policy is checked against it as `doctor` checks it (`preflight.policy_refusals`,
    overridden by the session's `allowed` flags). `policies` is filled as each loads, so the
    caller closes those already made whatever fails next."""
    from orchestrator.policies.factory import make_policy
    from orchestrator.policies.lerobot import LeRobotPolicy

    for label in labels:
        policies[label] = make_policy(label, loaded.protocol.policies[label], loaded, rig)
    if rig.realtime and (problems := rig.preflight()):
        raise BadInput(problems)
    fitting = [p for p in policies.values() if isinstance(p, LeRobotPolicy)]
    if rig.realtime and fitting:
        from orchestrator.run.preflight import episode_start_pose, policy_refusals

        start = episode_start_pose(rig)
        if problems := [line for p in fitting for line in policy_refusals(p, rig, allowed, start)]:
            raise BadInput(problems)
    rig.connect()
    if not rig.realtime and (problems := rig.preflight()):  # the simulator checks its scene
        raise BadInput(problems)


def _rerun_later(trial: Trial, stopped: str, tries: dict[int, int], queue: list[Trial], operator: Operator) -> None:
    """An aborted trial goes back in the queue, up to `MAX_ATTEMPTS_PER_SESSION` tries a session."""
    tries[trial.slot] = tries.get(trial.slot, 0) + 1
    again = tries[trial.slot] < MAX_ATTEMPTS_PER_SESSION
    if again:
        queue.append(trial)  # re-run later in this session
    operator.message(f"trial aborted ({stopped}); it will be re-run "
                     + ("later in this session" if again else
                        f"by the next `orchestrator run` (aborted {MAX_ATTEMPTS_PER_SESSION} times in this one)"))


def _set_up(trial: Trial, context, cue: TrialCue, operator: Operator, gate: StartGate, reset: CubeReset,
            say: Callable[[str], None]) -> bool:
    """The trial's start: the operator's cue (not when the arm places the cube), the cube on its
    mark (the arm's reset, or the rig's hand or a person's), the start-state check, and the
    countdown before the policy moves the arm (`Operator.countdown`) whenever something came
    after the cue's own countdown: the arm's reset, a refused start retried or overridden.
    False: the operator stopped the session here."""
    cued = not reset.arm_places
    try:
        if cued:
            operator.before_trial(cue)
        else:   # nobody is asked to place it (the session's approval covers the arm's move)
            operator.message(f"trial {cue.index}: the arm puts the cube on {cue.mark.id}")
    except StopRequested as stop:
        return _stopped(gate, trial, "stopped by the operator between trials", stop, say)
    try:
        cued = put_cube(trial, context.mark, cue, operator, reset) or cued
        if gate.check(trial, context.mark, cue) or not cued:
            operator.countdown(cue)
    except StopRequested as stop:
        return _stopped(gate, trial, f"stopped: {stop}", stop, say)
    return True


def _stopped(gate: StartGate, trial: Trial, line: str, stop: StopRequested, say: Callable[[str], None]) -> bool:
    """The operator ended the session before the trial: recorded (an intervention), said."""
    gate.store.log_event("operator_stop", f"{line} ({stop})", slot=trial.slot)
    say(f"{line}; run again to resume")
    return False


APPROVE_RESETS = ("reset: auto: between trials the arm moves by itself to put the cube on the next mark "
                  "(ARM RESETTING THE CUBE shows while it does; space or esc stops it). Enter = allow it")


def _resets_allowed(reset: CubeReset, rig, operator: Operator, store, say: Callable[[str], None]) -> bool:
    """On a real arm (or the twin) with `reset: auto`, the operator allows, once a session, that
    the arm moves by itself between trials (event `reset_approved`); False: they ended it."""
    if not (reset.on and rig.realtime):
        return True
    try:
        operator.approve(APPROVE_RESETS)
    except StopRequested:
        say("stopped by the operator before the arm moved by itself; run again to resume")
        return False
    store.log_event("reset_approved", "the operator allowed the arm's resets for this session")
    return True


def _put_down(reset: CubeReset, loaded, queue: list[Trial], context, operator: Operator,
              trial: Trial) -> Callable[[], object]:
    """After a trial that ran to its end: a cube still in the jaws put down on the next trial's
    mark (the trial's own when the next is not known yet; `reset_stop.put_down_held`)."""
    mark = episode_context(loaded, queue[0]).mark if queue else context.mark
    return put_down_held(reset, mark, operator, trial.slot)


def _rest_or_end(motion: ArmMotion, say: Callable[[str], None], before: Callable[[], object] | None = None) -> bool:
    """Back to rest between trials (after `before`, the arm's own motion there: a held cube put
    down); False when the operator ended the session instead. A servo alarm or reset on the way
    ends the session with no other move offered (`abort_questions.after_servo_alarm`)."""
    try:
        if before is not None:
            before()
        motion.to_rest()
    except StopRequested:
        say("stopped by the operator; run again to resume")
        return False
    except DeviceFault as fault:
        if is_servo_fault(fault):
            motion.ended = True   # the move to rest before torque goes off would move nothing
            with suppress(StopRequested):
                after_servo_alarm(None, None, str(fault), False, motion.operator)
        raise
    return True
