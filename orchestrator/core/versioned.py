"""A versioned JSON file read back by the version that wrote it (the bundle manifest, the report
JSON, the camera reference): the object, or one `BadInput` line naming the file when it is
missing, unreadable, not a JSON object, or of another version. Writers put the version under
`key`; a reader accepts exactly its own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from orchestrator.core.errors import BadInput


def read_versioned_json(path: Path, what: str, key: str, expected: Any, missing: str, again: str = "") -> dict:
    """The JSON object in `path` whose `key` is `expected`. `what` names the file in the messages
    ("judge bundle manifest"); `missing` is the line for a missing file ("not a judge bundle");
    `again`, appended to a version mismatch, says how to get a file of this version."""
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise BadInput(f"{path}: {missing}") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise BadInput(f"{path}: not a readable {what} ({type(exc).__name__}: {exc})") from None
    found = data.get(key) if isinstance(data, dict) else None
    if found != expected:
        raise BadInput(f"{path}: {what} {key} {found!r}, this version reads {expected!r}" + (f"; {again}" if again else ""))
    return data
