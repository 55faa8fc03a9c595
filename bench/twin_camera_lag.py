"""The twin camera's lag above its configured latency: the distribution behind the bound in
tests/test_twin_camera.py (`test_read_latest_peeks_and_frames_arrive_latency_ms_after_exposure`).

A twin with `camera_latency_ms: 120` (hardware/so101_twin.yaml's cameras, 320x240 at 30 fps) and
its front camera through `TwinCamera` (LeRobot's OpenCVCamera semantics), as the test builds them;
each `async_read` takes the next frame, and its lag is when it arrived (`latest_timestamp`) minus
when it was rendered (`latest_exposure`), both CLOCK_MONOTONIC, minus the configured 120 ms. The
delay line holds a frame until exposure + latency, so the lag above it is the read thread's
wake-up late: what the machine's load adds. Prints its p50, p99 and max, and the load average.

Usage: `MUJOCO_GL=egl uv run --all-extras python bench/twin_camera_lag.py [--frames 600]`
(run it where the tests run: under `nice -n 10` beside other work, as the test is).
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
LATENCY_MS = 120


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=600)
    args = parser.parse_args()

    from orchestrator.rigs.profile import load_rig
    from orchestrator.rigs.twin.client import start_twin
    from orchestrator.rigs.twin.twincamera import TwinCamera, TwinCameraConfig

    text = (ROOT / "hardware" / "so101_twin.yaml").read_text()
    assert "twin: {seed: 0, faults: []}" in text
    with tempfile.TemporaryDirectory() as folder:
        rig = Path(folder) / "rig.yaml"
        rig.write_text(text.replace("twin: {seed: 0, faults: []}",
                                    f"twin: {{seed: 0, faults: [], camera_latency_ms: {LATENCY_MS}}}"))
        with start_twin(load_rig(rig)) as twin:
            spec = twin.rig.profile.cameras["front"]
            extra = spec.model_dump()
            cam = TwinCamera(TwinCameraConfig(index_or_path=extra["index_or_path"], fps=spec.fps, width=spec.width,
                                              height=spec.height, latency_ms=extra["latency_ms"]))
            cam.connect()
            try:
                lags = []
                for _ in range(args.frames):
                    cam.async_read(timeout_ms=1000)
                    shown, exposed = cam.latest_timestamp, cam.latest_exposure
                    if shown is None or exposed is None:
                        raise RuntimeError("the twin camera returned a frame with no timestamps")
                    lags.append(shown - exposed - LATENCY_MS / 1000)
            finally:
                cam.disconnect()
    ms = 1000 * np.asarray(lags)
    load = os.getloadavg()
    print(f"camera lag above {LATENCY_MS} ms, {len(ms)} frames at {spec.fps} fps ({spec.width}x{spec.height}): "
          f"min {ms.min():.1f} ms, p50 {np.percentile(ms, 50):.1f} ms, p99 {np.percentile(ms, 99):.1f} ms, "
          f"max {ms.max():.1f} ms; load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")


if __name__ == "__main__":
    main()
