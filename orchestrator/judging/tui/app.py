"""The judge app: label episodes from video alone, blind, one key per decision.

The keys are `judging.keys.KEYS` (docs/design.md section 11; the browser judge has the same
list): `s` success, `f` failure, `u` unsure (asked again after the unjudged ones), `1`-`9`
failure mode from the protocol's list, `l` the stage of the progress ladder seen, `n` note, `z` undo, `j` go to episode N of the judge's
order (to look again or relabel it), `space` play/pause, `left`/`right` one frame, `[`/`]`
slower/faster (true time: each frame at its own timestamp), `e` the end, `c` next camera, `a`
first frame beside last (start-state audit), `m` zoom on the mark, `g` the success-height guide,
`x` then `1`-`3` invalid start, `o` open the video in an external player, `?` every key, `q`
quit. The key bar under the video lists them all, wrapped to the terminal's width.

Each episode opens paused on its first frame: the clock runs only when the judge plays it, so the
invalid-start window (`queue.START_WINDOW_S`) counts only playback the judge started.

The labelling keys are the rules of `judging.session.JudgeSession` (the browser judge drives
the same session): every label is handed to the `JudgeSource` when the key is pressed and is
durable when that call returns, so quitting or a crash loses nothing; reopening continues with
the episodes not yet judged, in the judge's own order, then the unsure ones. A judge has at most
one live label per episode: a new label (or a failure mode / note added to one) is written
first, then the previous one is retracted. This module adds the screen: the player, the panels,
the note and go-to boxes, the status line, the key bar.

The app sees only a `JudgeSource` (blinded episodes, success test, failure modes): nothing
here can read which policy ran an episode, and nothing on screen (title included) names one.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.reactive import reactive
from textual.widgets import Input, Static

from orchestrator.judging.keys import KEYS
from orchestrator.judging.session import JudgeSession
from orchestrator.judging.source import BlindEpisode, JudgeSource, LabelRecord
from orchestrator.judging.tui.audit import AuditKeys
from orchestrator.judging.tui.keybar import HelpScreen, KeyBar
from orchestrator.judging.tui.player import Player
from orchestrator.judging.video import VideoFrames
from orchestrator.run.halfblock import image_widget_class

MAX_SIZE = {"halfcell": (320, 240), "unicode": (320, 240), "ti-halfcell": (320, 240)}  # else 640x480


def find_opener() -> list[str] | None:
    """The command that opens a file in the desktop's default player, if there is one."""
    for name in (("open",) if sys.platform == "darwin" else ("xdg-open", "gio")):
        path = shutil.which(name)
        if path:
            return [path, "open"] if name == "gio" else [path]
    return None


