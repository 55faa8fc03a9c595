"""The autonomous reset on short campaigns, and the measurement of where its placements land.

    MUJOCO_GL=egl uv run python bench/reset_short.py [--seeds 8] [--first-seed 0] [--trials 8] [--max-tries 3] [--no-slip-model]
    MUJOCO_GL=egl uv run python bench/reset_short.py --calibrate 120 [--seed 11]

Short campaigns: `--seeds` copies of the demo with the reset (protocols/sim_demo_reset.yaml),
each stopped after `--trials` trials, in process on the simulated SO-101 (hardware/sim.yaml),
copy i (from `--first-seed`) with the schedule seed 20261129 + i and a simulated hand that places
the session's first cube imperfectly (`placement: {sigma_mm: 2, sigma_deg: 3, seed: i}`). Prints the reset's
interventions per 100 trials (the acts of a person a reset caused: a reset handed over, which
the start check then asks a person to put right, a lost cube or a stopped reset; the first
cube, placed by the hand, is not the reset's), the report's interventions by cause, the reset's
by what caused them (`causes_of`: a cube lost out of reach, off the table or not found, a reset
stopped by the guarded motion or the stop key in the put-down from the jaws or in a pick and
place, a placement that missed after its tries), one line each, the share of resets
placed within the tolerance by their first put-down (over all resets and over each session's
first three), placements per reset, and the placement error when the episode starts against the
simulator's ground truth. `--no-slip-model`: the same without the profile's `reset_slip` (the
session learns its slip from its own resets only: the behaviour before the model).

`--calibrate N`: N resets, each the first of a fresh session (no history, `max_tries: 1`, no
model): the cube planted near a random mark (4 mm sd) turned up to 20 degrees, or, every third,
6-15 mm from the target mark; the arm puts it on a random other mark; the miss against the
simulator's ground truth, in the mark's frame seen from the base (rigs/reset_slip.py). Prints
the fitted `reset_slip` section for the rig profile (least squares; near: the median) and its
leave-one-out residuals.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FIRST_RESETS = 3
PHASES: list[str] = []   # the phase of each stopped reset, in order (`watch_phases`)


def watch_phases() -> None:
    """Record in `PHASES` which of the reset's phases each stop (`MotionStopped`) came from."""
    from orchestrator.run.motion import MotionStopped
    from orchestrator.run.reset import CubeReset

    def watched(method, phase):
        def call(self, *args, **kwargs):
            try:
                return method(self, *args, **kwargs)
            except MotionStopped:
                PHASES.append(phase)
                raise
        return call

    CubeReset.put_down_held = watched(CubeReset.put_down_held, "put-down from the jaws")
    CubeReset.place = watched(CubeReset.place, "pick and place")


def rig_text(hand_seed: int, slip_model: bool) -> str:
    lines = (ROOT / "hardware" / "sim.yaml").read_text().splitlines(keepends=True)
    if not slip_model:   # the section and its indented lines
        out, skipping = [], False
        for line in lines:
            skipping = line.startswith("reset_slip:") or (skipping and line.startswith((" ", "#")))
            if not skipping:
                out.append(line)
        lines = out
    return "".join(lines) + f"placement: {{sigma_mm: 2, sigma_deg: 3, seed: {hand_seed}}}\n"


def causes_of(events: list[dict], phases: list[str]) -> list[tuple[str, str]]:
    """(cause, detail) per reset intervention, in the order they happened, naming its cause: a cube the
    reset could not take (lost: out of reach, off the table, not found), a reset stopped (the
    guarded motion blocked, or the stop key) and in which phase (`phases`, in the order of the
    `reset_stopped` events: the put-down from the jaws after an episode, or a pick-and-place
    try), or a placement that missed after its tries."""
    out, stops, blocked = [], iter(phases), None
    for e in events:
        data = json.loads(e["data"]) if e.get("data") else {}
        if e["kind"] == "motion_blocked":
            blocked = e["message"].split(": ", 1)[-1]
        elif e["kind"] == "reset_stopped":
            phase = next(stops, "unknown phase")
            out.append((f"stopped ({'blocked' if blocked else 'the stop key'}) in the {phase}",
                        f"before {data.get('mark')}: {blocked or 'the stop key'}"))
            blocked = None
        elif e["kind"] == "cube_reset" and not data.get("passes"):
            why = data.get("why") or ""
            kind = ("lost: out of reach" if "reach" in why else "lost: off the table" if "off the table" in why
                    else "lost: not found" if "not found" in why or "cubes in view" in why or "camera" in why
                    else "missed placement")
            out.append((kind, f"before {data.get('mark')}: {why}"))
    return out


