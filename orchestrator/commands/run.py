"""`orchestrator run PROTOCOL --rig RIG [--out DIR]`: run (or resume) a campaign."""

from __future__ import annotations

import argparse
import dataclasses
import os
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.commands.twin_options import add_twin_arguments, twin_session

if TYPE_CHECKING:
    from orchestrator.design.protocol import LoadedProtocol

HELP = "run a new campaign, or resume the one in --out (same protocol only)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("protocol", help="protocol YAML file")
    parser.add_argument("--rig", required=True, help="rig profile (hardware/*.yaml)")
    parser.add_argument("--out", type=Path, default=None,
                        help="campaign directory (default recordings/<name>-<time>); "
                             "an existing campaign there is resumed")
    parser.add_argument("--workers", type=int, default=None,
                        help="parallel episodes for a simulated rig (default: one per core)")
    parser.add_argument("--no-console", action="store_true",
                        help="hardware: plain terminal prompts instead of the operator console")
    parser.add_argument("--station", metavar="NAME", default=None,
                        help="with --store: run as station NAME (one per arm), claiming layout blocks "
                             "of the shared campaign until none is left")
    parser.add_argument("--stop-after", type=int, default=None, help=argparse.SUPPRESS)
    add_twin_arguments(parser, unattended=True)
    add_safety_overrides(parser, stop_key=True)


def add_safety_overrides(parser: argparse.ArgumentParser, *, stop_key: bool) -> None:
    """The flags that accept a real-arm setting `run` and `doctor` otherwise refuse."""
    from orchestrator.rigs.so101.hardware_checks import OVERRIDES

    helps = {"max_relative_target": "accept a rig profile without robot.max_relative_target",
             "torque_at_exit": "accept robot.disable_torque_on_disconnect: false",
             "rest_near_limit": "accept a rest pose within 5 degrees of a calibrated limit (or the gripper closed)",
             "stop_key": "run a real arm although stdin is not a terminal (no stop key)",
             "fast_max_relative_target": "accept a robot.max_relative_target that lets a joint go faster than "
                                         "90 degrees per second at the protocol's fps",
             "policy_units": "accept a checkpoint whose statistics are not in the rig's units",
             "nan_warm_up": "accept a checkpoint whose warm-up action is not finite",
             "first_action_far": "accept a checkpoint whose first action lies far from the episode's start pose"}
    for key, flag in OVERRIDES.items():
        if key != "stop_key" or stop_key:
            parser.add_argument(flag, action="append_const", const=key, dest="allow_unsafe", help=helps[key])


def refuse_unsafe(args: argparse.Namespace, rig, protocol: LoadedProtocol) -> None:
    """BadInput (exit 2, one line each, the override flag named) for a real-arm profile that voids
    the safety rules (`hardware_checks.profile_refusals`), and, on a real arm (not the twin), a
    session with nobody able to press the stop key, a `placement` section (a hand that is not
    there), or `reset: auto` (in `protocol`, the loaded protocol) without the console's stop key."""
    import sys

    from orchestrator.core.errors import BadInput
    from orchestrator.rigs.so101.hardware_checks import profile_refusals, stop_key_refusal
    from orchestrator.rigs.so101.rig import LeRobotRig

    if rig.profile.simulated:
        return
    allowed = set(getattr(args, "allow_unsafe", None) or ())
    lines = profile_refusals(LeRobotRig(rig), allowed, protocol.protocol.episode.fps)
    if not getattr(args, "twin", False):
        lines += stop_key_refusal(args.no_console, sys.stdin, allowed)
        lines += _reset_refusal(args, protocol, allowed)
        if rig.profile.placement is not None:
            lines.append(f"{rig.path}: placement: sets the simulated hand's error (the simulator and --twin); "
                         "on a real arm a person places the cube: remove it, or add --twin to rehearse")
    if lines:
        raise BadInput(lines)


def _reset_refusal(args: argparse.Namespace, protocol: LoadedProtocol, allowed: set[str]) -> list[str]:
    """`reset: auto` on a real arm: the arm moves by itself between trials, so the session needs
    the operator console and its stop key (no `--no-console`, no `--allow-no-stop-key`)."""
    if protocol.protocol.reset.mode != "auto":
        return []
    if args.no_console or "stop_key" in allowed:
        how = "--no-console" if args.no_console else "--allow-no-stop-key"
        return [f"{args.protocol}: reset mode auto moves a real arm by itself between trials: it runs only under "
                f"the operator console with its stop key (drop {how}), or use reset mode operator"]
    return []


# The exit code of a session that ended with trials left to run and not at --stop-after's count (the
# operator's q, a prompt answered with stop, trials left to the next run after repeated stops): the campaign is resumable with the command its `next:`
# line prints. A station's session ends 0 when no block is left for it (other stations may hold them).
EXIT_STOPPED = 3


