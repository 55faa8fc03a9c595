"""The wrist camera's measurement of the cube in the jaws (`vision.wrist_cube.measure_in_jaws`)
against the simulator's truth.

The same scripted picks as `bench/camera_lift.py` (its `plan` and `render`: grid20's marks, aim noise 4 mm,
grasp-point lifts of 36-50 mm, half released at 6.8-7.6 s, the headlight's ambient and diffuse
light jittered +-25 % per episode), rendered by the wrist camera at 15 fps at the size asked (the
shipped 320x240 of hardware/sim.yaml), through the recorder's H.264 encode and back. Every frame
with the jaws closed on the cube is fitted. Truth per frame: the cube's pose from the simulator
(its bottom: the lowest corner; its centre in the gripper's frame by the joints' forward
kinematics). Printed: per episode and over all, the bottom's error on frames held with the true
bottom at least 2 cm up (p50/p95/max of |error|), and the *slip*: the cube centre's move along the
gripper's axis since the first such frame, measured against true (p50/p95/max of |error|), and the
CPU seconds per fitted frame. `--frames DIR` keeps the rendered episodes and reads them back.

    MUJOCO_GL=egl uv run python bench/wrist_lift.py [--episodes 16] [--seed 1] [--size 320x240] [--frames DIR]
        [--fit-scale 0.5] [--dump FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def _symmetries() -> list[np.ndarray]:
    """The cube's 24 rotations onto itself (signed permutation matrices of determinant +1)."""
    from itertools import permutations, product

    out = []
    for perm in permutations(range(3)):
        for signs in product((1.0, -1.0), repeat=3):
            g = np.zeros((3, 3))
            g[range(3), perm] = signs
            if np.linalg.det(g) > 0:
                out.append(g)
    return out


CUBE_SYMMETRIES = _symmetries()


def measured(result: dict) -> dict:
    """The wrist camera's track of a rendered pick against its truth (module docstring)."""
    from camera_lift import decode

    from orchestrator.sim import fk
    from orchestrator.vision.lift import Joints
    from orchestrator.vision.wrist_cube import measure_in_jaws

    frames = decode(result["video"].tobytes())
    steps = np.clip(np.searchsorted(result["t"], result["frame_t"] + 1e-6, "right") - 1, 0, len(result["t"]) - 1)
    points, rotations, closed = Joints(result["t"], result["state"], result["action"]).at(result["frame_t"],
                                                                                          float(result["cube"]))
    started = time.process_time()
    track = measure_in_jaws(frames, result["frame_t"], result["state"][steps], closed, float(result["cube"]))
    cpu = time.process_time() - started
    mat = np.asarray(result["cube_mat"]).reshape(-1, 3, 3)
    half = float(result["cube"]) / 2
    truth = result["cube_pos"][:, 2] - half * np.abs(mat[:, 2, :]).sum(axis=1)
    origin = points - np.einsum("kij,j->ki", rotations, np.asarray(fk.GRASP_SITE))
    true_centre = np.einsum("kji,kj->ki", rotations, result["cube_pos"] - origin)   # in the gripper frame
    up = track.visible & (truth >= 0.02)
    slip, true_slip = np.full(len(truth), np.nan), np.full(len(truth), np.nan)
    if up.any():
        first = int(np.flatnonzero(up)[0])
        slip[up] = track.centre_g[up, 2] - track.centre_g[first, 2]
        true_slip[up] = true_centre[up, 2] - true_centre[first, 2]
    true_turn = np.full((len(truth), 3), np.nan)    # the true cube's turn since the squeeze's first frame
    if closed.any():
        import cv2

        from orchestrator.vision.wrist_cube import start_pose

        first = int(np.flatnonzero(closed)[0])
        prior = start_pose(rotations[first])[1]
        in_g = np.einsum("kji,kjl->kil", rotations, mat)    # the cube's rotation in the gripper frame
        for k in np.flatnonzero(closed):                    # the cube's turn from the prior's, up to its symmetries
            turns = [cv2.Rodrigues(in_g[k] @ g @ prior.T)[0].ravel() for g in CUBE_SYMMETRIES]
            true_turn[k] = np.degrees(min(turns, key=np.linalg.norm))
    n = int(up.sum())
    turn_deg = track.turn_deg if track.turn_deg is not None else np.full((len(truth), 3), np.nan)
    mismatch = track.mismatch if track.mismatch is not None else np.full(len(truth), np.nan)
    return {"bottom": (track.bottom_m - truth)[up], "slip": (slip - true_slip)[up], "frames": int(closed.sum()),
            "dump": [{"t": float(result["frame_t"][k]), "error_mm": 1000 * float(track.bottom_m[k] - truth[k]),
                      "mismatch": float(mismatch[k]), "turn_deg": [float(v) for v in turn_deg[k]],
                      "true_turn_deg": [float(v) for v in true_turn[k]]} for k in np.flatnonzero(up)][:n],
            "measured": int(track.visible.sum()), "cpu": cpu, "lift": float(result["max_lift"]),
            "hold": float(result["hold"]), "max_slip": float(np.nanmax(np.abs(true_slip), initial=0.0))}