class JudgeApp(AuditKeys, App[int]):
    """Blind labelling of one judge's episodes from a `JudgeSource`: the keys of a
    `JudgeSession` (which holds the queue and the label rules) with a video player beside them."""

    CSS_PATH = "app.tcss"
    ENABLE_COMMAND_PALETTE = False
    AUTO_FOCUS = "#player"

    # every key of `judging.keys`, each to `action_judge(action, key)`
    BINDINGS = [Binding(name, f"judge('{key.action}', '{name}')", key.text, show=False)
                for key in KEYS for name in key.textual]

    # the episode on screen (the session's current one once shown; every assignment loads it)
    current_id: reactive[str | None] = reactive(None, init=False, always_update=True)
    status_line: reactive[str] = reactive("", init=False)      # the line under the video

    def __init__(self, source: JudgeSource, renderer: str = "auto", autoplay: bool = False):
        super().__init__()
        self.source = source
        self.session = JudgeSession(source)
        self.renderer = renderer
        self.autoplay = autoplay
        self._image_class = image_widget_class(renderer)   # terminal queries: before the app runs
        self.max_size = MAX_SIZE.get(renderer, (640, 480))
        self.info = source.info
        self.title = f"Blind judging - judge {source.judge} - {self.info.kind} {self.info.ref}"
        self._cache: dict[str, dict[str, VideoFrames]] = {}
        self.shown_log: list[tuple[float, str, int]] = []   # (perf_counter, episode, frame)
        self._open_dir: Path | None = None
        self.invalid_prompt = False    # `x` pressed: 1-3 give the reason, esc cancels
        self.zoom = False              # `m`: zoom on the mark (cameras with a known pose)
        self.guide = False             # `g`: the success-height guide (same cameras)
        self.actions: dict[str, Callable[[str], object]] = {
            "success": lambda key: self.action_label("success"),
            "failure": lambda key: self.action_label("failure"),
            "unsure": lambda key: self.action_label("unsure"),
            "mode": lambda key: self.action_mode(int(key)), "note": lambda key: self.action_note(),
            "stage": lambda key: self.apply(self.session.stage),
            "undo": lambda key: self.action_undo(), "goto": lambda key: self.action_goto(),
            "play": lambda key: self.action_play(), "back": lambda key: self.action_step(-1),
            "forward": lambda key: self.action_step(1), "slower": lambda key: self.action_speed(-1),
            "faster": lambda key: self.action_speed(1), "end": lambda key: self.action_end(),
            "camera": lambda key: self.action_camera(), "audit": lambda key: self.action_audit(),
            "zoom": lambda key: self.action_zoom(), "guide": lambda key: self.action_guide(),
            "invalid": lambda key: self.action_invalid(), "open": lambda key: self.action_open(),
            "help": lambda key: self.push_screen(HelpScreen()), "quit": lambda key: self.exit(0)}

    @property
    def labels(self) -> dict[str, LabelRecord]:
        """The judge's live labels, by episode (the session's; `orchestrator judge` sums them up)."""
        return self.session.labels

    @property
    def order(self) -> list[BlindEpisode]:
        """The episodes to judge, in this judge's order (the session's)."""
        return self.session.order

    # ---------------------------------------------------------------- layout

    def compose(self) -> ComposeResult:
        yield Static(self.title, id="top", markup=False)
        with Horizontal(id="main"):
            yield Player(self.renderer, image_class=self._image_class, id="player")
            with Vertical(id="side"):
                yield Static("", id="episode", markup=False)
                yield Static("", id="success", markup=False)
                yield Static("", id="modes", markup=False)
                yield Static("", id="label", markup=False)
                yield Static("", id="progress", markup=False)
        yield Static("", id="status", markup=False)
        for box in (Input(placeholder="note, Enter to save, Esc to cancel", id="note"),
                    Input(placeholder="episode number, Enter goes, Esc cancels", id="goto", restrict=r"[0-9a-z_]*")):
            box.display = False
            yield box
        yield KeyBar(id="keys", markup=False)

    def on_mount(self) -> None:
        player = self.query_one(Player)
        player.on_shown = self._record_shown
        player.decorate = self._decorate
        modes = "  ".join(f"{i}:{m}" for i, m in enumerate(self.info.failure_modes, 1))
        self.query_one("#success", Static).update(f"Success test:\n{self.info.success_test}")
        self.query_one("#modes", Static).update(f"Failure modes:\n{modes or '(none)'}")
        self._terminal_title(push=True)
        self.current_id = self.session.current_id

    def _terminal_title(self, push: bool) -> None:
        """Set the terminal's window title to ours (the shell may have put the command line,
        with a campaign folder name, there); xterm title stack: push now, pop on exit."""
        driver = self._driver
        if driver is None or self.is_headless:
            return
        safe = "".join(ch for ch in self.title if ch.isprintable())
        try:
            driver.write(f"\x1b[22;0t\x1b]2;{safe}\x07" if push else "\x1b[23;0t")
            driver.flush()
        except Exception:
            pass

    def _record_shown(self, episode: str, frame: int) -> None:
        self.shown_log.append((time.perf_counter(), episode, frame))
        del self.shown_log[:-1000]

    # ---------------------------------------------------------------- the episode on screen

    def sources_for(self, episode: BlindEpisode) -> dict[str, VideoFrames]:
        if episode.id not in self._cache:
            self._cache[episode.id] = {camera: VideoFrames(path, self.max_size)
                                       for camera, path in episode.videos.items()}
        return self._cache[episode.id]

    def go(self, episode: BlindEpisode | None) -> None:
        """Show `episode` (None: everything is judged)."""
        self.session.go(episode)
        self.current_id = self.session.current_id

    def watch_current_id(self, episode_id: str | None) -> None:
        """Load the episode into the player from its start, decode the next one ahead, let go of
        the others' decoders."""
        episode = self.session.episode(episode_id)
        player = self.query_one(Player)
        keep = {episode.id} if episode else set()
        if episode is not None:
            sources = self.sources_for(episode)
            for source in sources.values():
                source.first.wait(2.0)   # first frame only; the rest keeps decoding
            player.load(episode.id, sources, episode.duration_s, play=self.autoplay, stills=episode.stills)
            upcoming = self.session.upcoming()
            if upcoming is not None:
                keep.add(upcoming.id)
                # decode ahead once this frame is on screen (so it does not compete with it)
                self.call_after_refresh(self._prefetch, upcoming)
        else:
            player.load("", {}, 0.0, play=False)
        for cached in list(self._cache):
            if cached not in keep:
                for source in self._cache.pop(cached).values():
                    source.stop()
        self.refresh_panels()

    def _prefetch(self, episode: BlindEpisode) -> None:
        upcoming = self.session.upcoming() if self.current_id is not None else None
        if upcoming is not None and episode.id == upcoming.id:
            self.sources_for(episode)

    # ---------------------------------------------------------------- panels

    def refresh_panels(self) -> None:
        session = self.session
        episode = session.episode(self.current_id)
        if episode is None:
            head = f"All {len(session.order)} episodes judged.\nz undoes the last label, q quits."
            label = ""
        else:
            head = f"Episode {episode.id}\n({session.position(episode)} in your order)\n{episode.mark.describe()}"
            if episode.arm_still:
                head += "\n! the arm never moved in this episode: check the start (a: first|last)"
            label = self._label_text(episode.id)
        self.query_one("#episode", Static).update(head)
        self.query_one("#label", Static).update(label)
        self.query_one("#progress", Static).update(session.progress()["text"])

    def _label_text(self, episode_id: str) -> str:
        record = self.session.labels.get(episode_id)
        if record is None:
            pending, stage = self.session.pending_notes.get(episode_id), self.session.pending_stages.get(episode_id)
            return ("Label: (none yet)" + (f"\nnote waiting: {pending}" if pending else "")
                    + (f"\nstage seen (saved with the label): {stage}" if stage else ""))
        text = f"Label: {record.label}"
        if record.label == "unsure":
            text += " (asked again: s, f or u)"
        if record.failure_mode:
            text += f"\nfailure mode: {record.failure_mode}"
        if record.stage:
            text += f"\nstage seen: {record.stage}"
        if record.note:
            text += f"\nnote: {record.note}"
        return text

    def watch_status_line(self, text: str) -> None:
        self.query_one("#status", Static).update(text)

    # ---------------------------------------------------------------- labelling (the session's rules)

    def apply(self, rule: Callable[..., None], *args) -> None:
        """Run one of the session's rules, then show what it left: its status line, and the
        episode it moved to (loaded from its start) or the same one's panels."""
        before = self.session.current_id
        rule(*args)
        self.status_line = self.session.status
        if self.session.current_id != before:
            self.current_id = self.session.current_id
        else:
            self.refresh_panels()

    def action_label(self, label: str) -> None:
        self.invalid_prompt = False
        self.apply(self.session.label, label)

    def action_mode(self, number: int) -> None:
        if self.invalid_prompt:
            self.invalid_start(number)
        else:
            self.apply(self.session.mode, number)

    def action_undo(self) -> None:
        self.apply(self.session.undo)

    def action_note(self) -> None:
        target = self.session.annotation_target()
        box = self.query_one("#note", Input)
        if target is not None:
            box.placeholder = f"note for {target.episode_id} ({target.label}); Enter saves, Esc cancels"
            box.value = target.note or ""
        elif self.current_id:
            box.placeholder = (f"note for {self.current_id} (saved with its label); "
                               "Enter keeps it, Esc cancels")
            box.value = self.session.pending_notes.get(self.current_id, "")
        else:
            self.status_line = "No episode to add a note to."
            return
        box.display = True
        box.focus()

    def action_goto(self) -> None:
        """`j`: the box for an episode number, with every episode's number and this judge's label
        (s, f, u, - none) in the status line."""
        box = self.query_one("#goto", Input)
        box.placeholder = f"go to episode (1-{len(self.session.order)} of your order); Enter goes, Esc cancels"
        box.value = ""
        box.display = True
        box.focus()
        self.status_line = f"Your episodes: {self.session.listing_text()}"

    def on_input_submitted(self, event: Input.Submitted) -> None:
        text = event.input.value
        self._close_boxes()
        if event.input.id == "goto":
            self.apply(self.session.goto, text)
        else:
            self.apply(self.session.note, text)

    def _close_boxes(self) -> None:
        for box in self.query(Input):
            box.display = False
            box.value = ""
        self.query_one(Player).focus()

    def on_key(self, event) -> None:
        boxes = {box.id: box.display for box in self.query(Input)}
        if event.key == "escape" and any(boxes.values()):
            self._close_boxes()
            self.status_line = "Note cancelled." if boxes.get("note") else "Go to: cancelled."
            event.stop()
        elif event.key == "escape" and self.invalid_prompt:
            self.invalid_prompt = False
            self.status_line = "Invalid start cancelled."
            event.stop()

    def action_judge(self, action: str, key: str) -> None:
        """A key of `judging.keys` (the bindings): its action, or, with the `?` list open, close it."""
        if isinstance(self.screen, HelpScreen):
            self.screen.dismiss()
            return
        self.actions[action](key)

    # ---------------------------------------------------------------- player keys

    def action_play(self) -> None:
        self.query_one(Player).toggle()

    def action_step(self, delta: int) -> None:
        self.query_one(Player).step(delta)

    def action_speed(self, direction: int) -> None:
        player = self.query_one(Player)
        player.change_speed(direction)
        self.status_line = f"Speed x{player.speed:g}"

    def action_end(self) -> None:
        self.query_one(Player).to_end()

    def action_camera(self) -> None:
        player = self.query_one(Player)
        player.next_view()
        self.status_line = f"Camera: {player.view_name}"

    def action_open(self) -> None:
        episode = self.session.episode(self.current_id)
        if episode is None or not episode.videos:
            self.status_line = "No video to open."
            return
        player = self.query_one(Player)
        camera = player.view_name if player.view_name in episode.videos else episode.cameras[0]
        path = Path(episode.videos[camera])
        shown = f"{path.parent.name}/{path.name}"
        opener = find_opener()
        if opener is None:
            self.status_line = f"No external player found (xdg-open / open); the file is {shown}"
            return
        try:
            # a neutral copy: a player shows its path, and the campaign folder's name is the
            # researcher's choice (it may name a policy)
            if self._open_dir is None:
                self._open_dir = Path(tempfile.mkdtemp(prefix="judge-"))
            copy = self._open_dir / f"{episode.id}-{camera}.mp4"
            if not copy.exists():
                shutil.copyfile(path, copy)
            proc = subprocess.Popen([*opener, str(copy)], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                    start_new_session=True)
        except OSError as exc:
            self.status_line = (f"Could not open the video in an external player ({exc.strerror}); "
                                f"the file is {shown}")
            return
        self.status_line = f"Opening {shown} in the external player..."

        def check() -> None:
            code = proc.poll()
            if code is None or code == 0:
                self.status_line = f"Opened {shown} in the external player."
            else:
                self.status_line = (f"The external player could not open {shown} ({Path(opener[0]).name} "
                                    f"exit {code}: no default video player?)")

        self.set_timer(1.0, check)

    def on_unmount(self) -> None:
        self._terminal_title(push=False)
        if self._open_dir is not None:   # open files stay readable for a running player
            shutil.rmtree(self._open_dir, ignore_errors=True)
        for sources in self._cache.values():
            for source in sources.values():
                source.stop()
