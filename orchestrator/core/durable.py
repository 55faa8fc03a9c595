"""Durable writes: fsync a file, a directory or a tree; publish a finished file by rename; write
a file atomically; swap a finished directory into place.

A write that must survive a crash or power loss is: data written to a temporary name in the
destination folder, the file fsynced, renamed over the final name, then the folder fsynced so
the rename itself is on disk (POSIX rename is atomic; the folder fsync makes it durable).
`write_atomic` is the one helper for a whole file; `staged` + `publish` for writers that must
produce several files all or none; `swap_directory` for a directory (the export).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import secrets
import shutil
import tempfile
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


def fsync_tree(directory: Path) -> None:
    """fsync every file and folder under `directory` (deepest first), then `directory` itself."""
    for path in sorted(Path(directory).rglob("*"), reverse=True):
        try:
            fsync_file(path)
        except OSError:
            continue
    fsync_dir(directory)


def publish(partial: Path, final: Path) -> None:
    """Make `partial` visible as `final` atomically and durably (fsync file, rename, fsync dir)."""
    fsync_file(partial)
    os.replace(partial, final)
    fsync_dir(final.parent)


def staged(target: Path) -> Path:
    """A new empty temporary file beside `target` (same folder, so a rename is atomic), with the
    permissions an ordinary new file gets (mkstemp alone makes 0600). Publish it with `publish`,
    or unlink it."""
    target = Path(target)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    return Path(tmp)


def write_atomic(target: Path, data: str | bytes) -> None:
    """Write `data` to `target` so that readers see the old file or the whole new one, never a
    part, and the new one survives power loss once this returns. Raises OSError (the temporary
    file is removed)."""
    target = Path(target)
    tmp = staged(target)
    try:
        tmp.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
        publish(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths (Linux renameat2 RENAME_EXCHANGE); False where unsupported."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    result = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    return result == 0


def swap_directory(new: Path, root: Path) -> None:
    """Make the complete directory `new` appear at `root`, replacing what was there.

    Both sit in the same folder. With an existing root the two are exchanged atomically
    (renameat2) where the kernel allows it, else renamed one after the other (root first
    moved aside, so `root` is at every moment absent, the old directory or the new one, never a
    mix). The old directory is deleted afterwards."""
    fsync_tree(new)
    if not root.exists():
        os.rename(new, root)
    elif _exchange(new, root):
        shutil.rmtree(new, ignore_errors=True)  # `new` now holds the previous directory
    else:
        aside = root.parent / f".{root.name}.old-{os.getpid()}-{secrets.token_hex(4)}"
        os.rename(root, aside)
        try:
            os.rename(new, root)
        except OSError:
            os.rename(aside, root)  # put the previous directory back
            raise
        shutil.rmtree(aside, ignore_errors=True)
    fsync_dir(root.parent)