def figures(values: list[float]) -> str:
    """|error| p50, p95, max and the signed range (measured - true), mm."""
    signed = 1000 * np.asarray(values, float)
    a = np.abs(signed)
    return (f"p50 {np.percentile(a, 50):.2f}, p95 {np.percentile(a, 95):.2f}, max {a.max():.2f} mm (measured - true "
            f"{signed.min():+.2f} to {signed.max():+.2f})") if len(a) else "none"


def main() -> None:
    from camera_lift import plan, render

    from orchestrator.design.protocol import load_protocol

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--size", default="320x240")
    parser.add_argument("--frames", type=Path, help="keep the rendered episodes here and read them back next time")
    parser.add_argument("--fit-scale", type=float, help="fit on the frame resized by this (default: "
                                                             "vision.wrist_cube.SCALE)")
    parser.add_argument("--dump", type=Path, help="write each frame held >= 2 cm up (error, the fit's mismatch and turn) "
                                                  "here, one JSON line per episode")
    args = parser.parse_args()
    size = (int(args.size.split("x")[0]), int(args.size.split("x")[1]))
    if args.fit_scale is not None:
        from orchestrator.vision import wrist_cube

        wrist_cube.SCALE = args.fit_scale  # the bench sets the module's constant: the rater has no knob for it
    marks = len(load_protocol(ROOT / "protocols" / "sim_near.yaml").layout.marks)
    rng = np.random.default_rng(args.seed)
    bottoms, slips, cpu, fitted = [], [], 0.0, 0
    for index in range(args.episodes):
        drawn = plan(index, rng, True, marks)
        path = None if args.frames is None else args.frames / f"{args.size}-seed{args.seed}-{index:03d}.npz"
        if path is not None and path.is_file():
            with np.load(path) as stored:
                result = {key: stored[key] for key in stored.files}
        else:
            result = render(drawn, size, camera="wrist")
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
                np.savez(path, **result)
        out = measured(result)
        if args.dump is not None:
            with args.dump.open("a") as dump:
                dump.write(json.dumps({"seed": args.seed, "episode": index, "lift": out["lift"], "frames": out["dump"]}) + "\n")
        bottoms.extend(out["bottom"])
        slips.extend(out["slip"])
        cpu, fitted = cpu + out["cpu"], fitted + out["frames"]
        print(f"{args.size} episode {index}: lift {1000 * out['lift']:.1f} mm, hold {out['hold']:.2f} s; measured "
              f"{out['measured']} of {out['frames']} held frames; bottom error {figures(out['bottom'])}; slip "
              f"error {figures(out['slip'])} (true slip up to {1000 * out['max_slip']:.2f} mm)", flush=True)
    print(f"{args.size}: {args.episodes} episodes, {len(bottoms)} frames held >= 2 cm up: bottom error "
          f"{figures(bottoms)}; slip error {figures(slips)}; {cpu / max(fitted, 1) * 1000:.1f} ms of CPU per fitted "
          f"frame", flush=True)


if __name__ == "__main__":
    main()
