"""The tiny simulated campaign shared by end-to-end tests: 3 marks x 2 scripted policies,
5 s episodes at 10 fps, two 64x48 cameras at 5 fps (tests/data), so a campaign runs in seconds."""

from __future__ import annotations

from pathlib import Path

from orchestrator.cli import main

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
PROTOCOL = DATA / "tiny_protocol.yaml"
RIG = DATA / "tiny_sim.yaml"


def run_cli(out: Path, *extra: str, protocol: Path = PROTOCOL) -> int:
    """`orchestrator run` of the tiny protocol on the tiny simulated rig into `out`."""
    return main(["run", str(protocol), "--rig", str(RIG), "--out", str(out), *extra])
