"""The wrist camera's geometry measured from the sheet (`vision.wrist_calibration.calibrate_wrist`)
against the simulated SO-101's model (`vision.wrist_geometry.model_geometry`: the mount and the
field of view MuJoCo renders with).

Per seed: `--views` arm poses over the sheet (`sim.calibration_poses.calibration_poses`), the
wrist camera's frames rendered by MuJoCo at `--size`, the joints exact (the simulator's), then the
geometry solved twice: with the model's intrinsics given (the mount alone) and with the intrinsics
calibrated from the same views. Printed per seed and as the maximum over seeds: the mount's
position error (mm), its rotation error (degrees), the focal length's error (%), the principal
point's (px), the refined chain's reprojection RMS (px) and the seconds of the solve.

    MUJOCO_GL=egl uv run python bench/wrist_calibration.py [--seeds 5] [--views 12] [--size 320x240]
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


def errors(found, truth) -> dict[str, float]:
    import cv2

    g = found.geometry
    turn = math.degrees(float(np.linalg.norm(cv2.Rodrigues(g.rotation @ truth.rotation.T)[0])))
    return {"mount_mm": 1000.0 * float(np.linalg.norm(g.position - truth.position)), "turn_deg": turn,
            "f_pct": 100.0 * abs(g.f_px / truth.f_px - 1.0),
            "centre_px": float(np.linalg.norm(g.matrix[:2, 2] - truth.matrix[:2, 2])),
            "rms_px": found.reprojection_px}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--views", type=int, default=12)
    parser.add_argument("--size", default="320x240")
    args = parser.parse_args()
    from orchestrator.sim.calibration_poses import calibration_poses, render_wrist_views
    from orchestrator.vision.wrist_calibration import View, calibrate_wrist
    from orchestrator.vision.wrist_geometry import model_geometry

    width, height = map(int, args.size.split("x"))
    truth = model_geometry(width, height)
    worst: dict[str, dict[str, float]] = {"known": {}, "calibrated": {}}
    for seed in range(args.seeds):
        poses = calibration_poses(args.views, seed)
        views = [View(q, image) for q, image in zip(poses, render_wrist_views(poses, width, height), strict=True)]
        for name, given in (("known", truth), ("calibrated", None)):
            started = time.process_time()
            found = calibrate_wrist(views, given)
            row = {**errors(found, truth), "cpu_s": time.process_time() - started}
            print(f"seed {seed} {name:10s} views {found.views_used}/{len(views)} "
                  + " ".join(f"{k} {v:.3f}" for k, v in row.items()), flush=True)
            for k, v in row.items():
                worst[name][k] = max(worst[name].get(k, 0.0), v)
    for name, row in worst.items():
        print(f"max over {args.seeds} seeds, intrinsics {name}: " + " ".join(f"{k} {v:.3f}" for k, v in row.items()))


if __name__ == "__main__":
    main()
