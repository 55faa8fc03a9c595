"""The check of an export by stream copy, by packets: row k of an episode in the dataset's video
file is, byte for byte, the k-th packet of the episode's recording, at the row's time within
LeRobot's tolerance, the episode's first packet a keyframe and the file's codec header (SPS/PPS)
the recording's (`video_check` says why that shows the recorded frame at every row).

PyAV only (no LeRobot, no torch): each file is checked on one of the export's helpers
(`workers`), while the main thread loads the dataset through `LeRobotDataset`."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np


class VideoCheckFailed(Exception):
    """The dataset's videos do not give back every frame; the message says where and why."""



@dataclass(frozen=True)
class EpisodeVideo:
    """One episode's rows in one camera's video file of the dataset."""

    episode: int
    key: str
    path: Path                 # the dataset's video file
    times: list[float]         # every row's frame time in it (LeRobot's)

    @property
    def label(self) -> str:
        return f"episode {self.episode}, {self.key}"



def _packets(path: Path) -> Iterator[tuple[float, bool, bytes]]:
    """Every packet of `path`'s video stream, in file order: (time s, keyframe, bytes); no decoding."""
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        for packet in container.demux(stream):
            if packet.dts is not None and packet.pts is not None and packet.time_base is not None:
                yield float(packet.pts * packet.time_base), bool(packet.is_keyframe), bytes(packet)


def _codec_header(path: Path) -> bytes:
    import av

    with av.open(str(path)) as container:
        header = bytes(container.streams.video[0].codec_context.extradata or b"")
    return header


def _same_packets(video: EpisodeVideo, dataset: Iterator[tuple[float, bool, bytes]], recording: Path,
                  tolerance_s: float) -> None:
    """The next `len(video.times)` packets of the dataset's file are `recording`'s, one a row, each at
    its row's time (within `tolerance_s`); the first a keyframe."""
    recorded = _packets(recording)
    for k, t in enumerate(video.times):
        got, want = next(dataset, None), next(recorded, None)
        if got is None or want is None:
            raise VideoCheckFailed(f"{video.label}: row {k} (t = {t:.4f} s): no packet in "
                                   f"{video.path.name if got is None else recording.name}")
        if abs(got[0] - t) > tolerance_s:
            raise VideoCheckFailed(f"{video.label}: row {k} is at t = {t:.4f} s in {video.path.name}, its frame at "
                                   f"{got[0]:.4f} s (LeRobot's tolerance {tolerance_s:g} s)")
        if got[2] != want[2]:
            raise VideoCheckFailed(f"{video.label}: frame {k} (t = {t:.4f} s in {video.path.name}) is not the "
                                   f"recorded frame's bytes ({recording.name})")
        if k == 0 and not got[1]:
            raise VideoCheckFailed(f"{video.label}: its first frame is not a keyframe in {video.path.name}")
    if next(recorded, None) is not None:
        raise VideoCheckFailed(f"{video.label}: {recording.name} has more frames than the {len(video.times)} rows")


def recorded_frames(path: Path, indices: list[int]) -> dict[int, np.ndarray]:
    """The frames `indices` (in decoding order, from 0) of the recording `path`, as LeRobot's PyAV
    decoder converts a frame (`to_ndarray(format="rgb24")`, height x width x 3, uint8): for
    `video_check.check_lerobot_load`, decoded on one of the export's helpers."""
    import av

    wanted, out = set(indices), {}
    with av.open(str(path)) as container:
        for n, frame in enumerate(container.decode(container.streams.video[0])):
            if n in wanted:
                out[n] = frame.to_ndarray(format="rgb24")
            if len(out) == len(wanted):
                break
    return out


def by_file(videos: list[EpisodeVideo]) -> dict[Path, list[EpisodeVideo]]:
    """The dataset's video files, each with its episodes in the order of their rows' times."""
    files: dict[Path, list[EpisodeVideo]] = {}
    for video in videos:
        files.setdefault(video.path, []).append(video)
    for in_file in files.values():
        in_file.sort(key=lambda v: v.times[0] if v.times else 0.0)
    return files


def check_file(path: Path, in_file: list[EpisodeVideo], recordings: dict[tuple[int, str], Path],
               tolerance_s: float) -> int:
    """The dataset's video file `path` read once, in order, against the recordings of its episodes
    `in_file` (`by_file`); the rows checked. `VideoCheckFailed` says where it differs."""
    header = _codec_header(path)
    dataset = _packets(path)
    checked = 0
    for video in in_file:
        recording = recordings[(video.episode, video.key)]
        if _codec_header(recording) != header:
            raise VideoCheckFailed(f"{video.label}: {path.name}'s codec header (SPS/PPS) is not {recording.name}'s")
        _same_packets(video, dataset, recording, tolerance_s)
        checked += len(video.times)
    if next(dataset, None) is not None:
        raise VideoCheckFailed(f"{path.name}: frames after its last episode's")
    return checked
