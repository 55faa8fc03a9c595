"""`--twin`, `--twin-faults FILE`, `--twin-wire-log FILE` and `--unattended` for `run` and
`doctor` (shared parsing).

`twin_session(args, loaded_rig, protocol)` is a context manager: without `--twin` it yields
the rig unchanged; with it, it starts the twin (`rigs.twin.client.start_twin`) and yields the
swapped rig, and stops the twin when the block ends, however it ends.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from orchestrator.core.errors import BadInput
from orchestrator.core.extras import require_extra, verb_words
from orchestrator.rigs.profile import LoadedRig


def add_twin_arguments(parser: argparse.ArgumentParser, *, unattended: bool) -> None:
    parser.add_argument("--twin", action="store_true",
                        help="run a real-arm profile on the wire-level simulated SO-101 (same LeRobot "
                             "stack; the port and camera sources are swapped)")
    parser.add_argument("--twin-faults", metavar="FILE", type=Path, default=None,
                        help="with --twin: wire faults to rehearse (YAML with faults: and seed:), "
                             "instead of the profile's twin: section")
    parser.add_argument("--twin-wire-log", metavar="FILE", type=Path, default=None,
                        help="with --twin: log every packet on the twin's bus to FILE, one JSON object "
                             "a line (what the bus saw; instead of the profile's twin: {wire_log:})")
    if unattended:
        parser.add_argument("--unattended", action="store_true",
                            help="with --twin: nobody at the arm; the twin places the cube and the "
                                 "operator's prompts are answered")


def check_twin_arguments(args: argparse.Namespace) -> None:
    if getattr(args, "unattended", False) and not args.twin:
        raise BadInput("--unattended is only for --twin: on a real arm a person places the cube and "
                       "watches the arm")
    if args.twin_faults is not None and not args.twin:
        raise BadInput("--twin-faults is only for --twin")
    if getattr(args, "twin_wire_log", None) is not None and not args.twin:
        raise BadInput("--twin-wire-log is only for --twin")


def load_faults(path: Path, cameras: tuple[str, ...]) -> dict:
    from orchestrator.core.yamlsrc import load_yaml_mapping
    from orchestrator.rigs.twin.fault_plan import section_problems

    data, smap, _ = load_yaml_mapping(path, "twin faults file")
    problems = section_problems(data, cameras, str(path), keys=("faults", "seed"))
    if problems:
        raise BadInput(problems)
    return data


@contextmanager
def twin_session(args: argparse.Namespace, loaded: LoadedRig, protocol=None) -> Iterator[LoadedRig]:
    check_twin_arguments(args)
    if not args.twin:
        yield loaded
        return
    require_extra("lerobot", f"{verb_words(args)} --twin".strip())
    from orchestrator.rigs.twin.client import start_twin

    faults = load_faults(args.twin_faults, tuple(loaded.profile.cameras)) if args.twin_faults else None
    twin = start_twin(loaded, protocol, faults, wire_log=args.twin_wire_log)
    try:
        yield twin.rig
    finally:
        twin.close()
