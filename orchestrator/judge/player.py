"""The video player of the judge app: background decoding and a terminal image widget.

Frames are decoded with PyAV in a background thread per video file, scaled once to at most
`max_size` pixels (enough for half-block or Sixel/Kitty rendering in a terminal; `o` opens
the original file in an external player for full resolution), and kept in memory for the
episode being judged (12 s x 30 fps x 320x240 RGB is about 80 MB per camera). The first
frame is available as soon as it is decoded, so the next episode appears without waiting for
the whole file.

The widget draws with textual-image: `auto` picks Kitty (TGP) or Sixel when the terminal
supports it and Unicode half-blocks otherwise; `halfcell`, `unicode`, `sixel` and `tgp`
force one.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import Static

RENDERERS = ("auto", "halfcell", "unicode", "sixel", "tgp")
SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0)


def image_widget_class(renderer: str = "auto") -> type:
    """The textual-image widget class for `renderer`.

    The first call imports textual-image, which queries the terminal (Sixel/Kitty support,
    cell size) and reads the answers from stdin: call it before the Textual app starts, or
    late answers are read by the app as key presses.
    """
    import textual_image.widget as tiw

    classes = {"auto": tiw.Image, "halfcell": tiw.HalfcellImage, "unicode": tiw.UnicodeImage,
               "sixel": tiw.SixelImage, "tgp": tiw.TGPImage}
    return classes[renderer]


class VideoFrames:
    """All frames of one video file, decoded in a background thread, RGB, scaled to fit."""

    def __init__(self, path: Path, max_size: tuple[int, int] = (320, 240)):
        self.path = Path(path)
        self.max_size = max_size
        self.frames: list[np.ndarray] = []
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

            with av.open(str(self.path)) as container:
                stream = container.streams.video[0]
                stream.thread_type = "AUTO"
                rate = stream.average_rate or stream.guessed_rate
                self.fps = float(rate) if rate else None
                width, height = stream.codec_context.width, stream.codec_context.height
                scale = min(1.0, self.max_size[0] / width, self.max_size[1] / height)
                out_w, out_h = max(2, int(width * scale) // 2 * 2), max(2, int(height * scale) // 2 * 2)
                for frame in container.decode(stream):
                    if self._stop:
                        break
                    self.frames.append(frame.to_ndarray(format="rgb24", width=out_w, height=out_h))
                    self.first.set()
        except Exception as exc:  # a broken file must not take the app down
            self.error = f"{self.path.name}: cannot decode ({type(exc).__name__}: {exc})"
        finally:
            self.first.set()
            self.done.set()

    def get(self, index: int) -> np.ndarray | None:
        """Frame `index`, or the last decoded one before it; None if nothing is decoded yet."""
        frames = self.frames
        if not frames:
            return None
        return frames[min(max(index, 0), len(frames) - 1)]

    def stop(self) -> None:
        self._stop = True


def tile(images: list[np.ndarray]) -> np.ndarray:
    """Side by side, padded to a common height."""
    height = max(i.shape[0] for i in images)
    padded = [np.pad(i, ((0, height - i.shape[0]), (0, 4), (0, 0))) for i in images]
    return np.hstack(padded)[:, :-4]


class Player(Vertical):
    """Shows one episode: current frame of the selected camera (or all tiled) and a time cursor."""

    can_focus = True

    frame_index: reactive[int] = reactive(0, init=False)
    playing: reactive[bool] = reactive(True, init=False)
    speed: reactive[float] = reactive(1.0, init=False)
    view: reactive[int] = reactive(0, init=False)

    def __init__(self, renderer: str = "auto", *, image_class: type | None = None, id: str | None = None):
        super().__init__(id=id)
        self._image_class = image_class or image_widget_class(renderer)
        self.sources: dict[str, VideoFrames] = {}
        self.cameras: list[str] = []
        self.episode_key: str | None = None
        self.total_frames = 1
        self.fps = 30.0
        self.duration_s = 0.0
        self._anchor = (0.0, 0)          # (monotonic time, frame) when playback (re)started
        self._shown: tuple[str | None, int, int] | None = None
        self.on_shown: Callable[[str, int], Any] | None = None  # (episode key, frame) after refresh

    def compose(self) -> ComposeResult:
        yield self._image_class(id="frame")
        yield Static("", id="cursor")

    def on_mount(self) -> None:
        self.set_interval(1 / 30, self._tick)

    # ---------------------------------------------------------------- loading

    def load(self, key: str, sources: dict[str, VideoFrames], frames: int, duration_s: float,
             play: bool = True) -> None:
        """Show an episode from its first frame (and start playing it)."""
        self.episode_key = key
        self.sources = sources
        self.cameras = list(sources)
        self.total_frames = max(1, frames)
        self.duration_s = duration_s
        self.fps = frames / duration_s if duration_s > 0 else 30.0
        if self.view > len(self.views) - 1:
            self.view = 0
        self.set_reactive(Player.frame_index, 0)
        self.set_reactive(Player.playing, play)
        self._anchor = (time.monotonic(), 0)
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
    def decoded_frames(self) -> int:
        counts = [len(s.frames) for s in self.sources.values()]
        return min(counts) if counts else 0

    @property
    def last_frame(self) -> int:
        done = all(s.done.is_set() for s in self.sources.values())
        n = self.decoded_frames if done and self.decoded_frames else self.total_frames
        return max(0, n - 1)

    # ---------------------------------------------------------------- controls

    def toggle(self) -> None:
        if not self.playing and self.frame_index >= self.last_frame:
            self.frame_index = 0  # play again from the start
        self.playing = not self.playing

    def step(self, delta: int) -> None:
        self.playing = False
        self.frame_index = min(max(self.frame_index + delta, 0), self.last_frame)

    def to_end(self) -> None:
        self.playing = False
        self.frame_index = self.last_frame

    def change_speed(self, direction: int) -> None:
        index = min(range(len(SPEEDS)), key=lambda i: abs(SPEEDS[i] - self.speed))
        self.speed = SPEEDS[min(max(index + direction, 0), len(SPEEDS) - 1)]

    def next_view(self) -> None:
        self.view = (self.view + 1) % max(1, len(self.views))

    def watch_playing(self, playing: bool) -> None:
        self._anchor = (time.monotonic(), self.frame_index)
        self.update_cursor()

    def watch_speed(self, speed: float) -> None:
        self._anchor = (time.monotonic(), self.frame_index)
        self.update_cursor()

    def watch_frame_index(self, index: int) -> None:
        self.show()

    def watch_view(self, view: int) -> None:
        self._shown = None
        self.show()

    def _tick(self) -> None:
        if not self.sources:
            return
        if self.playing:
            started, first = self._anchor
            target = first + int((time.monotonic() - started) * self.fps * self.speed)
            if target >= self.last_frame:
                target = self.last_frame
                if all(s.done.is_set() for s in self.sources.values()):
                    self.playing = False
            if target != self.frame_index:
                self.frame_index = target
                return
        if self._shown is None or self._shown[2] < 1:
            self.show()  # frames still arriving from the decoder

    # ---------------------------------------------------------------- drawing

    def current_image(self) -> np.ndarray | None:
        name = self.view_name
        if name == "tiled":
            images = [s.get(self.frame_index) for s in self.sources.values()]
            images = [i for i in images if i is not None]
            return tile(images) if images else None
        source = self.sources.get(name)
        return source.get(self.frame_index) if source else None

    def show(self) -> None:
        from PIL import Image as PILImage

        image = self.current_image()
        key = (self.episode_key, self.frame_index, 0 if image is None else 1)
        if key != self._shown:
            self._shown = key
            widget = self.query_one("#frame")
            widget.image = None if image is None else PILImage.fromarray(image)
            if image is not None and self.on_shown is not None:
                episode, frame = self.episode_key, self.frame_index
                self.call_after_refresh(self.on_shown, episode, frame)
        self.update_cursor()

    def cursor_text(self) -> str:
        t = self.frame_index / self.fps if self.fps else 0.0
        state = "playing" if self.playing else "paused"
        errors = [s.error for s in self.sources.values() if s.error]
        text = (f"t = {t:.2f} s / {self.duration_s:.2f} s   frame {self.frame_index + 1} / "
                f"{self.last_frame + 1}   {state} x{self.speed:g}   camera: {self.view_name}")
        return text + (f"   [{errors[0]}]" if errors else "")

    def update_cursor(self) -> None:
        try:
            self.query_one("#cursor", Static).update(self.cursor_text())
        except Exception:
            pass
