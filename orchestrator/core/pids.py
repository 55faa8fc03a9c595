"""Whether a process is still running, by pid (stale-file clean-up, killed-session detection)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def process_running(pid: Any) -> bool:
    """True when `pid` names a live process on this machine: `kill(pid, 0)` sends no signal, only
    asks; a process owned by someone else counts as running; a zombie (killed, not yet reaped by
    its parent) does not."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except PermissionError:
        return True
    except OSError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True  # no /proc (macOS): kill() said it exists
