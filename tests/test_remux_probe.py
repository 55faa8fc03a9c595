"""What a stream-copy join needs of a recording (`export/remux.probe`) and the join itself into
LeRobot's file layout (`export/remux.LayoutMuxer`), on small files made here with PyAV (no torch:
fast lane). The recorder's own files pass; files made the way the recorder made them before
(frames at their measured times in milliseconds, x264's default B-frames), at another rate or
starting on a non-IDR frame are refused with a reason."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from orchestrator.export.remux import LayoutMuxer, probe
from orchestrator.rigs.profile import CameraSpec
from orchestrator.run import recording

FPS = 10
FRAMES = 25


def recorder_video(path: Path, frames: int = FRAMES, seed: int = 0) -> Path:
    """A video written by the recorder's own writer (moving content, so P-frames are real)."""
    writer = recording._VideoWriter(path, CameraSpec(type="opencv", width=64, height=48, fps=FPS), "ultrafast")
    writer.start()
    for k in range(frames):
        image = np.zeros((48, 64, 3), np.uint8)
        image[:, (3 * k + seed) % 64:] = 40 + 5 * k
        writer.frames.put((k / FPS, image))
    writer.frames.put(None)
    writer.join()
    assert writer.error is None
    return path


def other_video(path: Path, *, time_base: Fraction, pts, options: dict[str, str], rate: int = FPS) -> Path:
    import av

    with av.open(str(path), "w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=rate)
        stream.time_base = stream.codec_context.time_base = time_base
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        stream.options = {"threads": "1", **options}
        for k in range(FRAMES):
            image = np.zeros((48, 64, 3), np.uint8)
            image[:, (3 * k) % 64:] = 40 + 5 * k
            frame = av.VideoFrame.from_ndarray(image, format="rgb24")
            frame.pts, frame.time_base = pts(k), time_base
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def test_the_recorders_videos_can_be_joined(tmp_path):
    segment = probe(recorder_video(tmp_path / "a.mp4"), FPS)
    assert segment.problem is None
    assert segment.frames == FRAMES and segment.ticks * segment.time_base == Fraction(FRAMES, FPS)


@pytest.mark.parametrize("kind, expected", [
    ("milliseconds", "lasts 0.1010 s, not 1/10 s (not a constant frame rate)"),
    ("b-frames", "has B-frames (PTS != DTS)"),
    ("gap", "frame 9 lasts 0.2000 s, not 1/10 s"),
    ("rate", "runs at 5 fps, the dataset at 10 fps"),
    ("no-idr", "does not start on an IDR frame"),
])
def test_recordings_a_join_cannot_take_are_refused_with_the_reason(tmp_path, kind, expected):
    plain = {"preset": "ultrafast", "x264-params": "bframes=0"}
    path = tmp_path / f"{kind}.mp4"
    if kind == "milliseconds":   # the recorder before: each frame at its measured time
        other_video(path, time_base=Fraction(1, 1000), pts=lambda k: round(k * 100 + (k % 3)), options=plain)
    elif kind == "b-frames":      # x264's default B-frames
        other_video(path, time_base=Fraction(1, FPS), pts=lambda k: k, options={"preset": "veryfast"})
    elif kind == "gap":           # a lost frame left as a gap
        other_video(path, time_base=Fraction(1, FPS), pts=lambda k: k + (k >= 10), options=plain)
    elif kind == "rate":
        other_video(path, time_base=Fraction(1, 5), pts=lambda k: k, options=plain, rate=5)
    else:                         # an open-GOP stream cut after its IDR frame: starts on a P-frame
        recorder_video(tmp_path / "src.mp4")
        import av

        with av.open(str(tmp_path / "src.mp4")) as source, av.open(str(path), "w", format="mp4") as out:
            stream = source.streams.video[0]
            copy = out.add_stream_from_template(stream)
            for n, packet in enumerate(p for p in source.demux(stream) if p.dts is not None):
                if n == 0:
                    continue
                packet.pts -= packet.duration
                packet.dts -= packet.duration
                packet.stream = copy
                out.mux(packet)
    segment = probe(path, FPS)
    assert segment.problem is not None and expected in segment.problem, segment.problem
    assert probe(recorder_video(tmp_path / "control.mp4"), FPS).problem is None   # positive control


def test_the_join_follows_lerobots_layout_with_exact_timestamps(tmp_path):
    """Five episodes of 2.5 s into files of at most ~2 episodes' bytes: a new file when the next
    episode would reach the limit (LeRobot's rule), from/to timestamps the running sums of the
    real durations, every packet of every episode in its file at its offset."""
    import av

    segments = [probe(recorder_video(tmp_path / f"e{k}.mp4", seed=k), FPS) for k in range(5)]
    limit_mb = 2.2 * max(s.size for s in segments) / (1024 * 1024)
    muxer = LayoutMuxer(tmp_path / "ds", "observation.images.front",
                        "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4", limit_mb,
                        lambda chunk, file: (chunk, file + 1))
    rows = [muxer.add(s) for s in segments]
    muxer.close()
    key = "videos/observation.images.front"
    files = [row[f"{key}/file_index"] for row in rows]
    assert files == [0, 0, 1, 1, 2]
    assert len(muxer.files) == 3 and all(p.is_file() for p in muxer.files)
    for row, previous in zip(rows, [None] + rows[:-1], strict=True):
        expected_start = 0.0 if previous is None or previous[f"{key}/file_index"] != row[f"{key}/file_index"] \
            else previous[f"{key}/to_timestamp"]
        assert row[f"{key}/from_timestamp"] == expected_start
        assert row[f"{key}/to_timestamp"] - row[f"{key}/from_timestamp"] == FRAMES / FPS
    checked = 0
    for index, path in enumerate(muxer.files):
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            packets = [p for p in container.demux(stream) if p.dts is not None]
            tick = round(1 / (FPS * stream.time_base))
        members = [s for s, f in zip(segments, files, strict=True) if f == index]
        assert [p.pts for p in packets] == [k * tick for k in range(FRAMES * len(members))]
        payload = [bytes(p) for p in packets]
        for m, segment in enumerate(members):
            with av.open(str(segment.path)) as source:
                original = [bytes(p) for p in source.demux(video=0) if p.dts is not None]
            assert payload[m * FRAMES:(m + 1) * FRAMES] == original
            checked += 1
    assert checked == 5
