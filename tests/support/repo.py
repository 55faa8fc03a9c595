"""Repository paths and text helpers: the shipped sim protocol and layout, problem-line parsing."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SIM_PROTOCOL = REPO / "protocols" / "sim_demo.yaml"
GRID20 = REPO / "layouts" / "grid20.yaml"

LOCATED = re.compile(r"^(?P<path>.+?):(?P<line>\d+):(?P<col>\d+): (?P<message>\S.*)$")
"""One problem line: `path:line:col: message`."""


def sim_protocol_text(layout: str = "layout.yaml") -> str:
    """The shipped sim_demo.yaml with its layout path pointing at `layout`."""
    text = SIM_PROTOCOL.read_text()
    assert "../layouts/grid20.yaml" in text
    return text.replace("../layouts/grid20.yaml", layout)


def line_of(text: str, needle: str, nth: int = 1) -> int:
    """1-based line number of the `nth` line of `text` containing `needle`."""
    hits = [i for i, line in enumerate(text.splitlines(), 1) if needle in line]
    assert len(hits) >= nth, f"{needle!r} not in text"
    return hits[nth - 1]