def default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def run(args: argparse.Namespace) -> int:
    from orchestrator.core.errors import BadInput
    from orchestrator.core.exit_freeze import freeze_at_exit
    from orchestrator.design.protocol import load_protocol
    from orchestrator.rigs.profile import load_rig

    if args.station is not None and not getattr(args, "store", None):
        raise BadInput("--station needs --store postgresql://...: stations share a campaign on a server")
    if args.station is not None and not all(c.isalnum() or c in "_-." for c in args.station):
        raise BadInput(f"--station {args.station!r}: use letters, digits, _ - .")
    freeze_at_exit()   # LeRobot's and torch's objects not walked at exit (0.75 s of CPU a process)
    loaded = load_rig(args.rig)
    protocol = load_protocol(args.protocol)
    with twin_session(args, loaded, protocol) as rig:
        refuse_unsafe(args, rig, protocol)
        rig = dataclasses.replace(rig, allowed=frozenset(args.allow_unsafe or ()))
        directory, summary = _run_with_operator(args, rig, protocol)
    state = "complete" if summary.complete else "incomplete (run again to resume)"
    print(f"{summary.done_total}/{summary.total} trials done, {summary.aborted_now} aborted this "
          f"session; campaign {state}")
    if summary.stopped_early:
        print(f"stopped early: {summary.stopped_early}")
    if summary.complete:
        print(f"next: orchestrator judge {directory} --judge YOUR_NAME   |   "
              f"orchestrator report {directory}")
        return 0
    print(f"next: resume it with: {resume_command(args, directory)}")
    requested = args.stop_after is not None and summary.done_now >= args.stop_after
    return 0 if requested or args.station is not None else EXIT_STOPPED


def resume_command(args: argparse.Namespace, directory) -> str:
    """The command that resumes this campaign: the same protocol, rig and flags, its --out
    (a --store URL is not repeated: it may hold a password)."""
    import shlex

    words = ["orchestrator", "run", str(args.protocol), "--rig", str(args.rig)]
    words += [flag for flag, on in (("--twin", args.twin), ("--unattended", getattr(args, "unattended", False)),
                                    ("--no-console", args.no_console)) if on]
    if getattr(args, "store", None):
        words += ["--store", "URL"]
    if args.station:
        words += ["--station", args.station]
    return " ".join(shlex.quote(w) if w != "URL" else w for w in [*words, "--out", str(directory)])


def interventions_so_far(store) -> str:
    """The campaign's operator interventions so far, as the report counts them, the rate with its
    exact Poisson 95 % interval (as the report gives it)."""
    from orchestrator.analysis import stats
    from orchestrator.analysis.start_records import intervention_counts, intervention_line

    attempts = store.attempts()
    done = sum(1 for t in store.trials() if t.state == "done")
    counts = intervention_counts(store.events(), attempts)
    interval = None
    if done:
        iv = stats.poisson_per_100(sum(counts.values()), done)
        interval = (iv.lo, iv.hi)
    return "operator " + intervention_line(counts, done, interval)


def _run_with_operator(args: argparse.Namespace, rig, protocol: LoadedProtocol):
    """Run the session with the operator the rig needs: none in simulation or --unattended, the
    console (or terminal prompts with --no-console) at a real arm or the attended twin."""
    from orchestrator.commands.referees import campaign_referees
    from orchestrator.design.protocol import deployment_label
    from orchestrator.run.campaign import open_campaign
    from orchestrator.run.sequential import run_campaign

    referees = campaign_referees()

    def session(operator=None):
        opened = open_campaign(args.protocol, rig, args.out, station=args.station)
        try:
            directory = opened.store.directory
            say = operator.message if operator is not None else None
            (say or print)(f"campaign {directory} ({'resumed' if opened.resumed else 'new'}; "
                           f"protocol sha256 {opened.protocol.sha256[:12]})")
            workers = args.workers or (default_workers() if opened.rig.profile.simulated else 1)
            if any(deployment_label(spec) != "sync" and spec.type != "scripted"
                   for spec in opened.protocol.protocol.policies.values()):
                workers = 1   # RTC and served policies run in wall-clock time: one episode at a time
            kwargs = {"say": say} if say else {}
            if args.station:
                from orchestrator.run.stations import run_station

                return directory, run_station(opened, args.station, operator, say=say,
                                              stop_after=args.stop_after, referees=referees)
            summary = run_campaign(opened, operator, workers=workers, stop_after=args.stop_after,
                                   referees=referees, **kwargs)
            (say or print)(interventions_so_far(opened.store))
            return directory, summary
        finally:
            opened.store.close()

    if rig.profile.simulated or getattr(args, "unattended", False):
        return session()
    if args.no_console:
        from orchestrator.run.console.prompt import PromptOperator

        operator = PromptOperator(protocol)
        restore = operator.handle_sigint()  # Ctrl-C between two control steps, never mid-transaction
        try:
            return session(operator)
        finally:
            restore()
    # Textual owns the main thread; the runner (and its SQLite store) runs on the console's
    # worker thread, opened there.
    from orchestrator.run.console import run_with_console

    return run_with_console(protocol, session)