def run_short(folder: Path, i: int, trials: int, max_tries: int, slip_model: bool, truth: list[float]) -> dict:
    from orchestrator.analysis.start_records import intervention_counts
    from orchestrator.run.campaign import open_campaign
    from orchestrator.run.sequential import run_campaign

    text = (ROOT / "protocols" / "sim_demo_reset.yaml").read_text()
    text = text.replace("seed: 20261129", f"seed: {20261129 + i}").replace("max_tries: 3", f"max_tries: {max_tries}")
    text = text.replace("layout: ../layouts/grid20.yaml", f"layout: {ROOT / 'layouts' / 'grid20.yaml'}")
    (folder / "protocol.yaml").write_text(text)
    (folder / "rig.yaml").write_text(rig_text(i, slip_model))
    opened = open_campaign(folder / "protocol.yaml", folder / "rig.yaml", folder / "campaign")
    started, before, phases_before = time.monotonic(), len(truth), len(PHASES)
    try:
        summary = run_campaign(opened, workers=1, say=lambda line: None, stop_after=trials)
        events, attempts = opened.store.events(), opened.store.attempts()
    finally:
        opened.store.close()
    resets = [json.loads(e["data"]) for e in events if e["kind"] == "cube_reset"]
    causes = causes_of(sorted(events, key=lambda e: float(e["at"])), PHASES[phases_before:])
    return {"trials": summary.done_total, "interventions": intervention_counts(events, attempts), "resets": resets,
            "causes": causes,
            "stopped": sum(1 for e in events if e["kind"] == "reset_stopped"), "truth": truth[before:],
            "wall_s": time.monotonic() - started}


def short_campaigns(args) -> None:
    from orchestrator.rigs.sim import SimRig

    truth: list[float] = []
    original = SimRig.start_here

    def start_here(self, mark, seed):   # the ground truth where each episode starts
        x, y, _, _ = self.cube_pose()
        truth.append(1000 * math.hypot(x - mark.x, y - mark.y))
        return original(self, mark, seed)

    SimRig.start_here = start_here
    watch_phases()
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.first_seed, args.first_seed + args.seeds):
            folder = Path(tmp) / f"c{i}"
            folder.mkdir()
            runs.append(run_short(folder, i, args.trials, args.max_tries, not args.no_slip_model, truth))
    trials = sum(r["trials"] for r in runs)
    resets = [x for r in runs for x in r["resets"]]
    firsts = [x for r in runs for x in r["resets"][:FIRST_RESETS]]
    by_reset = sum(1 for x in resets if not x["passes"]) + sum(r["stopped"] for r in runs)
    causes: dict[str, int] = {}
    for r in runs:
        for cause, n in r["interventions"].items():
            causes[cause] = causes.get(cause, 0) + n
    once = lambda xs: sum(1 for x in xs if x["passes"] and x["tries"] <= 1)  # noqa: E731
    tries = [x["tries"] for x in resets]
    print(f"{'without' if args.no_slip_model else 'with'} the profile's slip model: {len(runs)} campaigns (seeds from {args.first_seed}) x "
          f"{args.trials} trials = {trials} trials, {len(resets)} resets (max_tries {args.max_tries}), "
          f"{sum(r['wall_s'] for r in runs):.0f} s wall")
    print(f"reset interventions: {by_reset} = {100 * by_reset / trials:.1f} per 100 trials "
          f"(per campaign: {', '.join(str(sum(1 for x in r['resets'] if not x['passes']) + r['stopped']) for r in runs)}); "
          "all interventions by cause: " + ", ".join(f"{c} {n}" for c, n in causes.items()))
    kinds: dict[str, int] = {}
    for r in runs:
        for kind, _ in r["causes"]:
            kinds[kind] = kinds.get(kind, 0) + 1
    print("reset interventions by cause: " + (", ".join(f"{k} {n}" for k, n in sorted(kinds.items())) or "none"))
    for i, r in enumerate(runs, start=args.first_seed):
        for kind, detail in r["causes"]:
            print(f"  campaign {i}: {kind} {detail}")
    print(f"placed within the tolerance by the first put-down: {once(resets)} of {len(resets)} resets; "
          f"of each session's first {FIRST_RESETS}: {once(firsts)} of {len(firsts)}")
    print("placements per reset: " + ", ".join(f"{k}: {tries.count(k)}" for k in sorted(set(tries)))
          + f" (mean {np.mean(tries):.2f})")
    arm = [t for r in runs for t in r["truth"][1:]]   # the first start of each session is the hand's
    print(f"placement error when the episode starts (the arm's resets), ground truth: p50 {np.median(arm):.2f} mm, "
          f"p95 {np.percentile(arm, 95):.2f} mm, max {max(arm):.2f} mm over {len(arm)} starts")


