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
    print(f"{loaded.path}: ok: {p.name}: {len(p.policies)} policies ({', '.join(p.policies)}), "
          f"{len(loaded.layout.marks)} marks x {p.trials_per_layout}, {p.episode.fps} fps x "
          f"{p.episode.duration_s:g} s; sha256 {loaded.sha256[:12]}")
    return 0
