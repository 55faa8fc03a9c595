"""What the browser judge's videos and stills are, byte for byte, and under which names.

A judge's browser never gets a recorded file as it is on disk: each video and start still is
cleaned in memory by the rule a bundle's files follow too (`judging.clean_media`: a video remuxed
without metadata, a still re-encoded from its pixels). The browser reads a video with HTTP range
requests (the index is at the end, as the recorder writes it: one more request to start).

Each file is named by a random token made for this session (`secrets.token_urlsafe`), never by
its path, episode id or camera; tokens say nothing about order or time.

With each video go its picture size and the presentation timestamp of every frame (seconds
from the start of the episode: the control step at which the recorder took the frame), which
the page uses to step frame by frame.
"""

from __future__ import annotations

import secrets
import threading
from dataclasses import dataclass, field

from orchestrator.judging.clean_media import CleanVideo, clean_still, clean_video
from orchestrator.judging.source import BlindEpisode


@dataclass
class Prepared:
    """An episode's media, ready to serve: camera -> video, camera -> still JPEG, problems."""

    videos: dict[str, CleanVideo] = field(default_factory=dict)
    stills: dict[str, bytes] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


def prepare(episode: BlindEpisode) -> Prepared:
    """Remux every video and clean every still of `episode` (a broken file is an error entry,
    named by its camera only: the path may hold the campaign folder's name)."""
    prepared = Prepared()
    for camera, path in episode.videos.items():
        try:
            prepared.videos[camera] = clean_video(path)
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