def calibrate(args) -> None:
    """See the module docstring."""
    from orchestrator.design.protocol import Mark, load_protocol
    from orchestrator.rigs.factory import make_rig
    from orchestrator.rigs.profile import load_rig
    from orchestrator.rigs.sim import SimRig
    from orchestrator.run.motion import ArmMotion
    from orchestrator.run.operator_protocol import AutoOperator
    from orchestrator.run.reset import NEAR_M, CubeReset
    from orchestrator.run.start_state import StartGate

    loaded = load_protocol(ROOT / "protocols" / "sim_demo_reset.yaml")
    protocol = dataclasses.replace(loaded, protocol=loaded.protocol.model_copy(
        update={"reset": loaded.protocol.reset.model_copy(update={"max_tries": 1})}))
    marks, cube = protocol.layout.marks, protocol.layout.cube
    with tempfile.TemporaryDirectory() as tmp:
        rig_path = Path(tmp) / "rig.yaml"
        rig_path.write_text(rig_text(0, slip_model=False).rsplit("placement:", 1)[0])
        rig_profile = load_rig(rig_path)

        def simulated() -> SimRig:
            made = make_rig(rig_profile, protocol)
            if not isinstance(made, SimRig):
                raise SystemExit(f"{rig_path}: the reset bench needs the simulated rig")
            return made

        rig = simulated()
        rig.connect()
        draw, rows, skipped = random.Random(args.seed), [], 0

        class Store:
            directory = tmp

            def log_event(self, *a, **k):
                pass

        class Trial:
            slot, seed = 0, 0

        for i in range(args.calibrate):
            target = draw.choice(marks)
            if i % 3 == 2:
                angle, r = draw.uniform(0, 2 * math.pi), draw.uniform(0.006, 0.015)
                start = Mark(id="s", x=target.x + r * math.cos(angle), y=target.y + r * math.sin(angle),
                             yaw_deg=draw.uniform(-20, 20))
            else:
                s = draw.choice([m for m in marks if m.id != target.id])
                start = Mark(id="s", x=s.x + draw.gauss(0, 0.004), y=s.y + draw.gauss(0, 0.004),
                             yaw_deg=draw.uniform(-20, 20))
            operator = AutoOperator(say=lambda line: None)
            gate = StartGate(protocol, rig, Store(), operator, lambda line: None)
            gate.begin_session()
            reset = CubeReset(protocol, rig, gate, ArmMotion(rig, operator), Store(), lambda line: None)
            rig.prepare_layout(marks[0], cube, 0)
            rig.place_cube(start, cube)
            rig.go_to_rest()
            try:
                reset.place(Trial(), target)
            except Exception as e:   # a stopped motion (the cube planted under a jaw): a fresh rig
                print(f"try {i}: {type(e).__name__}: {e}; skipped", file=sys.stderr)
                skipped += 1
                rig = simulated()
                rig.connect()
                continue
            x, y, _, _ = rig.cube_pose()
            kind = "near" if math.hypot(start.x - target.x, start.y - target.y) < NEAR_M else "far"
            rows.append((kind, (start.x, start.y, start.yaw_deg), (target.x, target.y), (x - target.x, y - target.y)))
    fit(rows, skipped)


