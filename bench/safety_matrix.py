"""A fault at every point: the whole matrix of events x phases x on_stop on the twin.

Each run is a short twin campaign (two 1 s trials at 30 Hz, scripted policies, an operator who
stops the first episode once and confirms every move after 0.2 s) with one event injected just
before the N-th bus transaction; N is spread over each phase of a run without the event
(`--points` per phase). After each run the invariants are checked on the wire and on the twin's
own state (tests/support/safety_matrix.py says which). Prints the table (events x phases: `ok`,
or `F<n>` failed runs), every violation, the worst stop-to-hold latency and a summary line.
The reset's phases (reset_pick, reset_carry, reset_place: the arm putting the cube on the next mark,
`reset: auto`) run in a campaign of their own with the start check and the reset on, and each
after_* phase (the first motion after a session that ended by SIGTERM, SIGHUP or kill -9) in a
campaign whose first session ended so (`--sample` then samples each group); scripted policies only. `--policy rtc` runs both policies as a tiny SmolVLA (saved once by a separate interpreter) under
LeRobot's RTC engine, with the two invariants of asynchronous inference on top
(tests/support/safety_matrix_rtc.py: nothing computed before a stop is sent after it; LeRobot's
inference thread joined on every way out).

    uv run python bench/safety_matrix.py [--points 1] [--events alarm:elbow_flex,ctrl_c]
                                         [--on-stop hold,release] [--sample N --seed S]
                                         [--policy sync|rtc] [--phases episode,stop,...]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MUJOCO_GL", "egl")


def main() -> int:
    import logging

    from support import safety_matrix as sm

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=1, help="packet numbers per phase (default 1: the middle)")
    parser.add_argument("--events", default=",".join(sm.EVENTS))
    parser.add_argument("--on-stop", default="hold,release")
    parser.add_argument("--sample", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--policy", choices=("sync", "rtc"), default="sync",
                        help="sync: scripted policies (default); rtc: the tiny SmolVLA under LeRobot's RTC engine")
    parser.add_argument("--phases", default=",".join(sm.PHASES), help=f"of {', '.join(sm.PHASES)}")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="safety-matrix-vla-") as models:
        checkpoint = None
        if args.policy == "rtc":
            from support import safety_matrix_rtc

            checkpoint = safety_matrix_rtc.checkpoint(Path(models))
        outcomes = run_all(sm, args, checkpoint)
    print()
    for line in sm.table(outcomes):
        print(line)
    print(f"wall time {time.perf_counter() - started:.0f} s")
    return 1 if any(o.violations for o in outcomes) else 0


def run_all(sm, args, checkpoint):
    import pytest

    phases_run = tuple(args.phases.split(","))
    options = {"events": tuple(args.events.split(",")), "on_stops": tuple(args.on_stop.split(",")),
               "sample": args.sample, "seed": args.seed, "policy": args.policy}
    todo = []
    plain = tuple(p for p in phases_run if p not in sm.RESET_PHASES and p not in sm.AFTER_PHASES)
    if plain:
        spans = _spans(sm, pytest, policy=args.policy, checkpoint=checkpoint)
        print("packets per phase in a run without an event: "
              + ", ".join(f"{p} {len(spans.get(p, []))}" for p in plain if p != "hold"), flush=True)
        todo += sm.cases(spans, args.points, phases_run=plain, **options)
    resets = tuple(p for p in phases_run if p in sm.RESET_PHASES)
    if resets and args.policy == "sync":   # the reset's campaign, measured on its own
        spans = _spans(sm, pytest, reset=True)
        print("packets of the reset's phases in a reset run without an event: "
              + ", ".join(f"{p} {len(spans.get(p, []))}" for p in resets), flush=True)
        todo += sm.cases(spans, args.points, phases_run=resets, **options)
    for after in (p for p in phases_run if p in sm.AFTER_PHASES):   # a first session ended that way
        spans = _spans(sm, pytest, after=after)
        print(f"packets of {after} in a run without an event: {len(spans.get(after, []))}", flush=True)
        todo += sm.cases(spans, args.points, phases_run=(after,), **options)
    outcomes = []
    for i, case in enumerate(todo, 1):
        with tempfile.TemporaryDirectory(prefix="safety-matrix-") as tmp, pytest.MonkeyPatch.context() as mp:
            _, _, outcome = sm.run_case(case, Path(tmp), mp, checkpoint=checkpoint)
        outcomes.append(outcome)
        mark = "ok" if not outcome.violations else "FAIL " + "; ".join(outcome.violations)
        lat = f" latency {1000 * outcome.latency_s:.0f} ms" if outcome.latency_s is not None else ""
        hold = f" fault-to-hold {1000 * outcome.fault_to_hold_s:.0f} ms" if outcome.fault_to_hold_s is not None else ""
        print(f"[{i}/{len(todo)}] {case.name}: {mark} ({outcome.note}, {outcome.seconds:.1f} s{lat}{hold})", flush=True)
    return outcomes


def _spans(sm, pytest, **options):
    with tempfile.TemporaryDirectory(prefix="safety-matrix-") as tmp, pytest.MonkeyPatch.context() as mp:
        return sm.phases(Path(tmp) / "base", mp, **options)


if __name__ == "__main__":
    sys.exit(main())
