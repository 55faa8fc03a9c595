"""What the browser judge's videos and stills are, byte for byte, and under which names.

A judge's browser never gets a recorded file as it is on disk: each video is remuxed into
memory (PyAV, the H.264 stream copied packet by packet, no re-encoding) with every container
and stream metadata entry dropped, so a title or comment a recorder wrote (which may name a
policy) and the file's own dates never reach the page. The browser reads it with HTTP range
requests (the index is at the end, as the recorder writes it: one more request to start).
A start still is decoded and encoded again as a JPEG (no EXIF, no comment).

Each file is named by a random token made for this session (`secrets.token_urlsafe`), never by
its path, episode id or camera; tokens say nothing about order or time.

With each video go its picture size and the presentation timestamp of every frame (seconds
from the start of the episode, from the packets' PTS x time base: the control step at which
the recorder took the frame), which the page uses to step frame by frame.
"""

from __future__ import annotations

import io
import secrets
import threading
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.judging.source import BlindEpisode


@dataclass(frozen=True)
class Video:
    data: bytes                    # the remuxed MP4
    width: int
    height: int
    times: list[float]             # presentation timestamps of the frames, ascending (s)


@dataclass
class Prepared:
    """An episode's media, ready to serve: camera -> video, camera -> still JPEG, problems."""

    videos: dict[str, Video] = field(default_factory=dict)
    stills: dict[str, bytes] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


def remux(path: Path) -> Video:
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
    return Video(out.getvalue(), width, height, sorted(max(0.0, t - start) for t in times))


def clean_still(path: Path) -> bytes:
    """The still at `path` as a fresh JPEG (pixels only)."""
    import cv2
    import numpy as np

    image = cv2.imdecode(np.fromfile(str(path), np.uint8), cv2.IMREAD_COLOR)
    if image is None:
        raise ValueError("not an image")
    ok, jpeg = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, 92])
    if not ok:
        raise ValueError("JPEG encoding failed")
    return jpeg.tobytes()


def prepare(episode: BlindEpisode) -> Prepared:
    """Remux every video and clean every still of `episode` (a broken file is an error entry,
    named by its camera only: the path may hold the campaign folder's name)."""
    prepared = Prepared()
    for camera, path in episode.videos.items():
        try:
            prepared.videos[camera] = remux(path)
        except Exception as exc:
            reason = "file missing" if isinstance(exc, FileNotFoundError) else type(exc).__name__
            prepared.errors[camera] = f"camera {camera}: cannot read the video ({reason})"
    for camera, path in episode.stills.items():
        try:
            prepared.stills[camera] = clean_still(path)
        except Exception:
            prepared.errors.setdefault(camera, f"camera {camera}: cannot read the start still")
    return prepared


class MediaStore:
    """Prepared media of the episodes near the judge's position, and the tokens that name them.

    `prepare_async` starts preparing an episode in a thread (the next one, while the judge
    watches the current); `get` waits for it. Only the last `keep` episodes stay in memory.
    """

    def __init__(self, keep: int = 4):
        self.keep = keep
        self._lock = threading.Lock()
        self._ready: dict[str, threading.Event] = {}
        self._prepared: dict[str, Prepared] = {}
        self._recent: list[str] = []
        self._tokens: dict[tuple[str, str, str], str] = {}     # (episode, camera, kind) -> token
        self._by_token: dict[str, tuple[str, str, str]] = {}

    def token(self, episode_id: str, camera: str, kind: str) -> str:
        key = (episode_id, camera, kind)
        with self._lock:
            if key not in self._tokens:
                token = secrets.token_urlsafe(18)
                self._tokens[key] = token
                self._by_token[token] = key
            return self._tokens[key]

    def lookup(self, token: str) -> tuple[str, str, str] | None:
        with self._lock:
            return self._by_token.get(token)

    def prepare_async(self, episode: BlindEpisode) -> None:
        with self._lock:
            if episode.id in self._ready:
                self._touch(episode.id)
                return
            event = self._ready[episode.id] = threading.Event()
            self._touch(episode.id)

        def work() -> None:
            try:
                prepared = prepare(episode)
            except Exception as exc:   # never leave a waiter hanging
                prepared = Prepared(errors={"*": f"cannot read the episode ({type(exc).__name__})"})
            with self._lock:
                self._prepared[episode.id] = prepared
            event.set()

        threading.Thread(target=work, name="judge-web-media", daemon=True).start()

    def _touch(self, episode_id: str) -> None:
        if episode_id in self._recent:
            self._recent.remove(episode_id)
        self._recent.append(episode_id)
        for old in self._recent[: -self.keep]:
            self._recent.remove(old)
            self._ready.pop(old, None)
            self._prepared.pop(old, None)

    def get(self, episode: BlindEpisode, timeout: float = 30.0) -> Prepared:
        self.prepare_async(episode)
        with self._lock:
            event = self._ready.get(episode.id)
        if event is None or not event.wait(timeout):
            return Prepared(errors={"*": "the episode's videos are still being read"})
        with self._lock:
            return self._prepared.get(episode.id) or Prepared()
