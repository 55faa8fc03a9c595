"""Export by stream copy: whether the recorded videos can be joined without re-encoding, and
the join itself into LeRobot v3's video files.

A recording can be joined by stream copy (the way LeRobot's own `concatenate_video_files` joins
episodes) when its packets say so (`probe`): H.264; a time base in which one frame at the
dataset's fps is a whole number of ticks; PTS == DTS (no B-frames); the n-th packet at n frames
from 0, each one frame long (constant frame rate, so the episode's real duration is frames/fps);
the first packet an IDR frame; and every episode of a camera encoded alike (codec, profile, size,
pixel format, time base and the same SPS/PPS, `Segment.encode`). The recorder writes such files
(`run/recording.video_encoding`); older campaigns (frames at their measured times in a 1/1000 s
time base, B-frames) do not, and are re-encoded (`refusals` says why).

The rows of an exported episode must also be its frames one for one: the dataset shows at row k
the frame the re-encoding export would show there (`frames.frame_indices`), so a recording is
joined only when that is frame k for every row and there is no frame left over.

`LayoutMuxer` writes one camera's files in LeRobot's layout (`meta.video_path`,
`chunks_size`, `video_files_size_in_mb`; a new file when the next episode would reach the size
limit, LeRobot's own rule in `DatasetWriter._save_episode_video`), with `movflags=faststart`
as LeRobot writes them. An episode's `from_timestamp` / `to_timestamp` are the sums of the real
packet durations before and after it, so they do not drift over many episodes (LeRobot issue
#3177). Memory is one packet at a time, whatever the number of episodes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from orchestrator.core.errors import RuntimeFailure
from orchestrator.export import frames
from orchestrator.export.names import F_IMAGE
from orchestrator.export.plan import EpisodePlan, ExportPlan


@dataclass(frozen=True)
class Segment:
    """One recorded episode video, as its packets describe it."""

    path: Path
    encode: tuple                  # (codec, profile, width, height, pix_fmt, time base, SPS/PPS)
    time_base: Fraction
    frames: int
    tick: int                      # stream ticks per frame at the dataset's fps (0: not whole)
    size: int                      # bytes of the file
    problem: str | None            # why it cannot be joined by stream copy; None when it can

    @property
    def ticks(self) -> int:
        """The episode's real duration, in ticks of its time base."""
        return self.frames * self.tick


def _starts_with_idr(data: bytes, length_size: int) -> bool:
    """Whether an AVCC packet (length-prefixed NAL units) holds an IDR slice (NAL type 5)."""
    pos = 0
    while pos + length_size <= len(data):
        size = int.from_bytes(data[pos:pos + length_size], "big")
        pos += length_size
        if pos < len(data) and data[pos] & 0x1F == 5:
            return True
        pos += size
    return False


def _packet_problem(n: int, packet: Any, tick: int, length_size: int, fps: int) -> str | None:
    if n == 0 and not (packet.is_keyframe and _starts_with_idr(bytes(packet), length_size)):
        return "does not start on an IDR frame"
    if n == 0 and packet.duration and packet.duration != tick:
        rate = 1 / (packet.duration * packet.time_base)
        if rate.denominator == 1:
            return f"runs at {rate} fps, the dataset at {fps} fps (a frame would show on several rows)"
    if packet.pts != packet.dts:
        return "has B-frames (PTS != DTS)"
    if packet.pts != n * tick:
        return (f"frame {n} is at {float(packet.pts * packet.time_base):.4f} s, not {n}/{fps} s "
                "(not a constant frame rate from 0)")
    if packet.duration != tick:
        return (f"frame {n} lasts {float(packet.duration * packet.time_base):.4f} s, not 1/{fps} s "
                "(not a constant frame rate)")
    return None


def probe(path: Path, fps: int) -> Segment:
    """Read `path`'s packets (no decoding) and say whether it can be joined at `fps`."""
    import av

    path = Path(path)
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        codec = stream.codec_context
        time_base = stream.time_base
        if time_base is None:   # PyAV types it optional; a recorded MP4's video stream has one
            raise RuntimeFailure(f"{path}: the video stream has no time base")
        extradata = bytes(codec.extradata or b"")
        encode = (codec.name, codec.profile, codec.width, codec.height, codec.pix_fmt, time_base, extradata)
        per_frame = 1 / (Fraction(fps) * time_base)
        tick = int(per_frame) if per_frame.denominator == 1 else 0
        problem = None
        if codec.name != "h264":
            problem = f"codec {codec.name}, not H.264"
        elif not tick:
            problem = f"time base {time_base} s holds no whole frame at {fps} fps (frames at measured times)"
        elif len(extradata) < 5:
            problem = "has no avcC header"
        length_size = (extradata[4] & 3) + 1 if len(extradata) >= 5 else 4
        n = 0
        for packet in container.demux(stream):
            if packet.dts is None:
                continue
            if problem is None:
                problem = _packet_problem(n, packet, tick, length_size, fps)
            n += 1
    if problem is None and n == 0:
        problem = "has no frame"
    assert time_base is not None   # refused above (mypy reads PyAV's `with` as one that may swallow the raise)
    return Segment(path, encode, time_base, n, tick, path.stat().st_size, problem)


