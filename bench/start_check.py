"""The start-state check measured on rendered scenes (the simulator's and the twin's front camera).

    MUJOCO_GL=egl uv run python bench/start_check.py [--placements 300] [--moves 40] [--seed 0]

For each shipped front-camera resolution (320x240: hardware/sim.yaml and hardware/so101_twin.yaml;
640x480: hardware/so101.example.yaml) it renders `--placements` cubes on grid20's marks with an
offset of 0-20 mm in a random direction and a yaw of 0-30 degrees (every other one within half
the tolerance, so the false-fail share is measured on enough placements), under lighting jitter (the
headlight at 80-120 %) and camera-pose jitter (up to 0.5 mm and 0.1 degree, below the moved-camera
limits), locates the table in each image from the fiducials and measures the cube
(`vision.start_check.check_start`, default tolerance 5 mm / 10 degrees). It prints the position
and yaw errors against the simulator's ground truth (p50, p95), the share of placements off by
at least twice the tolerance that pass (goal: none) and the share within half the tolerance that
fail (goal: at most 1 %); then `--moves` cameras moved 5 mm (random direction) or turned 1
degree (random axis) after the reference: the share detected (goal: all), and the same cameras
unmoved (false alarms).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))


def _unit(rng) -> tuple[float, float, float]:
    v = rng.normal(size=3)
    return tuple(v / np.linalg.norm(v))


def placements(size, n, rng, layout, tolerance_mm, tolerance_deg):
    from orchestrator.design.raster import sheet_corners
    from orchestrator.vision.start_check import check_start
    from orchestrator.vision.table import locate_table
    from support.front_scene import Planted, front_intrinsics, render_front

    intrinsics = front_intrinsics(size)
    errors, should_pass, should_fail, false_pass, false_fail = [], 0, 0, 0, 0
    started = time.perf_counter()
    for i in range(n):
        mark = layout.marks[rng.integers(len(layout.marks))]
        near = i % 2 == 1   # every other placement within half the tolerance: the false-fail rate needs them
        radius = rng.uniform(0, tolerance_mm / 2 if near else 20)
        angle = rng.uniform(0, 2 * math.pi)
        dx, dy = radius * math.cos(angle), radius * math.sin(angle)
        dyaw = rng.uniform(0, tolerance_deg / 2 if near else 30) * rng.choice((-1, 1))
        planted = Planted(cube=(mark.x + dx / 1000, mark.y + dy / 1000, mark.yaw_deg + dyaw),
                          light=rng.uniform(0.8, 1.2),
                          camera_shift_m=tuple(np.asarray(_unit(rng)) * rng.uniform(0, 0.0005)),
                          camera_turn_deg=rng.uniform(0, 0.1), camera_turn_axis=_unit(rng))
        image = render_front(planted, size)
        view = locate_table(image, intrinsics)
        result = check_start(image, view, mark, layout, tolerance_mm=tolerance_mm, tolerance_deg=tolerance_deg,
                             sheet=sheet_corners())
        if result.dx_mm is not None:
            errors.append((math.hypot(result.dx_mm - dx, result.dy_mm - dy),
                           abs(((result.dyaw_deg - dyaw) + 45) % 90 - 45)))
        if radius <= tolerance_mm / 2 and abs(dyaw) <= tolerance_deg / 2:
            should_pass += 1
            false_fail += not result.passes
        if radius >= 2 * tolerance_mm or abs(dyaw) >= 2 * tolerance_deg:
            should_fail += 1
            false_pass += result.passes
    elapsed = time.perf_counter() - started
    e = np.array(errors)
    return {"n": n, "measured": len(e), "pos_p50": np.percentile(e[:, 0], 50), "pos_p95": np.percentile(e[:, 0], 95),
            "yaw_p50": np.percentile(e[:, 1], 50), "yaw_p95": np.percentile(e[:, 1], 95),
            "should_pass": should_pass, "false_fail": false_fail, "should_fail": should_fail,
            "false_pass": false_pass, "s_per_placement": elapsed / n}


def moves(size, n, rng, layout):
    from orchestrator.vision.start_check import camera_moved
    from orchestrator.vision.table import locate_table
    from support.front_scene import Planted, front_intrinsics, render_front

    intrinsics = front_intrinsics(size)
    reference = locate_table(render_front(Planted(cube=None), size), intrinsics)
    detected_shift = detected_turn = false_alarm = 0
    for _ in range(n):
        mark = layout.marks[rng.integers(len(layout.marks))]
        cube = (mark.x, mark.y, mark.yaw_deg)
        light = rng.uniform(0.8, 1.2)
        shifted = Planted(cube=cube, light=light, camera_shift_m=tuple(0.005 * np.asarray(_unit(rng))))
        turned = Planted(cube=cube, light=light, camera_turn_deg=1.0, camera_turn_axis=_unit(rng))
        still = Planted(cube=cube, light=light)
        detected_shift += camera_moved(reference, locate_table(render_front(shifted, size), intrinsics)) is not None
        detected_turn += camera_moved(reference, locate_table(render_front(turned, size), intrinsics)) is not None
        false_alarm += camera_moved(reference, locate_table(render_front(still, size), intrinsics)) is not None
    return {"n": n, "shift": detected_shift, "turn": detected_turn, "false_alarm": false_alarm}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--placements", type=int, default=300)
    parser.add_argument("--moves", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    from orchestrator.design.protocol import load_layout
    from orchestrator.vision.start_check import DEFAULT_TOLERANCE_DEG, DEFAULT_TOLERANCE_MM

    layout, _ = load_layout(ROOT / "layouts" / "grid20.yaml")
    for size in ((320, 240), (640, 480)):
        rng = np.random.default_rng(args.seed)
        p = placements(size, args.placements, rng, layout, DEFAULT_TOLERANCE_MM, DEFAULT_TOLERANCE_DEG)
        print(f"{size[0]}x{size[1]}: {p['n']} placements (0-20 mm, 0-30 degrees, light and camera jitter), "
              f"{p['measured']} measured; position error p50 {p['pos_p50']:.2f} mm, p95 {p['pos_p95']:.2f} mm; "
              f"yaw error p50 {p['yaw_p50']:.2f}, p95 {p['yaw_p95']:.2f} degrees; "
              f"off by >= 2x the tolerance that passed: {p['false_pass']} of {p['should_fail']}; "
              f"within half the tolerance that failed: {p['false_fail']} of {p['should_pass']} "
              f"({100 * p['false_fail'] / max(1, p['should_pass']):.1f} %); {p['s_per_placement'] * 1000:.0f} ms "
              "a placement (render + locate + measure)", flush=True)
        m = moves(size, args.moves, rng, layout)
        print(f"{size[0]}x{size[1]}: camera moved 5 mm detected {m['shift']} of {m['n']}, turned 1 degree "
              f"detected {m['turn']} of {m['n']}; unmoved reported as moved {m['false_alarm']} of {m['n']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
