"""Durable writes: fsync a file, fsync a directory, publish a finished file by rename.

A write that must survive a crash or power loss is: data written to a temporary name in the
destination folder, the file fsynced, renamed over the final name, then the folder fsynced so
the rename itself is on disk (POSIX rename is atomic; the folder fsync makes it durable).
"""

from __future__ import annotations

import os
from pathlib import Path


def fsync_file(path: Path) -> None:
    """Flush a file's data and metadata to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    """fsync a directory so a rename or a new file inside it survives power loss."""
    fsync_file(path)  # the same call on a directory descriptor


def publish(partial: Path, final: Path) -> None:
    """Make `partial` visible as `final` atomically and durably (fsync file, rename, fsync dir)."""
    fsync_file(partial)
    os.replace(partial, final)
    fsync_dir(final.parent)
