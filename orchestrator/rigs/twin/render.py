"""The twin's camera process: renders the scene the physics process shares, at each camera's fps.

`python -m orchestrator.rigs.twin.render CONFIG_JSON`, started by the twin process (`server.py`).
Rendering is the twin's heavy work (~5-10 ms a frame with llvmpipe); in its own process, at a
lower priority than the servos, it never delays their answers on the bus, which LeRobot's serial
timeouts (~34 ms for a write) do not forgive. Like a real camera (its own hardware), it should
not slow down when the host is busy: where it may, it takes a real-time round-robin priority
below the servos' (`RENDER_PRIORITY` < `server.REALTIME_PRIORITY`); a busy 2-core machine had
taken an ordinary renderer to 12.9 of 15 fps, under the preflight's 90 % frame-rate check.
Otherwise (no permission) it runs as an ordinary process at nice `NICENESS`, below the servos. It reads `qpos` from the shared `SceneState`, renders each
camera at `render_width x render_height` into its `FrameWriter`, and applies each camera's
fault state (frozen: no new frames; disconnected; slow: a lower frame rate). It exits when stdin closes or its parent
changes.
"""

from __future__ import annotations

import json
import os
import select
import sys
import time
from pathlib import Path

from orchestrator.rigs.twin.shared_frames import DISCONNECTED, LIVE, FrameWriter, SceneState

NICENESS = 5
RENDER_PRIORITY = 5        # below server.REALTIME_PRIORITY (10): a servo reply preempts a render


def take_priority() -> str:
    """A real-time priority below the servos' where the process may take one, else nice
    `NICENESS`; returns which ("realtime" or "nice 5")."""
    try:
        os.sched_setscheduler(0, os.SCHED_RR, os.sched_param(RENDER_PRIORITY))
        return "realtime"
    except (PermissionError, AttributeError, OSError):
        pass
    try:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    except (AttributeError, OSError):
        pass
    try:
        os.setpriority(os.PRIO_PROCESS, 0, NICENESS)
    except OSError:
        pass
    return f"nice {NICENESS}"


def main(argv: list[str]) -> int:
    config = json.loads(argv[0])
    parent = os.getppid()
    priority = take_priority()
    from orchestrator.sim.scene import build_scene, mujoco

    cube = config.get("cube") or {}
    model = build_scene(cube.get("size_m", 0.03), cube.get("mass_kg", 0.03),
                        offscreen_size=(640, 480))
    data = mujoco.MjData(model)
    frames_dir = Path(config["frames_dir"])
    cams = config["cameras"]
    names = list(cams)
    state = SceneState(frames_dir / "state.bin")
    writers = {n: FrameWriter(frames_dir / f"{n}.frame", c["render_height"], c["render_width"])
               for n, c in cams.items()}
    renderers = {n: mujoco.Renderer(model, height=c["render_height"], width=c["render_width"])
                 for n, c in cams.items()}
    sys.stdout.write(f"ready {priority}\n")
    sys.stdout.flush()
    due = {n: time.monotonic() for n in names}
    try:
        while True:
            name = min(due, key=lambda n: due[n])
            wait = max(0.0, due[name] - time.monotonic())
            if select.select([0], [], [], wait)[0] and not os.read(0, 4096):
                break
            if os.getppid() != parent:
                break
            if time.monotonic() < due[name]:
                continue
            fps = state.camera_fps(names.index(name)) or cams[name]["fps"]   # camera_slow: lower
            due[name] = max(due[name] + 1.0 / fps, time.monotonic() - 0.5)
            fault = state.camera_state(names.index(name))
            if writers[name].state != fault:   # a fault, or live again after the twin's `restart`
                writers[name].set_state(fault)
            if fault != LIVE:
                continue
            if state.read_qpos(data.qpos):
                mujoco.mj_forward(model, data)
                renderers[name].update_scene(data, camera=name)
                writers[name].write(renderers[name].render())
    finally:
        for writer in writers.values():
            writer.set_state(DISCONNECTED)
            writer.close()
        for r in renderers.values():
            r.close()
        state.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
