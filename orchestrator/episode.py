"""One episode: the control loop shared by simulated and real rigs.

Each step: observe -> policy -> act -> record, `fps` times a second for the fixed duration.
On a real rig the loop is paced by the wall clock (sleep to the next tick, then busy-wait the
last millisecond, as LeRobot's `precise_sleep` does); in simulation each `act` advances
simulated time by one period and no sleeping happens. Per-step timings are kept so the report
can show p50/p99 period and overruns.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

import numpy as np

from .operator import Operator
from .policies.base import EpisodeContext, Policy
from .recording import EpisodeRecorder
from .rigs.base import EpisodeFacts, Rig


REALTIME_SWITCH_INTERVAL_S = 0.0005


def precise_sleep_until(deadline: float) -> None:
    """Sleep until `deadline` (perf_counter seconds): coarse sleep, then a short spin."""
    while True:
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            return
        if remaining > 0.002:
            time.sleep(remaining - 0.0015)


@dataclass(frozen=True)
class EpisodeTiming:
    """Per-episode timing summary (milliseconds); `overruns` = steps longer than the period."""

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

    def as_dict(self) -> dict[str, float | int]:
        return dict(self.__dict__)


def _p(values: list[float], q: float) -> float:
    return float(np.percentile(values, q) * 1000) if values else 0.0


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
    start = time.perf_counter()
    previous = start
    for step in range(steps):
        t_episode = step * period
        t0 = time.perf_counter()
        observation = rig.observe(with_images=policy.needs_images or recorder.wants_images(step))
        t1 = time.perf_counter()
        action = policy.select_action(observation)
        t2 = time.perf_counter()
        sent = rig.act(action)
        t3 = time.perf_counter()
        recorder.frame(step, t_episode, observation, sent)
        t4 = time.perf_counter()
        if operator is not None:
            operator.poll(t_episode)
        obs_t.append(t1 - t0)
        pol_t.append(t2 - t1)
        act_t.append(t3 - t2)
        rec_t.append(t4 - t3)
        if rig.realtime:
            precise_sleep_until(start + (step + 1) * period)
        now = time.perf_counter()
        periods.append(now - previous)
        previous = now
    facts = rig.end_episode()
    overruns = sum(1 for p in periods if p > period * 1.05) if rig.realtime else 0
    timing = EpisodeTiming(
        period_p50_ms=_p(periods, 50), period_p99_ms=_p(periods, 99), overruns=overruns,
        observe_p50_ms=_p(obs_t, 50), policy_p50_ms=_p(pol_t, 50), policy_p99_ms=_p(pol_t, 99),
        act_p50_ms=_p(act_t, 50), record_p50_ms=_p(rec_t, 50), record_p99_ms=_p(rec_t, 99),
        steps=steps)
    return facts, timing
