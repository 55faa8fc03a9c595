"""One episode: the control loop shared by simulated and real rigs.

Each step: observe -> policy -> stop key -> act -> record -> stop key, `fps` times a second for
the fixed duration; on a real rig the episode ends at that duration in wall-clock time (steps
lost to overruns are counted, never made up; the videos keep their planned frame count, the last
frame held). The operator's stop is polled between the inference and the write of its action
(an inference takes up to seconds on a CPU: a stop pressed during it drops its action), and an
action with a value that is not finite is the policy's fault (`_policy_action`), never sent.
On a real rig the loop is paced as `lerobot-rollout` paces it (`rollout/strategies/base.py`):
after a step that took `dt`, sleep `max(0, period - dt)` (coarse sleep, then a short spin, as
LeRobot's `precise_sleep`). It never catches up: after a slow step (a 2 s first inference, a
stalled camera) the next action goes out at least half a period after the late one (`pace`),
never queued steps back to back.
Every overrun (a step longer than the period) is recorded with its step index and length.
In simulation each `act` advances simulated time by one period and no sleeping happens, except
under an asynchronous policy (RTC: its chunks are computed in wall-clock time), which is paced.

Recorded times: on a real rig `t` is the measured clock time of the step's observation since the
episode started (perf_counter); in simulation it is simulated time, `step * period`.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass

import numpy as np

from orchestrator.policies.base import EpisodeContext, Policy
from orchestrator.rigs.base import EpisodeFacts, Rig
from orchestrator.rigs.device_fault import DeviceFault
from orchestrator.run.operator_protocol import Operator
from orchestrator.run.recording import EpisodeRecorder

REALTIME_SWITCH_INTERVAL_S = 0.0005


def precise_sleep_until(deadline: float) -> None:
    """Sleep until `deadline` (perf_counter seconds): coarse sleep, then a short spin."""
    while True:
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            return
        if remaining > 0.002:
            time.sleep(remaining - 0.0015)


def pace(step_start: float, period: float, sent_at: float) -> float:
    """Sleep after a control step; returns the step's own length `dt` (before sleeping).

    lerobot-rollout's pacing, `max(0, period - dt)`: a step on time sleeps to `step_start +
    period`. After an overrun lerobot-rollout sleeps 0, so the late action and the next one go
    out about a millisecond apart; here the next step starts no earlier than half a period after
    the late action was sent (`sent_at`), so two actions never reach the arm closer than half a
    period, and nothing is ever caught up.
    """
    dt = time.perf_counter() - step_start
    precise_sleep_until(step_start + period if dt <= period else sent_at + period / 2)
    return dt


@dataclass(frozen=True)
class EpisodeTiming:
    """Per-episode timing summary (milliseconds); `overruns` = steps longer than the period,
    `overrun_steps` = (step index, step length in ms) of each of them; `frame_age_*` the
    camera frames' age at observation over every camera and step, `frame_repeat_fraction` the
    share of those frames that repeated the previous step's (`rigs/frame_age.py`; None on a rig
    whose cameras do not report it)."""

    period_p50_ms: float
    period_p99_ms: float
    overruns: int
    observe_p50_ms: float
    policy_p50_ms: float
    policy_p99_ms: float
    act_p50_ms: float
    record_p50_ms: float
    record_p99_ms: float
    steps: int                       # steps run (on a real rig: until the duration in wall-clock time)
    overrun_steps: tuple[tuple[int, float], ...] = ()
    frame_age_p50_ms: float | None = None
    frame_age_p95_ms: float | None = None
    frame_repeat_fraction: float | None = None
    planned_steps: int = 0           # fps x duration
    lost_steps: int = 0              # planned - run: lost to overruns, never made up
    inference: dict | None = None    # an asynchronous policy's own figures (`inference_timing()`)

    def as_dict(self) -> dict[str, object]:
        out = dict(self.__dict__)
        out["overrun_steps"] = [list(x) for x in self.overrun_steps]
        if self.inference is None:
            out.pop("inference")
        return out


def _p(values: list[float], q: float) -> float:
    return float(np.percentile(values, q) * 1000) if values else 0.0


def run_episode(rig: Rig, policy: Policy, context: EpisodeContext, recorder: EpisodeRecorder,
                operator: Operator | None = None) -> tuple[EpisodeFacts, EpisodeTiming]:
    """Run one fixed-length episode and return the rig's facts and the loop timing.

    Exceptions (device faults, policy errors, an operator's emergency stop) propagate to the
    caller, which aborts the attempt; the caller also owns `safe_stop`. On every way out, before
    the caller moves the arm, the policy is stopped (`Policy.stop`): an asynchronous one stops its
    background work and drops every queued and in-flight action.
    """
    try:
        return _run_with_switch_interval(rig, policy, context, recorder, operator)
    finally:
        policy.stop()


def _run_with_switch_interval(rig: Rig, policy: Policy, context: EpisodeContext, recorder: EpisodeRecorder,
                              operator: Operator | None) -> tuple[EpisodeFacts, EpisodeTiming]:
    if rig.realtime:
        # The video encoders run on threads; with Python's default 5 ms GIL hand-over a control
        # step can wait that long for the interpreter. 0.5 ms keeps the loop's wait short
        # (measured with bench/control_loop.py).
        switch = sys.getswitchinterval()
        sys.setswitchinterval(REALTIME_SWITCH_INTERVAL_S)
        try:
            return _run_steps(rig, policy, context, recorder, operator)
        finally:
            sys.setswitchinterval(switch)
    return _run_steps(rig, policy, context, recorder, operator)


def _policy_action(policy: Policy, observation) -> dict:
    """The policy's action; any error inside the policy, or a non-finite target, is a
    `DeviceFault` of kind `policy` (the runner counts it by the protocol's `aborts.policy`)."""
    try:
        action = policy.select_action(observation)
        bad = [k for k, v in action.items() if not math.isfinite(float(v))]
        if bad:
            raise ValueError(f"non-finite action for {', '.join(sorted(bad))}")
    except DeviceFault:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever the policy raised is the policy's fault
        raise DeviceFault.policy(exc) from exc
    return action


def _episode_timing(periods: list[float], overrun_steps: list[tuple[int, float]], phases: tuple[list[float], ...],
                    ran: int, steps: int, ages: list[float], repeats: int, policy: Policy) -> EpisodeTiming:
    """The episode's loop timing from its per-step measurements (`phases`: the observe, policy,
    act and record times of each step)."""
    obs_t, pol_t, act_t, rec_t = phases
    return EpisodeTiming(
        period_p50_ms=_p(periods, 50), period_p99_ms=_p(periods, 99), overruns=len(overrun_steps),
        observe_p50_ms=_p(obs_t, 50), policy_p50_ms=_p(pol_t, 50), policy_p99_ms=_p(pol_t, 99),
        act_p50_ms=_p(act_t, 50), record_p50_ms=_p(rec_t, 50), record_p99_ms=_p(rec_t, 99),
        steps=ran, overrun_steps=tuple(overrun_steps), planned_steps=steps, lost_steps=steps - ran,
        frame_age_p50_ms=float(np.percentile(ages, 50)) if ages else None,
        frame_age_p95_ms=float(np.percentile(ages, 95)) if ages else None,
        frame_repeat_fraction=repeats / len(ages) if ages else None,
        inference=policy.inference_timing())


def _run_steps(rig: Rig, policy: Policy, context: EpisodeContext, recorder: EpisodeRecorder,
               operator: Operator | None) -> tuple[EpisodeFacts, EpisodeTiming]:
    steps = round(context.fps * context.duration_s)
    period = 1.0 / context.fps
    # An asynchronous policy computes in wall-clock time, so a simulated rig runs paced under it too.
    paced = rig.realtime or policy.asynchronous
    policy.reset(context)
    obs_t, pol_t, act_t, rec_t, periods = [], [], [], [], []
    overrun_steps: list[tuple[int, float]] = []
    ages, repeats = [], 0
    start = time.perf_counter()
    previous = start
    ran, step = 0, -1
    while True:
        t0 = time.perf_counter()
        # On a real rig the episode ends at the protocol's duration in wall-clock time, as
        # lerobot-rollout's does, and a step is the period slot its clock time falls in: slots a
        # slow step overran are lost, counted (`lost_steps`), never made up (a slow policy gets
        # no more physical time, and its videos are no longer: the recorder holds the last frame
        # over a lost slot).
        step = max(step + 1, int((t0 - start) / period + 1e-9)) if rig.realtime else step + 1
        if step >= steps or (rig.realtime and t0 - start >= context.duration_s):
            break
        ran += 1
        t_episode = t0 - start if rig.realtime else step * period
        observation = rig.observe(with_images=policy.needs_images or recorder.wants_images(step))
        t1 = time.perf_counter()
        frames = rig.last_frames
        ages += [age for age, _ in frames.values()]
        repeats += sum(repeated for _, repeated in frames.values())
        action = _policy_action(policy, observation)
        t2 = time.perf_counter()
        if operator is not None:   # a stop pressed during the inference: its action never goes out
            operator.poll(t2 - start if rig.realtime else t_episode)
        sent = rig.act(action)
        t3 = time.perf_counter()
        recorder.frame(step, t_episode, observation, action, sent=sent, frames=frames)
        t4 = time.perf_counter()
        if operator is not None:
            operator.poll(t4 - start if rig.realtime else t_episode)
        obs_t.append(t1 - t0)
        pol_t.append(t2 - t1)
        act_t.append(t3 - t2)
        rec_t.append(t4 - t3)
        if paced:
            dt = pace(t0, period, t3)
            if dt > period:
                overrun_steps.append((step, round(dt * 1000, 3)))
        now = time.perf_counter()
        periods.append(now - previous)
        previous = now
    facts = rig.end_episode()
    timing = _episode_timing(periods, overrun_steps, (obs_t, pol_t, act_t, rec_t), ran, steps, ages, repeats, policy)
    recorder.pad_videos()   # slots after the last step that ran: held frames, so lengths are equal
    return facts, timing
