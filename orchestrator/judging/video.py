"""Decoded episode videos for the judge: every frame with its own presentation timestamp.

Frames are decoded with PyAV in a background thread per video file, scaled once to at most
`max_size` pixels, and kept in memory as JPEG (quality 92) for the episode being judged and
the next one: 12 s x 30 fps at 320x240 is ~5 MB per camera instead of 80 MB raw; decoding
one back costs ~1 ms. The first frame is available as soon as it is decoded, so the next
episode appears without waiting for the whole file.

Time: each frame keeps its presentation timestamp (PTS x stream time base, seconds from the
start of the episode), which the recorder writes from the control step at which the frame
was taken. The player shows, at episode time `t`, the last frame whose timestamp is <= t
(`core.timeline.frame_shown_at`, the rule the dataset export uses too), so a 15 fps camera under a 30 Hz loop, a 10 fps camera, and a camera that
dropped frames all play in true time, and cameras at different rates stay in step when tiled.
A file without timestamps falls back to index / frame rate.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from orchestrator.core.timeline import frame_shown_at


class VideoFrames:
    """All frames of one video file, decoded in a background thread, scaled to fit, kept as
    JPEG, each with its timestamp in seconds (`times`)."""

    def __init__(self, path: Path, max_size: tuple[int, int] = (320, 240)):
        self.path = Path(path)
        self.max_size = max_size
        self.frames: list[bytes] = []     # JPEG, BGR order inside
        self.times: list[float] = []      # presentation timestamps (s), appended before frames
        self.size: tuple[int, int] | None = None   # the file's own (width, height)
        self._last: tuple[int, np.ndarray] | None = None
        self.fps: float | None = None
        self.error: str | None = None
        self.first = threading.Event()
        self.done = threading.Event()
        self._stop = False
        self._thread = threading.Thread(target=self._decode, name=f"decode-{self.path.name}",
                                        daemon=True)
        self._thread.start()

    def _decode(self) -> None:
        try:
            import av
            import cv2

            with av.open(str(self.path)) as container:
                stream = container.streams.video[0]
                stream.thread_type = "AUTO"
                rate = stream.average_rate or stream.guessed_rate
                self.fps = float(rate) if rate else None
                width, height = stream.codec_context.width, stream.codec_context.height
                self.size = (width, height)
                scale = min(1.0, self.max_size[0] / width, self.max_size[1] / height)
                out_w, out_h = max(2, int(width * scale) // 2 * 2), max(2, int(height * scale) // 2 * 2)
                for frame in container.decode(stream):
                    if self._stop:
                        break
                    bgr = frame.to_ndarray(format="bgr24", width=out_w, height=out_h)
                    ok, jpeg = cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, 92])
                    if not ok:
                        raise ValueError("JPEG encoding failed")
                    t = frame.time
                    if t is None:   # no timestamps in the file: nominal rate
                        t = len(self.frames) / (self.fps or 30.0)
                    # never before 0 and never going back (a damaged file must not make
                    # time run backwards)
                    t = max(t, self.times[-1] if self.times else 0.0)
                    self.times.append(float(t))
                    self.frames.append(jpeg.tobytes())
                    self.first.set()
        except Exception as exc:  # a broken file must not take the app down
            # (no exception text: it may quote the full path, and so the campaign folder name)
            reason = "file missing" if isinstance(exc, FileNotFoundError) else type(exc).__name__
            self.error = f"{self.path.parent.name}/{self.path.name}: cannot decode ({reason})"
        finally:
            self.first.set()
            self.done.set()

    @property
    def decoded(self) -> int:
        return min(len(self.frames), len(self.times))

    def timestamps(self) -> list[float]:
        """Timestamps of the frames decoded so far."""
        return self.times[: self.decoded]

    def index_at(self, t: float) -> int:
        """The frame shown at episode time `t` (`frame_shown_at`)."""
        return min(frame_shown_at(self.timestamps(), t), max(0, self.decoded - 1))

    def get(self, index: int) -> np.ndarray | None:
        """Frame `index` (RGB), or the last decoded one before it; None if nothing is decoded yet."""
        import cv2

        frames = self.frames
        if not frames:
            return None
        index = min(max(index, 0), len(frames) - 1)
        if self._last is not None and self._last[0] == index:
            return self._last[1]
        bgr = cv2.imdecode(np.frombuffer(frames[index], np.uint8), cv2.IMREAD_COLOR)
        if bgr is None:   # a frame that does not decode: none to show (was: cv2.error from cvtColor)
            return None
        rgb = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
        self._last = (index, rgb)
        return rgb

    def stop(self) -> None:
        self._stop = True


def tile(images: list[np.ndarray]) -> np.ndarray:
    """Side by side, padded to a common height."""
    height = max(i.shape[0] for i in images)
    padded = [np.pad(i, ((0, height - i.shape[0]), (0, 4), (0, 0))) for i in images]
    return np.hstack(padded)[:, :-4]
