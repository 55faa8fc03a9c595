"""Seeded simulation of e-value campaigns as the runner runs them, for tests and bench/.

A campaign is drawn with the real schedule (`design.schedule.draw_schedule`), its outcomes from
per-mark success probabilities (repeats on one mark are correlated through them), and it is run
the way `run.sequential` runs it: before the first trial of every unit the pre-registered rule
(`analysis.stopping.stopping_decision`) is asked about every trial so far (pending ones too: the
rule needs the scheduled repeats of a mark), and the campaign stops when it says so. The report
is then built from the same outcomes with the recorded stop reason.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from orchestrator.analysis.outcomes import OutcomeSet, TrialOutcome
from orchestrator.analysis.stopping import stopping_decision
from orchestrator.design.protocol import Layout, Protocol
from orchestrator.design.schedule import draw_schedule


@dataclass(frozen=True)
class Campaign:
    data: OutcomeSet            # the outcomes at the stop, with the recorded stop reason
    stop_reason: str
    layouts_run: int


def protocol(marks: int, repeats: int, max_layouts: int, seed: int, alpha: float = 0.05,
             policies: tuple[str, ...] = ("A", "B")) -> tuple[Protocol, Layout]:
    layout = Layout.model_validate({"marks": [{"id": f"M{i:02d}", "x": 0.2, "y": 0.0} for i in range(marks)]})
    proto = Protocol.model_validate({
        "name": "sim", "layout": "l.yaml", "seed": seed, "trials_per_layout": repeats,
        "episode": {"fps": 30, "duration_s": 1}, "policies": {p: {"type": "scripted"} for p in policies},
        "analysis": {"alpha": alpha, "stopping": {"kind": "evalue", "max_layouts": max_layouts}}})
    return proto, layout


def run_campaign(rates: dict[str, float], marks: int, repeats: int, max_layouts: int, seed: int,
                 spread: float = 0.0, alpha: float = 0.05) -> Campaign:
    """One campaign. `rates` are the policies' mean success rates; with `spread` > 0 each mark
    shifts every policy's rate by the same N(0, spread) amount on the logit scale (a hard or an
    easy mark), so the repeats of a mark are correlated."""
    proto, layout = protocol(marks, repeats, max_layouts, seed, alpha, tuple(rates))
    rng = np.random.default_rng(seed)
    shift = {m.id: rng.normal(0, spread) if spread else 0.0 for m in layout.marks}

    def p_of(policy: str, mark: str) -> float:
        logit = np.log(rates[policy] / (1 - rates[policy])) + shift[mark]
        return float(1 / (1 + np.exp(-logit)))

    schedule = draw_schedule(proto, layout)
    outs = [TrialOutcome(layout=t.mark_id, repeat=t.repeat, policy=t.policy, success=None, slot=t.slot,
                         unit=t.unit, position=t.position, state="pending") for t in schedule]
    reason = "complete"
    for i, t in enumerate(schedule):
        if t.position == 0:
            decision = stopping_decision(outs, proto)
            if decision.stop:
                reason = decision.reason
                break
        outs[i] = replace(outs[i], success=bool(rng.random() < p_of(t.policy, t.mark_id)), state="done")
    ran = {(o.layout, o.repeat) for o in outs if o.state == "done"}
    data = OutcomeSet(outcomes=tuple(outs), policies=tuple(rates), source="sim", label_source="physics",
                      complete=True, stop_reason=reason, alpha=alpha,
                      stopping={"kind": "evalue", "max_layouts": max_layouts})
    return Campaign(data, reason, len(ran))