def _row_problem(plan: ExportPlan, series: dict[str, np.ndarray], camera: str, segment: Segment) -> str | None:
    """Why the dataset's rows of an episode (its `series`, `frames.episode_rows`) would not be
    `camera`'s frames one for one."""
    step_t = series["t"][::plan.stride]
    frame_t = series.get(f"frame_t.{camera}")
    if frame_t is None:
        return "has no recorded frame times"
    shown = frames.frame_indices(step_t, frame_t, segment.frames)
    if len(shown) != segment.frames:
        return f"has {segment.frames} frames for {len(shown)} dataset rows"
    if not np.array_equal(shown, np.arange(segment.frames)):
        first = int(np.flatnonzero(shown != np.arange(segment.frames))[0])
        return f"row {first} shows frame {int(shown[first])} (a frame held or skipped)"
    return None


def plan_segments(plan: ExportPlan, probed: Callable[[Path], Segment] | None = None,
                  rows: Callable[[EpisodePlan], Any] | None = None) -> tuple[dict[str, list[Segment]], list[str]]:
    """Every episode's segment per camera, and why the videos cannot be joined by stream copy
    (empty when they can): per camera, how many episodes cannot, and the first one's reason.
    `probed(path)`: the recording's `probe`, `rows(ep)`: the episode's `frames.episode_rows`
    (default: both read here)."""
    segments: dict[str, list[Segment]] = {camera: [] for camera in plan.cameras}
    reasons: list[str] = []
    series: dict[int, dict[str, np.ndarray]] = {}
    for camera in plan.cameras:
        first: str | None = None
        count = 0
        for ep in plan.episodes:
            path = plan.campaign_dir / ep.files.videos[camera]
            segment = probed(path) if probed is not None else probe(path, plan.fps)
            segments[camera].append(segment)
            problem = segment.problem
            if problem is None and segment.encode != segments[camera][0].encode:
                problem = "is encoded differently from the first episode's (mixed settings)"
            if problem is None:
                if ep.index not in series:
                    series[ep.index] = rows(ep) if rows is not None else frames.episode_series(plan, ep)
                problem = _row_problem(plan, series[ep.index], camera, segment)
            if problem:
                count += 1
                first = first or f"episode {ep.index} (trial {ep.trial.slot + 1}): the video {problem}"
        if first:
            reasons.append(f"camera {camera}: {count} of {len(plan.episodes)} episodes, e.g. {first}")
    return segments, reasons


def by_episode(plan: ExportPlan, segments: dict[str, list[Segment]]) -> list[dict[str, Segment]]:
    """`plan_segments`' recordings per episode, in the plan's order: video key -> segment."""
    return [{F_IMAGE.format(camera=c): segments[c][ep.index] for c in plan.cameras} for ep in plan.episodes]


class LayoutMuxer:
    """One camera's episodes joined by stream copy into LeRobot's chunk/file video files."""

    def __init__(self, root: Path, video_key: str, video_path: str, files_size_in_mb: float,
                 next_file: Callable[[int, int], tuple[int, int]]):
        """`video_path`: LeRobot's `meta.video_path` pattern; `next_file(chunk, file)`: LeRobot's
        `update_chunk_file_indices` with the dataset's `chunks_size`."""
        self.root = Path(root)
        self.video_key = video_key
        self.video_path = video_path
        self.next_file = next_file
        self.limit_bytes = float(files_size_in_mb) * 1024 * 1024
        self.chunk = self.file = 0
        self._container: Any = None
        self._stream: Any = None
        self._bytes = 0       # source bytes in the open file (LeRobot's rule compares file sizes)
        self._offset = 0      # ticks written to the open file
        self.files: list[Path] = []

    def _open(self, template: Any) -> None:
        import av

        path = self.root / self.video_path.format(video_key=self.video_key, chunk_index=self.chunk,
                                                  file_index=self.file)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._container = av.open(str(path), mode="w", format="mp4", options={"movflags": "faststart"})
        self._stream = self._container.add_stream_from_template(template=template, opaque=True)
        self._stream.time_base = template.time_base
        self._bytes = self._offset = 0
        self.files.append(path)

    def add(self, segment: Segment) -> dict[str, Any]:
        """Append one episode; its LeRobot episode metadata for this camera."""
        import av

        if self._container is not None and self._bytes + segment.size >= self.limit_bytes:
            self.close()
            self.chunk, self.file = self.next_file(self.chunk, self.file)
        with av.open(str(segment.path)) as source:
            stream = source.streams.video[0]
            if self._container is None:
                self._open(stream)
            start = self._offset
            for packet in source.demux(stream):
                if packet.dts is None:
                    continue
                packet.dts += start
                if packet.pts is not None:
                    packet.pts += start
                packet.stream = self._stream
                self._container.mux(packet)
        self._offset = start + segment.ticks
        self._bytes += segment.size
        key = self.video_key
        return {f"videos/{key}/chunk_index": self.chunk, f"videos/{key}/file_index": self.file,
                f"videos/{key}/from_timestamp": float(start * segment.time_base),
                f"videos/{key}/to_timestamp": float(self._offset * segment.time_base)}

    def close(self) -> None:
        if self._container is not None:
            container, self._container = self._container, None
            container.close()
