"""`orchestrator validate PROTOCOL`: check a protocol and its layout; exit 0 or 2."""

from __future__ import annotations

import argparse

HELP = "check a protocol and its layout (exit 0, or exit 2 with path:line:col lines)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("protocol", help="protocol YAML file")


def run(args: argparse.Namespace) -> int:
    from orchestrator.design.protocol import load_protocol

    loaded = load_protocol(args.protocol)
    p = loaded.protocol
    asked = [(label, spec) for label, spec in p.policies.items()
             if getattr(getattr(spec, "inference", None), "type", "sync") == "rtc"]
    if asked:   # LeRobot is imported only when a policy asks for RTC
        from orchestrator.core.errors import BadInput
        from orchestrator.policies.rtc import rtc_refusal, rtc_unchecked

        for label, spec in asked:
            if note := rtc_unchecked(spec, loaded.path.parent):
                print(f"{loaded.path}: policy {label}: {note}")
        problems = [f"{loaded.path}: policy {label}: {why}" for label, spec in asked
                    if (why := rtc_refusal(spec, loaded.path.parent))]
        if problems:
            raise BadInput(problems)
    print(f"{loaded.path}: ok: {p.name}: {len(p.policies)} policies ({', '.join(p.policies)}), "
          f"{len(loaded.layout.marks)} marks x {p.trials_per_layout}, {p.episode.fps} fps x "
          f"{p.episode.duration_s:g} s; sha256 {loaded.sha256[:12]}")
    return 0
