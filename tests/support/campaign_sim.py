"""Seeded campaigns that can fail the report's tests, for the tests (small) and bench/report_type1.py.

A campaign is drawn with the real schedule (`design.schedule.draw_schedule`) and recorded as the
runner records it (`analysis.outcomes.TrialOutcome`, one per trial; with the e-value rule the
runner's `stopping_decision` is asked before the first trial of every unit, as
`tests/support/evalue_sim.py` does). What makes it hard:

- `rates`: each policy's success rate on an average mark (logit scale); two equal rates are the
  null hypothesis of "better";
- `spread`: a mark's difficulty, N(0, spread) on the logit, shared by every policy (the repeats
  of a mark are correlated);
- `mark_effect`: per-mark effects, N(0, mark_effect) on the logit for each (mark, policy),
  independent: a policy is better on some marks and worse on others, equal on average over marks
  (the difference between two policies varies by mark; the repeats of a mark share it);
- `unsure`: the share of labels left unsure (no outcome: its mark is then incomplete for the rule);
- `missing`: policies that never give an outcome (every attempt aborted by the rig, left out at
  the re-run limit: `settled: excluded`), a never-measured third policy;
- a dominant policy is a rate near 1 in `rates` (e.g. {"A": 0.6, "B": 0.6, "C": 0.98}).

The truth for a pair under the null is known: with equal `rates` and symmetric mark effects the
expected difference over marks is 0.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from orchestrator.analysis.outcomes import OutcomeSet, TrialOutcome
from orchestrator.analysis.stopping import stopping_decision
from orchestrator.design.protocol import Layout, Protocol
from orchestrator.design.schedule import draw_schedule


@dataclass(frozen=True)
class Scenario:
    rates: dict[str, float]
    marks: int = 20
    repeats: int = 3
    spread: float = 1.0
    mark_effect: float = 0.0
    unsure: float = 0.0
    missing: tuple[str, ...] = ()
    evalue: bool = False
    max_layouts: int = 60
    alpha: float = 0.05


def _protocol(s: Scenario, seed: int) -> tuple[Protocol, Layout]:
    layout = Layout.model_validate({"marks": [{"id": f"M{i:02d}", "x": 0.2, "y": 0.0} for i in range(s.marks)]})
    stopping = {"kind": "evalue", "max_layouts": s.max_layouts} if s.evalue else "none"
    proto = Protocol.model_validate({
        "name": "sim", "layout": "l.yaml", "seed": seed, "trials_per_layout": s.repeats,
        "episode": {"fps": 30, "duration_s": 1}, "policies": {p: {"type": "scripted"} for p in s.rates},
        "analysis": {"alpha": s.alpha, "stopping": stopping}})
    return proto, layout


def _logit(p: float) -> float:
    return float(np.log(p / (1 - p)))


def run(s: Scenario, seed: int) -> OutcomeSet:
    """One campaign as the runner records it (stopped by the e-value rule when `s.evalue`)."""
    proto, layout = _protocol(s, seed)
    rng = np.random.default_rng(seed)
    shift = {m.id: rng.normal(0, s.spread) if s.spread else 0.0 for m in layout.marks}
    effect = {(m.id, p): rng.normal(0, s.mark_effect) if s.mark_effect else 0.0
              for m in layout.marks for p in s.rates}
    schedule = draw_schedule(proto, layout)
    outs = [TrialOutcome(layout=t.mark_id, repeat=t.repeat, policy=t.policy, success=None, slot=t.slot,
                         unit=t.unit, position=t.position, state="pending") for t in schedule]
    reason = None
    for i, t in enumerate(schedule):
        if s.evalue and t.position == 0:
            decision = stopping_decision(outs, proto)
            if decision.stop:
                reason = decision.reason
                break
        if t.policy in s.missing:
            outs[i] = replace(outs[i], state="done", settled="excluded", abort_classes=("rig",) * 4)
            continue
        logit = _logit(s.rates[t.policy]) + shift[t.mark_id] + effect[(t.mark_id, t.policy)]
        ok = bool(rng.random() < 1 / (1 + np.exp(-logit)))
        label = None if rng.random() < s.unsure else ok
        outs[i] = replace(outs[i], success=label, state="done")
    stopping = {"kind": "evalue", "max_layouts": s.max_layouts} if s.evalue else "none"
    return OutcomeSet(outcomes=tuple(outs), policies=tuple(s.rates), source="sim", label_source="physics",
                      complete=True, stop_reason=reason, alpha=s.alpha, stopping=stopping)
