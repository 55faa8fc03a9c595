"""Protocols with a pre-registered audit (`judging: {auto: counted, audit: F}`) for the audit's tests:
the tiny protocol (tests/data) or another, copied with its layout into a folder of their own."""

from __future__ import annotations

import shutil
from pathlib import Path

from support.tiny import PROTOCOL

TINY_JUDGING = "judging: {judges: 1, failure_modes: [missed, pushed, dropped, collision, other]}"


def audited_protocol(folder: Path, fraction: float, *, base: Path = PROTOCOL, policies: str | None = None,
                     repeats: int | None = None) -> Path:
    """`base` with `judging: {judges: 1, auto: counted, audit: fraction, ...}` (0: unchanged; and, given, its
    `policies:` block replaced by `policies` and `trials_per_layout` by `repeats`), written to
    `folder/protocol.yaml` beside a copy of its layout file."""
    text = base.read_text()
    assert TINY_JUDGING in text, base
    if fraction:   # 0: the judging line as it is (no audit)
        text = text.replace(TINY_JUDGING, TINY_JUDGING.replace("{judges: 1,", f"{{judges: 1, auto: counted, audit: {fraction},"))
    if policies is not None:
        start = text.index("policies:\n")
        end = text.index("trials_per_layout:")
        text = text[:start] + "policies:\n" + policies + text[end:]
    if repeats is not None:
        text = text.replace("trials_per_layout: 1", f"trials_per_layout: {repeats}")
    layout = next(line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("layout:"))
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(base.parent / layout, folder / Path(layout).name)
    text = text.replace(f"layout: {layout}", f"layout: {Path(layout).name}")
    (folder / "protocol.yaml").write_text(text)
    return folder / "protocol.yaml"
