"""The video player of the judge app: episodes played in true time, in a terminal widget.

Playback follows each frame's own timestamp (`frames.py`): the player keeps a clock in
episode seconds that runs at `speed` x wall-clock time while playing (`[`/`]` change the
speed, so they scale true time), and shows, for every camera, the last frame whose timestamp
is <= the clock. The clock runs from 0 to the episode's duration, so a 12 s episode ends at
`t = 12.00 s` whatever its cameras' frame rates; `left`/`right` step to the previous/next
frame of the cameras on screen and set the clock to that frame's timestamp.

Views (`c`): each camera, then all tiled side by side (each at its own rate, in step).
`a` shows the first frame beside the last (start-state audit: was the cube on its mark, the
arm at rest?). The app may pass `decorate(camera, image)` to draw on frames (zoom on the
mark, the success-height guide).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import Static

from orchestrator.judging.queue import start_only
from orchestrator.judging.video import VideoFrames, tile
from orchestrator.run.halfblock import HalfBlockImage, image_widget_class

SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0)
TICK_S = 1 / 30



class Player(Vertical):
    """Shows one episode: the frame(s) at the clock of the selected view, and a time cursor."""

    can_focus = True

    position: reactive[float] = reactive(0.0, init=False)     # the clock, episode seconds
    playing: reactive[bool] = reactive(True, init=False)
    speed: reactive[float] = reactive(1.0, init=False)
    view: reactive[int] = reactive(0, init=False)
    audit: reactive[bool] = reactive(False, init=False)

    def __init__(self, renderer: str = "auto", *, image_class: type | None = None, id: str | None = None):
        super().__init__(id=id)
        self._image_class = image_class or image_widget_class(renderer)
        self.sources: dict[str, VideoFrames] = {}
        self.cameras: list[str] = []
        self.episode_key: str | None = None
        self.duration_s = 0.0
        self._anchor = (0.0, 0.0)        # (monotonic time, clock) when playback (re)started
        self._shown: tuple[Any, ...] | None = None
        self.on_shown: Callable[[str, int], Any] | None = None  # (episode key, frame) after refresh
        self.decorate: Callable[[str, np.ndarray], np.ndarray] | None = None
        self.stills: dict[str, Any] = {}

    def compose(self) -> ComposeResult:
        yield self._image_class(id="frame")
        yield Static("", id="cursor", markup=False)

    def on_mount(self) -> None:
        self.set_interval(TICK_S, self._tick)

    # ---------------------------------------------------------------- loading

    def load(self, key: str, sources: dict[str, VideoFrames], duration_s: float, play: bool = True,
             stills: dict[str, Any] | None = None) -> None:
        """Show an episode from its start (and start playing it). `stills`: camera -> path of
        the start-state still taken before the episode (hardware), shown first by `a`."""
        self.episode_key = key
        self.stills = dict(stills or {})
        self.sources = sources
        self.cameras = list(sources)
        self.duration_s = duration_s
        if self.view > len(self.views) - 1:
            self.view = 0
        self.set_reactive(Player.position, 0.0)
        self.set_reactive(Player.playing, play)
        self.set_reactive(Player.audit, False)
        self.furthest_s, self.end_seen = 0.0, False
        self._anchor = (time.monotonic(), 0.0)
        self._shown = None
        self.show()

    @property
    def views(self) -> list[str]:
        return self.cameras + (["tiled"] if len(self.cameras) > 1 else [])

    @property
    def view_name(self) -> str:
        views = self.views
        return views[self.view % len(views)] if views else "-"

    @property
    def shown_sources(self) -> list[VideoFrames]:
        """The sources of the cameras on screen (the first is the one the cursor counts)."""
        name = self.view_name
        if name == "tiled":
            return list(self.sources.values())
        return [self.sources[name]] if name in self.sources else []

    @property
    def all_decoded(self) -> bool:
        return all(s.done.is_set() for s in self.sources.values())

    @property
    def end_s(self) -> float:
        """Where the clock stops: the episode's duration (or the last timestamp, if later)."""
        last = max((s.times[-1] for s in self.sources.values() if s.times), default=0.0)
        return max(self.duration_s, last)

    @property
    def frame_index(self) -> int:
        """The frame on screen of the first visible camera."""
        visible = self.shown_sources
        return visible[0].index_at(self.position) if visible else 0

    @property
    def frame_count(self) -> int:
        visible = self.shown_sources
        return visible[0].decoded if visible else 0

    def frame_time(self) -> float | None:
        """Timestamp of the frame on screen of the first visible camera."""
        visible = self.shown_sources
        if not visible or not visible[0].decoded:
            return None
        return visible[0].timestamps()[self.frame_index]

    # ---------------------------------------------------------------- controls

    def _set_clock(self, t: float) -> None:
        self._anchor = (time.monotonic(), t)
        self.position = t

    def toggle(self) -> None:
        if not self.playing and self.position >= self.end_s:
            self._set_clock(0.0)   # play again from the start
        self.playing = not self.playing

    def step(self, delta: int) -> None:
        """To the next (+1) or previous (-1) frame of the cameras on screen."""
        self.playing = False
        times = sorted({t for s in self.shown_sources for t in s.timestamps()})
        if not times:
            return
        shown = max(s.timestamps()[s.index_at(self.position)] for s in self.shown_sources if s.decoded)
        if delta > 0:
            later = [t for t in times if t > self.position + 1e-6]
            target = later[0] if later else self.position
        else:
            earlier = [t for t in times if t < shown - 1e-6]
            target = earlier[-1] if earlier else 0.0
        self._set_clock(target)

    def to_end(self) -> None:
        self.playing = False
        self._set_clock(self.end_s)

    def change_speed(self, direction: int) -> None:
        index = min(range(len(SPEEDS)), key=lambda i: abs(SPEEDS[i] - self.speed))
        self.speed = SPEEDS[min(max(index + direction, 0), len(SPEEDS) - 1)]

    def next_view(self) -> None:
        self.view = (self.view + 1) % max(1, len(self.views))

    def toggle_audit(self) -> None:
        self.playing = False
        self.audit = not self.audit
        self.end_seen = getattr(self, "end_seen", False) or self.audit   # the last frame is on screen

    def watch_playing(self, playing: bool) -> None:
        self._anchor = (time.monotonic(), self.position)
        self.update_cursor()

    def watch_speed(self, speed: float) -> None:
        self._anchor = (time.monotonic(), self.position)
        self.update_cursor()

    def watch_position(self, position: float) -> None:
        self.furthest_s = max(getattr(self, "furthest_s", 0.0), position)
        self.show()

    @property
    def start_only(self) -> bool:
        """Nothing past the episode's first `queue.START_WINDOW_S` has been on screen (neither played nor
        the last frame shown by `a`): a start-state judgement cannot have seen the outcome."""
        return start_only(self.seen_s, getattr(self, "end_seen", False))

    @property
    def seen_s(self) -> float:
        """The furthest clock time shown of this episode (seconds from its start)."""
        return getattr(self, "furthest_s", 0.0)

    def watch_view(self, view: int) -> None:
        self._shown = None
        self.show()

    def watch_audit(self, audit: bool) -> None:
        self._shown = None
        self.show()

    def clock(self, now: float | None = None) -> float:
        """Where the clock is (episode seconds) at monotonic time `now` while playing."""
        started, first = self._anchor
        now = time.monotonic() if now is None else now
        return min(first + (now - started) * self.speed, self.end_s)

    def _tick(self) -> None:
        if not self.sources:
            return
        if self.playing:
            target = self.clock()
            if target >= self.end_s and self.all_decoded:
                self.playing = False
            if target != self.position:
                self.position = target
                return
        if self._shown is None or self._shown[-1] < 1:
            self.show()  # frames still arriving from the decoder

    # ---------------------------------------------------------------- drawing

    def _image(self, name: str, source: VideoFrames, index: int) -> np.ndarray | None:
        image = source.get(index)
        if image is not None and self.decorate is not None:
            image = self.decorate(name, image)
        return image

    def _still(self, camera: str, like: np.ndarray | None) -> np.ndarray | None:
        """The start-state still of `camera`, at the size of the video frames (None if none)."""
        import cv2

        path = self.stills.get(camera)
        bgr = cv2.imread(str(path)) if path else None
        if bgr is None or like is None:
            return None
        image = cv2.resize(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB), (like.shape[1], like.shape[0]),
                           interpolation=cv2.INTER_AREA)
        return self.decorate(camera, image) if self.decorate is not None else image

    def current_image(self) -> np.ndarray | None:
        if self.audit:   # first frame beside last, of the first visible camera
            visible = self.shown_sources
            if not visible or not visible[0].decoded:
                return None
            source, name = visible[0], self.view_name if self.view_name != "tiled" else self.cameras[0]
            images = [self._image(name, source, 0), self._image(name, source, source.decoded - 1)]
            still = self._still(name, images[0])
            return tile([i for i in [still, *images] if i is not None])
        found = [self._image(n, s, s.index_at(self.position)) for n, s in self.sources.items()
                 if s in self.shown_sources]
        frames = [i for i in found if i is not None]
        if not frames:
            return None
        return tile(frames) if len(frames) > 1 else frames[0]

    def show(self) -> None:
        from PIL import Image as PILImage

        image = self.current_image()
        indices = tuple(s.index_at(self.position) for s in self.shown_sources)
        key = (self.episode_key, indices, self.audit, 0 if image is None else 1)
        if key != self._shown:
            self._shown = key
            widget = self.query_one("#frame")
            if isinstance(widget, HalfBlockImage):
                widget.image = image
            else:
                picture: Any = widget   # textual-image's widget, its class chosen at run time (image_widget_class)
                picture.image = None if image is None else PILImage.fromarray(image)
            if image is not None and self.on_shown is not None:
                episode, frame = self.episode_key, self.frame_index
                self.call_after_refresh(self.on_shown, episode, frame)
        self.update_cursor()

    def cursor_text(self) -> str:
        state = "playing" if self.playing else "paused"
        errors = [s.error for s in self.sources.values() if s.error]
        total = self.frame_count if self.all_decoded else "?"
        if self.audit:
            first = "start still | first frame" if self.stills else "first frame"
            text = f"{first} | last frame   (a: back to playback)   camera: {self.view_name}"
        else:
            text = (f"t = {self.position:.2f} s / {self.duration_s:.2f} s   frame {self.frame_index + 1} / "
                    f"{total}   {state} x{self.speed:g}   camera: {self.view_name}")
        return text + (f"\n{errors[0]}" if errors else "")

    def update_cursor(self) -> None:
        try:
            self.query_one("#cursor", Static).update(self.cursor_text())
        except Exception:
            pass
