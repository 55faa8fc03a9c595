"""Disk space: one rule and one unit for everything that writes a campaign's files (`doctor`'s
preflight, the runners before each episode, the recorder, the export).

The rule (`required_free_bytes`): free space must be at least twice what is about to be written
(the estimate is rough, and a file exists as partial and final for a moment) plus
`DISK_MARGIN_BYTES` for the store, logs and the OS. Sizes are reported in decimal units, MB
(10^6 bytes) and GB (10^9 bytes), as disk makers and `df -H` count them (`size_text`).
"""

from __future__ import annotations

import shutil
from pathlib import Path

MB = 1_000_000
GB = 1_000_000_000
DISK_MARGIN_BYTES = 32 * MB   # kept free for the store, logs and the OS


def required_free_bytes(needed_bytes: int) -> int:
    """The free space needed before writing about `needed_bytes` (the module's rule)."""
    return 2 * int(needed_bytes) + DISK_MARGIN_BYTES


def free_bytes(directory: Path) -> int:
    """Free bytes on the file system of `directory`, or of its nearest existing parent."""
    probe = Path(directory).resolve()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return shutil.disk_usage(probe).free


def size_text(n_bytes: float) -> str:
    """`n_bytes` in the one unit of disk messages: `812 MB` below a gigabyte, else `3.4 GB`."""
    return f"{n_bytes / MB:.0f} MB" if n_bytes < GB else f"{n_bytes / GB:.1f} GB"


def space_problem(directory: Path, needed_bytes: int, what: str) -> str | None:
    """None when the rule holds for writing `needed_bytes` under `directory`, else the line that
    says so (`<dir>: not enough disk space for <what>: X free, need about Y`)."""
    free, required = free_bytes(directory), required_free_bytes(needed_bytes)
    if free >= required:
        return None
    return (f"{directory}: not enough disk space for {what}: {size_text(free)} free, need about "
            f"{size_text(required)}")
