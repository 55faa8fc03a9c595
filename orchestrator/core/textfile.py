"""A user's text file read as text (a protocol, a layout, a rig profile, an outcomes CSV):
every way it can be unusable (missing, a directory, unreadable, not UTF-8, binary) becomes one
`BadInput` line `path:line:column: ...` naming where."""

from __future__ import annotations

from pathlib import Path

from orchestrator.core.errors import BadInput


def byte_position(raw: bytes, offset: int) -> tuple[int, int]:
    """1-based (line, column) of byte `offset` in `raw`."""
    return raw.count(b"\n", 0, offset) + 1, offset - (raw.rfind(b"\n", 0, offset) + 1) + 1


def read_text_file(path: Path, what: str, encoding: str = "utf-8") -> str:
    """The text of `path`, decoded as `encoding` ("utf-8", or "utf-8-sig" to accept the byte
    order mark spreadsheets write); `what` names the file in the messages ("protocol",
    "outcomes CSV")."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise BadInput(f"{path}:1:1: {what} file not found") from None
    except IsADirectoryError:
        raise BadInput(f"{path}:1:1: {what} path is a directory, not a file") from None
    except OSError as exc:
        raise BadInput(f"{path}:1:1: cannot read {what} file: {exc.strerror}") from None
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as exc:
        line, col = byte_position(exc.object, exc.start)   # the bytes after a byte order mark
        raise BadInput(f"{path}:{line}:{col}: {what} file is not UTF-8 text") from None
    if "\x00" in text:
        line, col = byte_position(raw, raw.index(b"\x00"))
        raise BadInput(f"{path}:{line}:{col}: {what} file contains NUL bytes (binary, not text)")
    return text
