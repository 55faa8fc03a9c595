"""An episode's recorded files as the campaign store keeps them: which file is which
(`EpisodeFiles`), the one reader of the time series (`read_series`) and the digests a resumed
campaign or an export checks the files against (`file_digest`, `damaged_files`). The recorder
(`run/recording.py`) writes these files; judging, analysis and export read them here.

Time series (`episodes/<episode id>/timeseries.npz`, one row per control step): `t` the step's
clock time since the episode started, `state` the observed joints, `action` the policy's action,
`sent_action` what was sent to the arm; `frame_t.<camera>` the `t` of each video frame; `keys` the
joint order of the columns (`design/joints.py`); `frame_age_ms.<camera>` / `frame_repeat.<camera>`
per step (the recorder's docstring says more).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from orchestrator.core.errors import RuntimeFailure
from orchestrator.design.joints import STATE_KEYS

SERIES_COLUMNS = ("state", "action", "sent_action")


def read_series(path: Path) -> dict[str, np.ndarray]:
    """An episode's `timeseries.npz` as written by `EpisodeRecorder.finish`: every array, with
    the joint columns of `state`, `action` and `sent_action` in STATE_KEYS order whatever order
    the file recorded (`keys`; a joint the file lacks is NaN). Never unpickles. RuntimeFailure
    naming the file when it cannot be read."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
        steps = len(data["t"])
    except (OSError, ValueError, KeyError) as exc:
        raise RuntimeFailure(f"{path}: cannot read the time series: {exc}") from None
    keys = [str(k) for k in data.get("keys", STATE_KEYS)]
    order = [keys.index(k) if k in keys else None for k in STATE_KEYS]
    for name in SERIES_COLUMNS:
        if name not in data:
            continue
        values = np.asarray(data[name], dtype=np.float64).reshape(steps, -1)
        data[name] = np.stack([values[:, i] if i is not None else np.full(steps, np.nan) for i in order], axis=1)
    data["keys"] = np.asarray(STATE_KEYS)
    return data


@dataclass(frozen=True)
class EpisodeFiles:
    """The files of one recorded episode, paths relative to the campaign folder.

    The campaign store keeps them as one flat JSON object (the format since schema 1):
    `<camera>` -> its video (`.mp4`), `<camera>.start` -> its start still (`.jpg`), `timeseries`,
    and `camera_poses` when the rig knows them. `to_dict` writes it and `from_dict` reads it: the
    only code that knows which name means what.
    """

    videos: dict[str, str]
    timeseries: str | None = None
    stills: dict[str, str] = field(default_factory=dict)
    camera_poses: str | None = None

    def to_dict(self) -> dict[str, str]:
        out = dict(self.videos)
        if self.timeseries is not None:
            out["timeseries"] = self.timeseries
        out.update({f"{camera}.start": rel for camera, rel in self.stills.items()})
        if self.camera_poses is not None:
            out["camera_poses"] = self.camera_poses
        return out

    def paths(self) -> list[str]:
        """Every file of the episode (relative paths)."""
        return list(self.to_dict().values())

    @classmethod
    def from_dict(cls, files: dict[str, str] | str) -> EpisodeFiles:
        """From the stored object (or its JSON text)."""
        stored: dict[str, str] = json.loads(files) if isinstance(files, str) else files
        named = {"timeseries", "camera_poses"}
        return cls(videos={name: str(rel) for name, rel in stored.items()
                           if name not in named and not name.endswith(".start") and str(rel).endswith(".mp4")},
                   timeseries=stored.get("timeseries"),
                   stills={name[: -len(".start")]: str(rel) for name, rel in stored.items()
                           if name.endswith(".start") and str(rel).endswith(".jpg")},
                   camera_poses=stored.get("camera_poses"))


def file_digest(path: Path) -> tuple[int, str]:
    """(size in bytes, SHA-256 hex) of a file: what a resumed campaign checks."""
    sha = hashlib.sha256()
    size = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            sha.update(chunk)
            size += len(chunk)
    return size, sha.hexdigest()


def damaged_files(campaign_dir: Path, digests: dict[str, list | tuple]) -> list[str]:
    """Files of a committed episode that are missing or differ from their recorded digest."""
    bad = []
    for relative, (size, sha) in digests.items():
        path = Path(campaign_dir) / relative
        try:
            if path.stat().st_size != size or file_digest(path)[1] != sha:
                bad.append(relative)
        except OSError:
            bad.append(relative)
    return bad
