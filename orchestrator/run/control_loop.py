"""One episode: the control loop shared by simulated and real rigs.

Each step: observe -> policy -> stop key -> act -> record -> stop key, `fps` times a second for
the fixed duration. The operator's stop is polled between the inference and the write of its
action (an inference takes up to seconds on a CPU: a stop pressed during it drops its action),
and an action with a value that is not finite is the policy's fault (`_checked`), never sent.
On a real rig the loop is paced as `lerobot-rollout` paces it (`rollout/strategies/base.py`):
after a step that took `dt`, sleep `max(0, period - dt)` (coarse sleep, then a short spin, as
LeRobot's `precise_sleep`). It never catches up: after a slow step (a 2 s first inference, a
stalled camera) the next action goes out at least half a period after the late one (`pace`),
never queued steps back to back.
Every overrun (a step longer than the period) is recorded with its step index and length.
In simulation each `act` advances simulated time by one period and no sleeping happens.

Recorded times: on a real rig `t` is the measured clock time of the step's observation since the
episode started (perf_counter); in simulation it is simulated time, `step * period`.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

import numpy as np

from orchestrator.run.operator_protocol import Operator
from orchestrator.policies.base import EpisodeContext, Policy
from orchestrator.run.recording import EpisodeRecorder
from orchestrator.rigs.base import EmergencyStop, EpisodeFacts, Rig
from orchestrator.rigs.device_fault import POLICY_CHECK, DeviceFault


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
    `overrun_steps` = (step index, step length in ms) of each of them."""

    period_p50_ms: float
    period_p99_ms: float
    overruns: int
    observe_p50_ms: float
    policy_p50_ms: float
    policy_p99_ms: float
    act_p50_ms: float
    record_p50_ms: float
    record_p99_ms: float
    steps: int
    overrun_steps: tuple[tuple[int, float], ...] = ()

    def as_dict(self) -> dict[str, object]:
        out = dict(self.__dict__)
        out["overrun_steps"] = [list(x) for x in self.overrun_steps]
        return out


def _p(values: list[float], q: float) -> float:
    return float(np.percentile(values, q) * 1000) if values else 0.0


def _infer(policy: Policy, observation: dict) -> dict:
    """`policy.select_action`, with anything it raises reported as the policy's fault."""
    try:
        return policy.select_action(observation)
    except (DeviceFault, EmergencyStop):
        raise
    except Exception as exc:  # noqa: BLE001 - classified: the policy failed, not the arm
        raise DeviceFault.policy(exc) from exc


def _checked(action: dict) -> dict:
    """The policy's action, refused before the bus when a value is not a finite number: a
    `DeviceFault` of kind `policy` (the policy's fault, not the arm's)."""
    bad = []
    for key, value in action.items():
        try:
            ok = bool(np.all(np.isfinite(np.asarray(value, dtype=float))))
        except (TypeError, ValueError):
            ok = False
        if not ok:
            bad.append(f"{key}={value}")
    if bad:
        raise DeviceFault("policy", "policy", "non-finite action " + ", ".join(bad[:6]), POLICY_CHECK)
    return action


def run_episode(rig: Rig, policy: Policy, context: EpisodeContext, recorder: EpisodeRecorder,
                operator: Operator | None = None) -> tuple[EpisodeFacts, EpisodeTiming]:
    """Run one fixed-length episode and return the rig's facts and the loop timing.

    Exceptions (device faults, policy errors, an operator's emergency stop) propagate to the
    caller, which aborts the attempt; the caller also owns `safe_stop`.
    """
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


def _run_steps(rig: Rig, policy: Policy, context: EpisodeContext, recorder: EpisodeRecorder,
               operator: Operator | None) -> tuple[EpisodeFacts, EpisodeTiming]:
    steps = round(context.fps * context.duration_s)
    period = 1.0 / context.fps
    policy.reset(context)
    obs_t, pol_t, act_t, rec_t, periods = [], [], [], [], []
    overrun_steps: list[tuple[int, float]] = []
    start = time.perf_counter()
    previous = start
    for step in range(steps):
        t0 = time.perf_counter()
        t_episode = t0 - start if rig.realtime else step * period
        observation = rig.observe(with_images=policy.needs_images or recorder.wants_images(step))
        t1 = time.perf_counter()
        action = _checked(_infer(policy, observation))
        t2 = time.perf_counter()
        if operator is not None:   # a stop pressed during the inference: its action never goes out
            operator.poll(t2 - start if rig.realtime else t_episode)
        sent = rig.act(action)
        t3 = time.perf_counter()
        recorder.frame(step, t_episode, observation, action, sent=sent)
        t4 = time.perf_counter()
        if operator is not None:
            operator.poll(t4 - start if rig.realtime else t_episode)
        obs_t.append(t1 - t0)
        pol_t.append(t2 - t1)
        act_t.append(t3 - t2)
        rec_t.append(t4 - t3)
        if rig.realtime:
            dt = pace(t0, period, t3)
            if dt > period:
                overrun_steps.append((step, round(dt * 1000, 3)))
        now = time.perf_counter()
        periods.append(now - previous)
        previous = now
    facts = rig.end_episode()
    timing = EpisodeTiming(
        period_p50_ms=_p(periods, 50), period_p99_ms=_p(periods, 99), overruns=len(overrun_steps),
        observe_p50_ms=_p(obs_t, 50), policy_p50_ms=_p(pol_t, 50), policy_p99_ms=_p(pol_t, 99),
        act_p50_ms=_p(act_t, 50), record_p50_ms=_p(rec_t, 50), record_p99_ms=_p(rec_t, 99),
        steps=steps, overrun_steps=tuple(overrun_steps))
    return facts, timing
