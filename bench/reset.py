"""The autonomous reset measured on the simulated SO-101 (`reset: {mode: auto}`).

    MUJOCO_GL=egl uv run python bench/reset.py [--campaigns 2] [--max-tries 3] [--act] [--twin TRIALS]

Runs `--campaigns` copies of the demo with the reset (protocols/sim_demo_reset.yaml: 20 marks x
2 scripted policies, one near 100 % and one near 50 % success; each copy with its own schedule
seed) in process, one episode at a time, and prints:
- operator interventions per 100 trials, by cause (the report's count; goal: at most 5);
- resets: how many, how many tries each took (0: the cube a success left in the jaws was put
  straight on the next mark and measured there), how many were handed over and why;
- time per reset (median, p95): the arm's own time (control steps / fps, what a real arm would
  take) and this machine's wall time;
- the placement error after each reset against the simulator's ground truth (the cube's true
  centre against its mark when the episode starts; p50, p95) and as the camera measured it.
`--twin TRIALS`: the same demo on the wire-level twin instead (`orchestrator run --twin
--unattended`, LeRobot's driver stack, real time), its figures from the store.
`--act`: policy B is a LeRobot ACT checkpoint (a tiny random-weight one, built here offline, as
the tests build theirs): its episodes push the cube anywhere, and the reset must find it there.
The reset on the twin under the console: tests/test_twin_reset.py.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def tiny_act(folder: Path) -> Path:
    """A random-weight ACT for the simulated rig's cameras (tests/support/act.py)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from orchestrator.rigs.profile import load_rig
    from support.act import make_act_checkpoint

    cameras = {name: (c.height, c.width) for name, c in load_rig(ROOT / "hardware" / "sim.yaml").profile.cameras.items()}
    return make_act_checkpoint(folder / "act", cameras, chunk_size=10)


def protocol_text(seed: int, max_tries: int, act: Path | None = None) -> str:
    text = (ROOT / "protocols" / "sim_demo_reset.yaml").read_text()
    text = text.replace("seed: 20261129", f"seed: {seed}").replace("max_tries: 3", f"max_tries: {max_tries}")
    text = text.replace("layout: ../layouts/grid20.yaml", f"layout: {ROOT / 'layouts' / 'grid20.yaml'}")
    if act is not None:
        text = text.replace("  B: {type: scripted, aim_noise_mm: 12}", f"  B: {{type: lerobot, path: {act}}}")
    return text


def run_twin(folder: Path, trials: int, max_tries: int, act: Path | None = None) -> None:
    """`orchestrator run --twin --unattended` of the demo with the reset (LeRobot's driver stack,
    the twin's 320x240 front camera, real time), `trials` trials; prints the same figures from
    its store (no ground truth here: the camera's measurements only)."""
    import subprocess

    from orchestrator.analysis.start_records import intervention_counts, per_100_trials
    from orchestrator.store.sqlite import CampaignStore

    protocol = folder / "protocol.yaml"
    protocol.write_text(protocol_text(20261129, max_tries, act))
    out = folder / "campaign"
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "orchestrator", "run", str(protocol), "--rig",
                           str(ROOT / "hardware" / "so101_twin.yaml"), "--twin", "--unattended", "--out", str(out),
                           "--stop-after", str(trials)], capture_output=True, text=True)
    wall = time.monotonic() - started
    if done.returncode != 0:
        sys.exit(f"reset bench: the twin campaign failed (exit {done.returncode}): {done.stderr.strip()[-600:]}")
    with CampaignStore.open_readonly(out) as store:
        events, attempts, n = store.events(), store.attempts(), len(store.episodes())
    resets = [json.loads(e["data"]) for e in events if e["kind"] == "cube_reset"]
    counts = intervention_counts(events, attempts)
    tries = [r["tries"] for r in resets]
    seconds = [r["seconds"] for r in resets if r["tries"] > 0]
    offsets = [r["offset_mm"] for r in resets if r["passes"]]
    print(("policy B: a tiny LeRobot ACT; " if act else "") + f"twin: {n} trials, {len(resets)} resets (max_tries {max_tries}), {wall:.0f} s wall")
    print(f"interventions: {sum(counts.values())} = {per_100_trials(sum(counts.values()), n)} per 100 trials; by cause: "
          + ", ".join(f"{c} {k}" for c, k in counts.items()))
    print("tries per reset: " + ", ".join(f"{k}: {tries.count(k)}" for k in sorted(set(tries)))
          + f"; from the jaws: {sum(1 for r in resets if r.get('from_hand'))}; handed over: "
          + str(sum(1 for r in resets if not r["passes"])))
    if seconds:
        print(f"time per reset that picked (wall, real time on the twin): p50 {np.median(seconds):.1f} s, "
              f"p95 {np.percentile(seconds, 95):.1f} s")
    if offsets:
        print(f"placement error after the reset, as the camera measured it: p50 {np.median(offsets):.2f} mm, "
              f"p95 {np.percentile(offsets, 95):.2f} mm over {len(offsets)} resets")


