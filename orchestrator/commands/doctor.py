"""`orchestrator doctor --rig RIG [--protocol P] [--out DIR]`: the preflight on its own.

Checks the robot port, LeRobot's calibration file, every camera's frame rate, that each LeRobot
policy of the protocol loads and matches the rig, and disk space (`orchestrator.run.preflight`);
refuses the real-arm settings that void the safety rules, each with the flag that accepts it
(`rigs.so101.hardware_checks.profile_refusals`: no max_relative_target, one faster than 90 degrees
per second at the protocol's fps, torque kept at exit, a rest pose within 5 degrees of a calibrated
limit), and, on a real arm, each checkpoint whose statistics are not in the rig's units, whose
warm-up action is not finite or whose first action lies far from the start pose
(`policies.arm_fit`, which `run` applies at its start too). The list with every flag:
docs/design.md, "What `doctor` checks".
Prints one line per passed check; problems are one line each on stderr, exit 2. Nothing is
started: the arm is not moved and devices opened to be checked are closed again.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from orchestrator.commands.twin_options import add_twin_arguments, twin_session

HELP = "preflight: port, calibration, cameras at fps, policy load, disk"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rig", required=True, metavar="RIG", help="rig profile (hardware/*.yaml)")
    parser.add_argument("--protocol", metavar="PROTOCOL",
                        help="also load the protocol's LeRobot policies and match them to the rig")
    parser.add_argument("--out", metavar="DIR", default="recordings",
                        help="where campaigns will be written (disk check; default recordings/)")
    add_twin_arguments(parser, unattended=False)
    from orchestrator.commands.run import add_safety_overrides

    add_safety_overrides(parser, stop_key=False)
    parser.add_argument("--camera-seconds", type=float, default=1.0, metavar="S",
                        help="how long to measure each camera's frame rate (default 1 s)")


def run(args: argparse.Namespace) -> int:
    from orchestrator.core.exit_freeze import freeze_at_exit
    from orchestrator.rigs.profile import load_rig
    from orchestrator.run.preflight import require_ready, run_preflight

    freeze_at_exit()   # LeRobot's and torch's objects not walked at exit (0.75 s of CPU a process)
    loaded = load_rig(args.rig)
    protocol = None
    if args.protocol:
        from orchestrator.design.protocol import load_protocol

        protocol = load_protocol(args.protocol)

    def show(check) -> None:
        if check.ok:
            print(f"ok    {check.line}", flush=True)

    with twin_session(args, loaded, protocol) as rig:
        checks = run_preflight(rig, protocol, Path(args.out), camera_seconds=args.camera_seconds,
                               on_check=show, allowed=set(args.allow_unsafe or ()))
    require_ready(checks)
    if getattr(args, "store", None):
        from orchestrator.store.postgres import describe_server_store

        show_line = describe_server_store(args.store, Path(args.out))
        print(f"ok    {show_line}", flush=True)
    passed = len(checks) + (1 if getattr(args, "store", None) else 0)   # the server store's line
    print(f"ready: {passed} checks passed for {args.rig}")
    return 0