def fit(rows, skipped: int) -> None:
    """Least squares of the far misses (along: a constant; across: constant, swing, yaw) and the
    median near miss, in the mark's frame (rigs/reset_slip.py); printed as the profile's section."""
    from orchestrator.rigs.reset_slip import ResetSlip, turned_against_radius_deg

    def frame(mark, miss):
        theta = math.atan2(mark[1], mark[0])
        return (1000 * (miss[0] * math.cos(theta) + miss[1] * math.sin(theta)),
                1000 * (-miss[0] * math.sin(theta) + miss[1] * math.cos(theta)))

    far = [(p, m, frame(m, d)) for k, p, m, d in rows if k == "far"]
    near = np.array([frame(m, d) for k, p, m, d in rows if k == "near"])
    x = np.array([[1.0, math.degrees(math.atan2(m[1], m[0]) - math.atan2(p[1], p[0])), turned_against_radius_deg(*p)]
                  for p, m, _ in far])
    along, across = np.array([f[2][0] for f in far]), np.array([f[2][1] for f in far])
    a = float(np.mean(along))
    c, *_ = np.linalg.lstsq(x, across, rcond=None)
    near_median = np.median(near, axis=0)
    slip = ResetSlip(far_mm=(round(a, 2), round(float(c[0]), 2)), across_mm_per_swing_deg=round(float(c[1]), 3),
                     across_mm_per_yaw_deg=round(float(c[2]), 3),
                     near_mm=(round(float(near_median[0]), 2), round(float(near_median[1]), 2)))
    loo_old, loo_new = [], []
    for i in range(len(far)):
        keep = np.arange(len(far)) != i
        ci, *_ = np.linalg.lstsq(x[keep], across[keep], rcond=None)
        loo_new.append(math.hypot(along[i] - along[keep].mean(), across[i] - x[i] @ ci))
        loo_old.append(math.hypot(along[i], across[i]))
    print(f"{len(far)} far and {len(near)} near first tries ({skipped} skipped: a stopped motion)")
    print(f"far, no model: miss p50 {np.median(loo_old):.2f} mm, p95 {np.percentile(loo_old, 95):.2f} mm, "
          f"within 5 mm {np.mean(np.array(loo_old) <= 5):.0%}; along {along.mean():.2f} (sd {along.std():.2f}), "
          f"across {across.mean():.2f} (sd {across.std():.2f}) mm")
    print(f"far, the model's leave-one-out residual: p50 {np.median(loo_new):.2f} mm, p95 {np.percentile(loo_new, 95):.2f} mm, "
          f"within 5 mm {np.mean(np.array(loo_new) <= 5):.0%}")
    print("reset_slip: " + json.dumps(slip.model_dump(exclude={"measured"})))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--first-seed", type=int, default=0, help="copy i's seeds from here (another seed set)")
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--max-tries", type=int, default=3)
    parser.add_argument("--no-slip-model", action="store_true", help="without the rig profile's reset_slip")
    parser.add_argument("--calibrate", type=int, default=0, metavar="N", help="instead: measure N first tries, fit the model")
    parser.add_argument("--seed", type=int, default=11, help="--calibrate's draws")
    args = parser.parse_args()
    if args.calibrate:
        calibrate(args)
    else:
        short_campaigns(args)


if __name__ == "__main__":
    main()
