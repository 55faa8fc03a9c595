"""Simulated episodes in worker processes, one per core.

Rendering dominates a simulated episode (docs/design.md section 3), and episodes of a simulated
campaign are independent given their stored trial seed, so they run in parallel. The main
process keeps the store: it begins each attempt before handing the trial to a worker and
commits (or aborts) it when the worker answers, one transaction each. Workers only write the
episode's files, which stay invisible (temp names) until complete.

A worker that dies (the kernel's out-of-memory killer, a crash in the renderer, a signal) breaks
the pool: every trial it was running is recorded `interrupted` (re-run, within the protocol's
`aborts.max_interruptions`), the cause is said in one line from the dead worker's exit code, and
a new pool takes the queue, up to `MAX_POOL_RESTARTS` times a session; then the session stops
with that line (resumable).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

from orchestrator.core.errors import Interrupted, RuntimeFailure
from orchestrator.core.progress import terminal_for
from orchestrator.design.schedule import Trial
from orchestrator.run.bookkeeping import (
    INTERRUPTED_BY_USER,
    SETTLED_SAY,
    Progress,
    Referees,
    abort_class,
    commit_episode,
    episode_context,
    episode_record,
    settle_abort,
    stopped_early,
)
from orchestrator.run.campaign import OpenedCampaign
from orchestrator.run.recording import check_disk, episode_bytes_estimate, remove_episode_files
from orchestrator.store.sqlite import INTERRUPTED_CLASS, SETTLES_FAILURE, new_episode_id

_WORKER: dict = {}
MAX_POOL_RESTARTS = 2   # a session replaces its dead workers this often, then stops (resumable)


def _init_worker(protocol_path: str, protocol_text: str, layout_text: str, rig_path: str,
                 rig_text: str, campaign_dir: str, rate_episode) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the main process decides about Ctrl-C
    os.environ.setdefault("MUJOCO_GL", "egl")
    os.environ.setdefault("LP_NUM_THREADS", "1")   # one rendering thread per worker (llvmpipe)
    from orchestrator.design.protocol import load_protocol
    from orchestrator.rigs.profile import load_rig

    loaded = load_protocol(protocol_path)
    if loaded.text != protocol_text or loaded.layout_text != layout_text:
        raise RuntimeFailure("protocol file changed while the campaign was running")
    rig = load_rig(rig_path)
    _WORKER.update(loaded=loaded, rig=rig, campaign_dir=campaign_dir, rate_episode=rate_episode)


def _worker_state():
    if "sim" not in _WORKER:
        from orchestrator.policies.factory import make_policy
        from orchestrator.rigs.factory import make_rig

        loaded, rig_profile = _WORKER["loaded"], _WORKER["rig"]
        sim = make_rig(rig_profile, loaded)
        sim.connect()
        _WORKER["sim"] = sim
        _WORKER["policies"] = {label: make_policy(label, spec, loaded, sim)
                               for label, spec in loaded.protocol.policies.items()}
    return _WORKER["sim"], _WORKER["policies"]


def _run_trial(trial: Trial, episode_id: str):
    """Worker side: run one episode and return its EpisodeRecord (files already published)."""
    from pathlib import Path

    from orchestrator.run.control_loop import run_episode
    from orchestrator.run.recording import EpisodeRecorder

    sim, policies = _worker_state()
    loaded, rig_profile = _WORKER["loaded"], _WORKER["rig"]
    context = episode_context(loaded, trial)
    cameras = rig_profile.profile.cameras
    sim.prepare_layout(context.mark, context.cube, trial.seed)
    recorder = EpisodeRecorder(Path(_WORKER["campaign_dir"]), episode_id, cameras, context.fps,
                               round(context.fps * context.duration_s), camera_poses=sim.camera_poses())
    try:
        facts, timing = run_episode(sim, policies[trial.policy], context, recorder)
        recorded = recorder.finish()
    except BaseException:
        recorder.discard()
        raise
    return episode_record(episode_id, context, cameras, recorded, facts, timing, loaded.protocol.success,
                          _WORKER["rate_episode"])


def run_parallel(opened: OpenedCampaign, pending: list[Trial], workers: int, summary,
                 say: Callable[[str], None], stop_after: int | None, referees: Referees) -> None:
    store, loaded, rig = opened.store, opened.protocol, opened.rig
    progress = Progress(summary.total, summary.done_total, say, terminal_for(say))
    per_episode = episode_bytes_estimate(rig.profile.cameras, loaded.protocol.episode.duration_s)
    pool = _new_pool(opened, workers, referees)
    in_flight: dict[Future, tuple[Trial, int, str]] = {}
    queue = list(pending)
    submitted = 0
    restarts = 0
    workers_seen: dict = {}   # pid -> the pool's worker process (the pool forgets a dead one)
    deferred: RuntimeFailure | None = None
    try:
        while queue or in_flight:
            while queue and len(in_flight) < workers * 2:
                if stop_after is not None and submitted >= stop_after:
                    queue.clear()
                    break
                trial = queue[0]
                if trial.position == 0 and not in_flight and stopped_early(opened, referees, summary, say):
                    queue.clear()
                    break
                if trial.position == 0 and in_flight and not isinstance(
                        loaded.protocol.analysis.stopping, str):
                    break  # a stopping rule looks at whole units: let the running ones finish
                try:
                    check_disk(store.directory, per_episode * (len(in_flight) + 1), "the next episodes")
                except RuntimeFailure as exc:
                    deferred = exc  # let the running episodes finish, then stop cleanly
                    queue.clear()
                    break
                queue.pop(0)
                episode_id = new_episode_id()
                attempt = store.begin_attempt(trial.slot, episode_id)
                in_flight[pool.submit(_run_trial, trial, episode_id)] = (trial, attempt, episode_id)
                workers_seen.update(getattr(pool, "_processes", {}) or {})   # their exit codes, should one die
                submitted += 1
            if not in_flight:
                break
            done, _ = wait(in_flight, return_when=FIRST_COMPLETED)
            if any(isinstance(future.exception(), BrokenProcessPool) for future in done):
                restarts += 1
                _replace_dead_workers(pool, workers_seen, restarts, in_flight, queue, opened, summary, progress, say)
                pool, workers_seen = _new_pool(opened, workers, referees), {}
                continue
            for future in done:
                _collect(future, *in_flight.pop(future), opened, summary, progress, say)
    except KeyboardInterrupt:
        _abort_in_flight(pool, in_flight, store, INTERRUPTED_BY_USER)
        raise Interrupted("interrupted: running simulated trials will be re-run; "
                          "run the same command again to resume") from None
    except BaseException:
        _abort_in_flight(pool, in_flight, store, "stopped: another trial failed")
        raise
    finally:
        progress.close()
    pool.shutdown(wait=True)
    if deferred is not None:
        raise deferred


def _collect(future: Future, trial: Trial, attempt: int, episode_id: str, opened: OpenedCampaign, summary,
             progress: Progress, say: Callable[[str], None]) -> None:
    """A finished episode: committed; or its abort recorded and settled by the `aborts` rules,
    its files removed (a policy's fault the rules count as its failure lets the campaign go on;
    any other raises `RuntimeFailure`)."""
    store, loaded = opened.store, opened.protocol
    try:
        record = future.result()
    except Exception as exc:
        cause = f"{type(exc).__name__}: {exc}"
        cause_class = abort_class(exc)
        settled = settle_abort(store, attempt, trial, cause, cause_class, loaded, summary)
        remove_episode_files(store.directory, episode_id)
        if settled == SETTLES_FAILURE and cause_class == "policy":
            say(f"trial {trial.slot + 1} aborted: {cause}; {SETTLED_SAY[settled]}")
            progress.update(trial.mark_id)
            return
        raise RuntimeFailure(f"trial {trial.slot + 1} (mark {trial.mark_id}) aborted: {cause}; "
                             "the campaign is resumable: fix the cause and run again") from exc
    commit_episode(store, attempt, trial, record, loaded.protocol.episode.fps, summary)
    progress.update(trial.mark_id)


def _new_pool(opened: OpenedCampaign, workers: int, referees: Referees) -> ProcessPoolExecutor:
    loaded, rig = opened.protocol, opened.rig
    return ProcessPoolExecutor(
        max_workers=workers, mp_context=multiprocessing.get_context("spawn"), initializer=_init_worker,
        initargs=(str(loaded.path), loaded.text, loaded.layout_text, str(rig.path), rig.text,
                  str(opened.store.directory), referees.rate_episode))


def _replace_dead_workers(pool: ProcessPoolExecutor, workers_seen: dict, restarts: int, in_flight: dict,
                          queue: list[Trial], opened: OpenedCampaign, summary, progress: Progress,
                          say: Callable[[str], None]) -> None:
    """A worker died (the pool is broken): its trials back in the queue, the cause said; past
    `MAX_POOL_RESTARTS` this session, `RuntimeFailure` with what to do (the caller starts a new pool)."""
    cause = _worker_death(list(workers_seen.values()))
    lost = _requeue_broken(pool, in_flight, queue, opened, summary, progress, say, cause)
    if restarts > MAX_POOL_RESTARTS:
        raise RuntimeFailure(f"{cause}, {restarts} times this session; the campaign is resumable: "
                             "free memory (close other programs, or pass --workers 1) and run again")
    say(f"{cause}; its {lost} running trial(s) will be re-run on new workers")


def _worker_death(processes: list) -> str:
    """One line naming how a worker of a broken pool ended, from its exit code: a signal (SIGKILL:
    most often the kernel's out-of-memory killer, `dmesg` says), or a crash."""
    deadline = time.monotonic() + 2.0   # the pool's manager thread may not have reaped it yet
    while not (codes := [process.exitcode for process in processes if process.exitcode not in (None, 0)]):
        if time.monotonic() > deadline:
            break
        time.sleep(0.02)
    signals = [-code for code in codes if code < 0 and -code != signal.SIGTERM]
    if signals:
        name = signal.Signals(signals[0]).name
        hint = (" (most often the kernel's out-of-memory killer: `dmesg | tail` says)"
                if signals[0] == signal.SIGKILL else " (a crash in native code: the renderer or a library)"
                if signals[0] in (signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT) else "")
        return f"a simulation worker was ended by {name}{hint}"
    return f"a simulation worker ended unexpectedly (exit code {codes[0] if codes else 'unknown'})"


def _requeue_broken(pool: ProcessPoolExecutor, in_flight: dict, queue: list[Trial], opened: OpenedCampaign,
                    summary, progress: Progress, say: Callable[[str], None], cause: str) -> int:
    """A broken pool: the episodes that finished are committed; every other trial in flight is
    recorded `interrupted` with `cause` and goes back to the front of the queue (in order)."""
    _kill_pool(pool)
    lost: list[Trial] = []
    for future, (trial, attempt, episode_id) in list(in_flight.items()):
        if future.done() and not future.cancelled() and future.exception() is None:
            _collect(future, trial, attempt, episode_id, opened, summary, progress, say)
            continue
        opened.store.abort_attempt(attempt, f"interrupted: {cause}", INTERRUPTED_CLASS)
        remove_episode_files(opened.store.directory, episode_id)
        lost.append(trial)
    in_flight.clear()
    queue[:0] = sorted(lost, key=lambda t: t.slot)
    return len(lost)


def _abort_in_flight(pool: ProcessPoolExecutor, in_flight: dict, store, reason: str) -> None:
    """Stop the workers now and record each running trial as interrupted (it is re-run)."""
    _kill_pool(pool)
    for _trial, attempt, episode_id in in_flight.values():
        store.abort_attempt(attempt, reason, INTERRUPTED_CLASS)
        remove_episode_files(store.directory, episode_id)


def _kill_pool(pool: ProcessPoolExecutor) -> None:
    """Stop workers now (simulation holds no hardware that needs a safe stop)."""
    for process in list(getattr(pool, "_processes", {}).values()):
        try:
            process.kill()
        except Exception:
            pass
    pool.shutdown(wait=False, cancel_futures=True)
