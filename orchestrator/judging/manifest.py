"""The judge bundle's `manifest.json`: one writer and one reader, with the schema version checked.

    {"schema": "orchestrator.bundle/1", "bundle_id": "bd_...", "campaign_id": "...",
     "success_test": "...", "failure_modes": [...], "min_height_m": 0.04,
     "episodes": [{"id": "ep_...", "videos": {camera: "videos/<id>/<camera>.mp4"},
                   "mark": {"id", "x", "y"}, "duration_s", "frames", "arm_still",
                   "stills": {camera: path}, "camera_poses": {camera: pose}}, ...]}

Paths are relative to the bundle folder. It holds exactly the blinded view (docs/design.md
section 10): no policy, no schedule. A manifest of another schema (an older or newer tool) is
refused with one line naming both versions; a damaged one with one line naming what is wrong.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.core.errors import BadInput
from orchestrator.core.versioned import read_versioned_json
from orchestrator.judging.source import BlindEpisode, Mark

SCHEMA = "orchestrator.bundle/1"
MANIFEST = "manifest.json"
MAX_FAILURE_MODES = 9   # the judge's keys 1-9


@dataclass(frozen=True)
class ManifestEpisode:
    id: str
    videos: dict[str, str]                  # camera -> path relative to the bundle
    mark: dict[str, Any]                    # {"id", "x", "y"}
    duration_s: float
    frames: int
    arm_still: bool = False
    stills: dict[str, str] = field(default_factory=dict)
    camera_poses: dict[str, Any] = field(default_factory=dict)

    def blind(self, bundle: Path) -> BlindEpisode:
        """The episode as the judge's app sees it (paths resolved inside `bundle`)."""
        return BlindEpisode(
            id=self.id, videos={cam: (Path(bundle) / rel).resolve() for cam, rel in self.videos.items()},
            mark=Mark(str(self.mark.get("id", "?")), self.mark.get("x"), self.mark.get("y")),
            duration_s=self.duration_s, frames=self.frames, arm_still=self.arm_still,
            stills={cam: (Path(bundle) / rel).resolve() for cam, rel in self.stills.items()},
            camera_poses=dict(self.camera_poses))


@dataclass(frozen=True)
class Manifest:
    bundle_id: str
    campaign_id: str
    success_test: str
    failure_modes: tuple[str, ...]
    min_height_m: float
    episodes: tuple[ManifestEpisode, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "bundle_id": self.bundle_id, "campaign_id": self.campaign_id,
                "success_test": self.success_test, "failure_modes": list(self.failure_modes),
                "min_height_m": self.min_height_m, "episodes": [asdict(e) for e in self.episodes]}

    def write(self, folder: Path) -> Path:
        """Write `folder/manifest.json` (the caller fsyncs and publishes the folder)."""
        path = Path(folder) / MANIFEST
        path.write_text(json.dumps(self.to_dict(), indent=1) + "\n")
        return path


def read_manifest(bundle: Path) -> Manifest:
    """The manifest of the bundle folder `bundle`; BadInput (one line) when it is missing, of
    another schema version, or damaged."""
    path = Path(bundle) / MANIFEST
    data = read_versioned_json(path, "judge bundle manifest", "schema", SCHEMA, f"not a judge bundle ({MANIFEST} is missing)")
    try:
        return Manifest(bundle_id=_text(data["bundle_id"]), campaign_id=_text(data.get("campaign_id", "")),
                        success_test=_text(data["success_test"]),
                        failure_modes=tuple(_text(m) for m in data.get("failure_modes", []))[:MAX_FAILURE_MODES],
                        min_height_m=_number(data.get("min_height_m"), 0.04),
                        episodes=_episodes(path, data.get("episodes", [])))
    except (KeyError, TypeError, ValueError) as exc:
        raise BadInput(f"{path}: missing or bad field ({type(exc).__name__}: {exc}); the manifest is damaged") from None


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{value!r} is not text")
    return value


def _number(value: Any, default: float) -> float:
    """A number, or `default` when it is missing or damaged (only the success-height guide uses it)."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default


def _paths(value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        raise TypeError("not a mapping of camera to file")
    return {str(cam): _text(rel) for cam, rel in value.items()}


def _episodes(path: Path, entries: Any) -> tuple[ManifestEpisode, ...]:
    """The manifest's episodes; a damaged entry is bad input, named by its index."""
    if not isinstance(entries, list):
        raise BadInput(f"{path}: 'episodes' is not a list; the manifest is damaged")
    out = []
    for index, entry in enumerate(entries):
        try:
            mark = entry.get("mark") or {}
            if not isinstance(mark, dict):
                raise TypeError("mark is not a mapping")
            out.append(ManifestEpisode(
                id=str(entry["id"]), videos=_paths(entry["videos"]),
                mark={"id": str(mark.get("id", "?")), "x": mark.get("x"), "y": mark.get("y")},
                duration_s=float(entry["duration_s"]), frames=int(entry["frames"]),
                arm_still=bool(entry.get("arm_still", False)), stills=_paths(entry.get("stills") or {}),
                camera_poses=dict(entry.get("camera_poses") or {})))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise BadInput(f"{path}: episode {index}: missing or bad field "
                           f"({type(exc).__name__}: {exc}); the manifest is damaged") from None
    return tuple(out)
