"""`orchestrator twin --rig PROFILE [--twin-faults FILE] [--wire-log FILE] [--json]`: a
standalone twin for LeRobot's own tools.

Starts the twin of a real-arm profile in the foreground and prints what LeRobot needs to talk
to it: the serial port, the robot id, the calibration folder (the twin's calibration under the
profile's id) and the camera settings; `lerobot_args` are the exact flags for LeRobot's
commands (`--robot.type=so101_follower --robot.port=... --robot.id=... --robot.calibration_dir=...
--robot.cameras=...`). The cameras are of type `twin`, which LeRobot's commands find in the
installed distribution `lerobot_camera_so101_twin` (packages/, installed with the `lerobot` extra),
so `lerobot-rollout ARGS` runs as it is. Runs until Ctrl-C or SIGTERM, then stops the twin as `run` does (its wire log
gets its exit line). With `--json` the first line on stdout is one JSON object with these keys.
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
from pathlib import Path

HELP = "start a standalone twin of a real-arm profile for LeRobot's own commands (lerobot-rollout, ...)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rig", required=True, metavar="PROFILE", help="a real-arm rig profile (hardware/*.yaml)")
    parser.add_argument("--twin-faults", metavar="FILE", type=Path, default=None,
                        help="wire faults to rehearse (YAML with faults: and seed:), instead of the profile's")
    parser.add_argument("--wire-log", metavar="FILE", type=Path, default=None,
                        help="log every packet on the twin's bus to FILE (JSON lines; see docs/twin.md)")
    parser.add_argument("--json", action="store_true", help="print the connection details as one JSON line first")


def lerobot_args(info: dict) -> list[str]:
    cameras = json.dumps(info["cameras"], separators=(",", ":"))
    return ["--robot.type=so101_follower", f"--robot.port={info['port']}", f"--robot.id={info['robot_id']}",
            f"--robot.calibration_dir={info['calibration_dir']}", f"--robot.cameras={cameras}"]


def run(args: argparse.Namespace) -> int:
    from orchestrator.commands.twin_options import load_faults
    from orchestrator.rigs.profile import load_rig
    from orchestrator.rigs.twin.client import start_twin

    loaded = load_rig(args.rig)
    faults = load_faults(args.twin_faults, tuple(loaded.profile.cameras)) if args.twin_faults else None
    stop = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        with start_twin(loaded, None, faults, wire_log=args.wire_log) as twin:
            profile = twin.rig.profile
            info = {"port": twin.port, "robot_id": profile.robot.id, "calibration_dir": str(twin.calibration_dir),
                    "cameras": {name: cam.model_dump(exclude_none=True, exclude={"pose"})
                                for name, cam in profile.cameras.items()}}
            info["lerobot_args"] = lerobot_args(info)
            if args.json:
                print(json.dumps(info), flush=True)
            else:
                _describe(info)
            while not stop.wait(0.5):
                if twin.proc.poll() is not None:
                    print(f"orchestrator: the twin stopped (exit code {twin.proc.returncode})", flush=True)
                    return 1
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    print("twin stopped", flush=True)
    return 0


def _describe(info: dict) -> None:
    print(f"twin running: serial port {info['port']}", flush=True)
    print(f"robot id {info['robot_id']}, calibration folder {info['calibration_dir']}")
    for name, cam in info["cameras"].items():
        print(f"camera {name}: {cam['width']}x{cam['height']} at {cam['fps']} fps, frames {cam['index_or_path']}")
    print("LeRobot's commands with this twin, as on a real arm:")
    print("  lerobot-rollout " + " ".join(
        f"'{a}'" if "{" in a else a for a in info["lerobot_args"]) + " --policy.path=CHECKPOINT --duration=20")
    print("  lerobot-calibrate " + " ".join(a for a in info["lerobot_args"] if not a.startswith("--robot.cameras")))
    print("Ctrl-C or SIGTERM stops the twin.", flush=True)
