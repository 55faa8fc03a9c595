"""Refusals checked before an export writes anything: the repo id, the dataset root, a running
campaign, LeRobot installed, a Hub token for `--push`, enough disk space."""

from __future__ import annotations

import os
import re
from pathlib import Path

from orchestrator.core.disk import space_problem
from orchestrator.core.errors import BadInput, RuntimeFailure
from orchestrator.core.extras import require_extra
from orchestrator.export.names import EVALUATION_FILE
from orchestrator.export.plan import ExportPlan
from orchestrator.store.sqlite import LOCK_NAME

# Hugging Face repo ids: `namespace/name`, each 1-96 of letters, digits, `-`, `_`, `.`,
# not starting or ending with `-` or `.`, without `--` or `..` (huggingface_hub's rules).
_REPO_PART = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9_])?$")

# What an export writes, per byte of the campaign's files, at worst: where the recordings cannot be
# joined by stream copy it re-encodes them as LeRobot does (AV1, a keyframe every 2 frames), which
# measured 9-12x the bytes of the recorder's H.264 on simulated episodes (demo: 4.6 MB -> 53 MB).
# The disk rule (core.disk) then asks for twice that, plus its margin.
EXPORT_BYTES_PER_SOURCE_BYTE = 12


def check_repo_id(repo_id: str) -> str:
    """`USER/NAME` with the characters the Hub accepts; `BadInput` (one line) otherwise."""
    parts = repo_id.split("/")
    bad = None
    if len(parts) != 2:
        bad = "must be USER/NAME (one slash)"
    elif not all(_REPO_PART.match(p) for p in parts):
        bad = ("each part must be 1-96 letters, digits, '-', '_' or '.', not starting or ending "
               "with '-' or '.'")
    elif any("--" in p or ".." in p for p in parts) or parts[1].endswith(".git"):
        bad = "'--', '..' and a trailing '.git' are not allowed"
    if bad:
        raise BadInput(f"--repo-id {repo_id!r}: invalid Hugging Face repo id: {bad}")
    return repo_id


def default_root(repo_id: str) -> Path:
    """Where LeRobot keeps a local dataset: `$HF_LEROBOT_HOME/<repo_id>` (default
    `$HF_HOME/lerobot`, `~/.cache/huggingface/lerobot`), computed without importing LeRobot."""
    home = os.environ.get("HF_LEROBOT_HOME")
    if not home:
        hf_home = os.environ.get("HF_HOME") or os.path.join(
            os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache"), "huggingface")
        home = os.path.join(hf_home, "lerobot")
    return Path(home).expanduser() / repo_id


def check_not_running(campaign_dir: Path) -> None:
    """Refuse a campaign whose run lock is held: try it with timeout 0, release at once."""
    from filelock import FileLock, Timeout

    lock_path = Path(campaign_dir) / LOCK_NAME
    lock = FileLock(str(lock_path), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise BadInput(f"{campaign_dir}: the campaign is still running (lock {LOCK_NAME} is held by "
                       "`orchestrator run`); export it when the run has ended") from None
    except OSError as exc:
        # read-only campaign directory: a lock cannot be taken, so nobody can be running it there
        if not lock_path.exists():
            return
        raise RuntimeFailure(f"{lock_path}: cannot check the run lock: {exc.strerror or exc}") from None
    else:
        lock.release()


def check_root(root: Path) -> Path:
    """Validate the dataset root without writing anything; return it absolute.

    The root may not exist yet (its nearest existing ancestor must be a writable directory);
    if it exists it must be empty or an earlier export of this tool (never replaced otherwise).
    """
    root = Path(os.path.abspath(Path(root).expanduser()))
    if root.parent == root:
        raise BadInput(f"--root {root}: cannot export to a filesystem root")
    if root.exists() or root.is_symlink():
        if root.is_symlink() or not root.is_dir():
            raise BadInput(f"--root {root}: exists and is not a directory")
        if any(root.iterdir()) and not (root / EVALUATION_FILE).is_file():
            what = "a LeRobot dataset not exported by this tool" if (root / "meta" / "info.json").exists() \
                else "files that are not an export of this tool"
            raise BadInput(f"--root {root}: holds {what}; refusing to replace it (choose another --root)")
    ancestor = root.parent
    while not ancestor.exists():
        if ancestor.is_symlink():
            raise BadInput(f"--root {root}: {ancestor} is a broken symlink")
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise BadInput(f"--root {root}: not writable ({ancestor} is not a directory)")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise BadInput(f"--root {root}: not writable (no write permission on {ancestor})")
    return root


def check_lerobot_installed() -> None:
    """The export writes through LeRobot, an optional extra (it brings torch)."""
    require_extra("lerobot", "export")


def check_hub_token() -> None:
    """Refuse `--push` without a token (login or HF_TOKEN). The token itself is never shown."""
    try:
        from huggingface_hub import get_token
    except ImportError:
        raise BadInput("--push needs huggingface_hub: install the lerobot extra "
                       "(uv sync --extra lerobot)") from None
    if not get_token():
        raise BadInput("--push: no Hugging Face token found; log in with `hf auth login` "
                       "(or set HF_TOKEN) and run the export again")



def check_export_space(plan: ExportPlan) -> None:
    """Refuse to start an export that would not fit beside the root (nothing written yet)."""
    source = 0
    for ep in plan.episodes:
        for relative in ep.files.paths():
            try:
                source += (plan.campaign_dir / relative).stat().st_size
            except OSError:
                pass
    folder = plan.root.parent
    while not folder.exists():
        folder = folder.parent
    problem = space_problem(folder, source * EXPORT_BYTES_PER_SOURCE_BYTE, "the export")
    if problem:
        raise RuntimeFailure(f"{problem}; free some space or choose another --root")