def run_one(folder: Path, seed: int, max_tries: int, act: Path | None = None) -> dict:
    from orchestrator.analysis.start_records import intervention_counts
    from orchestrator.run.campaign import open_campaign
    from orchestrator.run.sequential import run_campaign

    protocol = folder / "protocol.yaml"
    protocol.write_text(protocol_text(seed, max_tries, act))
    opened = open_campaign(protocol, ROOT / "hardware" / "sim.yaml", folder / "campaign")
    started = time.monotonic()
    try:
        summary = run_campaign(opened, workers=1, say=lambda line: None)
        events, attempts = opened.store.events(), opened.store.attempts()
    finally:
        opened.store.close()
    resets = [json.loads(e["data"]) for e in events if e["kind"] == "cube_reset"]
    return {"trials": summary.done_total, "interventions": intervention_counts(events, attempts), "resets": resets,
            "wall_s": time.monotonic() - started}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--campaigns", type=int, default=2)
    parser.add_argument("--max-tries", type=int, default=3)
    parser.add_argument("--act", action="store_true", help="policy B: a tiny LeRobot ACT checkpoint")
    parser.add_argument("--twin", type=int, default=None, metavar="TRIALS",
                        help="instead: TRIALS trials on the wire-level twin (orchestrator run --twin --unattended)")
    args = parser.parse_args()
    if args.twin is not None:
        with tempfile.TemporaryDirectory() as tmp:
            run_twin(Path(tmp), args.twin, args.max_tries, tiny_act(Path(tmp)) if args.act else None)
        return
    from orchestrator.policies import pick_place
    from orchestrator.rigs.sim import SimRig

    truth: list[float] = []
    arm_steps: list[int] = []
    original_start, original_path, original_held = (SimRig.start_here, pick_place.pick_and_place_path,
                                                    pick_place.place_held_path)
    held_steps: list[int] = []

    def start_here(self, mark, seed):   # the ground truth where the episode starts
        x, y, _, _ = self.cube_pose()
        truth.append(1000 * math.hypot(x - mark.x, y - mark.y))
        return original_start(self, mark, seed)

    def path(*a, **k):
        rows = original_path(*a, **k)
        arm_steps.append(len(rows))
        return rows

    def held(*a, **k):
        rows = original_held(*a, **k)
        held_steps.append(0 if rows is None else len(rows))
        return rows

    SimRig.start_here, pick_place.pick_and_place_path, pick_place.place_held_path = start_here, path, held
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        act = tiny_act(Path(tmp)) if args.act else None
        for i in range(args.campaigns):
            folder = Path(tmp) / f"c{i}"
            folder.mkdir()
            runs.append(run_one(folder, 20261129 + i, args.max_tries, act))
    trials = sum(r["trials"] for r in runs)
    causes: dict[str, int] = {}
    for r in runs:
        for cause, n in r["interventions"].items():
            causes[cause] = causes.get(cause, 0) + n
    total = sum(causes.values())
    resets = [x for r in runs for x in r["resets"]]
    tries = [x["tries"] for x in resets]
    handed = [x["why"] for x in resets if not x["passes"]]
    wall = [x["seconds"] for x in resets]
    fps = 30
    arm_s = [n / fps for n in arm_steps]
    measured = [x["offset_mm"] for x in resets if x["passes"]]
    print(("policy B: a tiny LeRobot ACT; " if args.act else "") + f"{len(runs)} campaigns, {trials} trials, {len(resets)} resets (max_tries {args.max_tries}), "
          f"{sum(r['wall_s'] for r in runs):.0f} s wall")
    print(f"interventions: {total} = {100 * total / trials:.1f} per 100 trials; by cause: "
          + ", ".join(f"{c} {n}" for c, n in causes.items()))
    from_hand = [x for x in resets if x.get("from_hand")]
    print(f"cubes still in the jaws after an episode, put straight on the next mark: {len(held_steps)} "
          f"(arm motion {np.median(held_steps) / fps if held_steps else 0:.1f} s each); measured there within the "
          f"tolerance at once: {sum(1 for x in from_hand if x['tries'] == 0)}, picked again: "
          f"{sum(1 for x in from_hand if x['tries'] > 0)}")
    print("tries per reset: " + ", ".join(f"{k}: {tries.count(k)}" for k in sorted(set(tries)))
          + f"; handed over: {len(handed)}" + (f" ({'; '.join(handed)})" if handed else ""))
    print(f"time per reset: arm {np.median(arm_s) * max(1, np.median(tries)):.1f} s median per try x tries "
          f"(a try is {np.median(arm_s):.1f} s of arm motion at {fps} Hz plus the move to rest); "
          f"this machine's wall time p50 {np.median(wall):.2f} s, p95 {np.percentile(wall, 95):.2f} s")
    print(f"placement error after the reset, ground truth: p50 {np.median(truth):.2f} mm, "
          f"p95 {np.percentile(truth, 95):.2f} mm over {len(truth)} starts; as the camera measured it: "
          f"p50 {np.median(measured):.2f} mm, p95 {np.percentile(measured, 95):.2f} mm")


if __name__ == "__main__":
    main()
