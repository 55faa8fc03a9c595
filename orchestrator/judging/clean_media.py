"""The one rule for what of a recorded file reaches a judge: its pictures, nothing else.

Both faces of judging use it, so a bundle's judge and a browser's judge get the same bytes' worth
of information (`clean_copy` for a bundle's files, `clean_video` and `clean_still` for the web
judge's memory):

- a video is remuxed (PyAV, the H.264 stream copied packet by packet, no re-encoding, every
  presentation timestamp kept) into a fresh MP4 with every container and stream metadata entry
  dropped: a title or comment a recorder wrote (which may name a policy) and the file's dates
  never reach a judge;
- a start still is decoded and encoded again as a JPEG from its pixels alone: no EXIF, no
  comment, no thumbnail, nothing the writer of the file put beside the picture.

With each video go its picture size and the presentation time of every frame (seconds from the
first frame, the packets' PTS x time base), which a player uses to step frame by frame.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

from orchestrator.core.durable import fsync_file

STILL_QUALITY = 92   # JPEG quality of a re-encoded start still (the recorder's own setting)


@dataclass(frozen=True)
class CleanVideo:
    data: bytes                    # the remuxed MP4
    width: int
    height: int
    times: list[float]             # presentation timestamps of the frames, ascending (s)


def clean_video(path: Path) -> CleanVideo:
    """`path`'s video stream in a fresh in-memory MP4 without metadata, with its frame times."""
    import av

    out = io.BytesIO()
    times: list[float] = []
    with av.open(str(path)) as inp:
        stream = inp.streams.video[0]
        width, height = stream.codec_context.width, stream.codec_context.height
        with av.open(out, "w", format="mp4") as container:
            copy = container.add_stream_from_template(stream)
            copy.metadata.clear()
            for packet in inp.demux(stream):
                if packet.dts is None:
                    continue
                if packet.pts is not None and packet.time_base is not None:
                    times.append(float(packet.pts * packet.time_base))
                packet.stream = copy
                container.mux(packet)
            container.metadata.clear()
    start = min(times, default=0.0)
    return CleanVideo(out.getvalue(), width, height, sorted(max(0.0, t - start) for t in times))


def clean_still(path: Path) -> bytes:
    """The still at `path` as a fresh JPEG (pixels only)."""
    import cv2
    import numpy as np

    image = cv2.imdecode(np.fromfile(str(path), np.uint8), cv2.IMREAD_COLOR)
    if image is None:
        raise ValueError("not an image")
    ok, jpeg = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, STILL_QUALITY])
    if not ok:
        raise ValueError("JPEG encoding failed")
    return jpeg.tobytes()


def clean_copy(src: Path, dst: Path) -> int:
    """Write the clean form of `src` (a video `.mp4` or a still image) to `dst`, fsynced; returns
    its size in bytes."""
    data = clean_video(src).data if Path(src).suffix.lower() == ".mp4" else clean_still(src)
    Path(dst).write_bytes(data)
    fsync_file(Path(dst))
    return len(data)
