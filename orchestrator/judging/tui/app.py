"""The judge app: label episodes from video alone, blind, one key per decision.

Keys (docs/design.md section 11): `s` success, `f` failure, `u` unsure (asked again after the
unjudged ones), `1`-`9` failure mode from the protocol's list (sets the mode of the current
episode's failure label, or of the failure label just made), `n` note (same target; before
any label it is kept for the current episode and saved with its label), `z` undo (retracts
the last label and goes back to that episode), `space` play/pause, `left`/`right` one frame,
`[`/`]` slower/faster (true time: each frame at its own timestamp), `e` jump to the end, `o`
open the video in an external player, `c` next camera (then all cameras tiled), `a` first
frame beside last (start-state audit), `x` then `1`-`3` invalid start (cube not on its mark,
knocked before the start, arm not at rest: the trial is re-run, never counted; `esc`
cancels), `m` zoom on the mark and `g` the success-height guide (cameras whose pose the rig
recorded: the simulated front camera), `q` quit.

Every label is handed to the `JudgeSource` when the key is pressed and is durable when that
call returns, so quitting or a crash loses nothing; reopening continues with the episodes not
yet judged, in the judge's own order, then the unsure ones. A judge has at most one live
label per episode: a new label (or a failure mode / note added to one) is written first, then
the previous one is retracted.

The app sees only a `JudgeSource` (blinded episodes, success test, failure modes): nothing
here can read which policy ran an episode, and nothing on screen (title included) names one.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.reactive import reactive
from textual.widgets import Footer, Input, Static

from orchestrator.judging.video import VideoFrames
from orchestrator.judging.tui.halfblock import image_widget_class
from orchestrator.judging.tui.audit import AuditKeys
from orchestrator.judging.tui.player import Player
from orchestrator.judging.queue import find_episode, judgeable, judging_progress, next_to_judge
from orchestrator.judging.source import BlindEpisode, JudgeSource, LabelRecord, current_labels

MAX_SIZE = {"halfcell": (320, 240), "unicode": (320, 240), "ti-halfcell": (320, 240)}  # else 640x480


def find_opener() -> list[str] | None:
    """The command that opens a file in the desktop's default player, if there is one."""
    for name in (("open",) if sys.platform == "darwin" else ("xdg-open", "gio")):
        path = shutil.which(name)
        if path:
            return [path, "open"] if name == "gio" else [path]
    return None


class JudgeApp(AuditKeys, App[int]):
    """Blind labelling of one judge's episodes from a `JudgeSource`."""

    CSS_PATH = "app.tcss"
    ENABLE_COMMAND_PALETTE = False
    AUTO_FOCUS = "#player"

    BINDINGS = [
        Binding("s", "label('success')", "success"),
        Binding("f", "label('failure')", "failure"),
        Binding("u", "label('unsure')", "unsure"),
        *[Binding(str(i), f"mode({i})", f"mode {i}", show=False) for i in range(1, 10)],
        Binding("n", "note", "note"),
        Binding("z", "undo", "undo"),
        Binding("space", "play", "play/pause"),
        Binding("left", "step(-1)", "-1 frame", show=False),
        Binding("right", "step(1)", "+1 frame", show=False),
        Binding("left_square_bracket", "speed(-1)", "slower", key_display="["),
        Binding("right_square_bracket", "speed(1)", "faster", key_display="]"),
        Binding("e", "end", "end"),
        Binding("o", "open", "player"),
        Binding("c", "camera", "camera"),
        Binding("a", "audit", "first|last"),
        Binding("m", "zoom", "zoom mark"),
        Binding("g", "guide", "height guide"),
        Binding("x", "invalid", "invalid start"),
        Binding("q", "quit", "quit"),
    ]

    current_id: reactive[str | None] = reactive(None, init=False)

    def __init__(self, source: JudgeSource, renderer: str = "auto", autoplay: bool = True):
        super().__init__()
        self.source = source
        self.renderer = renderer
        self.autoplay = autoplay
        self._image_class = image_widget_class(renderer)   # terminal queries: before the app runs
        self.max_size = MAX_SIZE.get(renderer, (640, 480))
        self.info = source.info
        self.title = f"Blind judging - judge {source.judge} - {self.info.kind} {self.info.ref}"
        self.labels: dict[str, LabelRecord] = current_labels(source.history())
        self.order: list[BlindEpisode] = self._judgeable(source.episodes())
        self.last: LabelRecord | None = None      # the label made last in this session
        self.pending_notes: dict[str, str] = {}
        self._cache: dict[str, dict[str, VideoFrames]] = {}
        self.shown_log: list[tuple[float, str, int]] = []   # (perf_counter, episode, frame)
        self._open_dir: Path | None = None
        self.invalid_prompt = False    # `x` pressed: 1-3 give the reason, esc cancels
        self.zoom = False              # `m`: zoom on the mark (cameras with a known pose)
        self.guide = False             # `g`: the success-height guide (same cameras)

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
        note = Input(placeholder="note, Enter to save, Esc to cancel", id="note")
        note.display = False
        yield note
        yield Footer()

    def on_mount(self) -> None:
        player = self.query_one(Player)
        player.on_shown = self._record_shown
        player.decorate = self._decorate
        modes = "  ".join(f"{i}:{m}" for i, m in enumerate(self.info.failure_modes, 1))
        self.query_one("#success", Static).update(f"Success test:\n{self.info.success_test}")
        self.query_one("#modes", Static).update(f"Failure modes:\n{modes or '(none)'}")
        self._terminal_title(push=True)
        self.go(self.next_episode())

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

    def screen_text(self) -> str:
        """The current screen as plain text (what a judge reads; for tests and checks)."""
        import io

        from rich.console import Console

        width, height = self.size
        console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True,
                          color_system="truecolor", record=True, legacy_windows=False, safe_box=False)
        console.print(self.screen._compositor.render_update(full=True))
        return console.export_text(styles=False)

    def _judgeable(self, episodes: list[BlindEpisode]) -> list[BlindEpisode]:
        """Episodes still to judge or judged (not those this judge sent back: invalid start)."""
        return judgeable(episodes, self.labels)

    def _record_shown(self, episode: str, frame: int) -> None:
        self.shown_log.append((time.perf_counter(), episode, frame))
        del self.shown_log[:-1000]

    # ---------------------------------------------------------------- queue

    def next_episode(self, after: str | None = None) -> BlindEpisode | None:
        """First unjudged episode in this judge's order; then unsure ones, cycling after `after`."""
        return next_to_judge(self.order, self.labels, after)

    def episode(self, episode_id: str | None) -> BlindEpisode | None:
        return find_episode(self.order, episode_id)

    def sources_for(self, episode: BlindEpisode) -> dict[str, VideoFrames]:
        if episode.id not in self._cache:
            self._cache[episode.id] = {camera: VideoFrames(path, self.max_size)
                                       for camera, path in episode.videos.items()}
        return self._cache[episode.id]

    def go(self, episode: BlindEpisode | None) -> None:
        """Show `episode` (None: everything is judged)."""
        if episode is None:
            # a campaign may have recorded more episodes meanwhile
            fresh = self._judgeable(self.source.episodes())
            if len(fresh) != len(self.order):
                self.order = fresh
                episode = self.next_episode()
        player = self.query_one(Player)
        keep = {episode.id} if episode else set()
        if episode is not None:
            sources = self.sources_for(episode)
            for source in sources.values():
                source.first.wait(2.0)   # first frame only; the rest keeps decoding
            player.load(episode.id, sources, episode.duration_s, play=self.autoplay, stills=episode.stills)
            upcoming = self._after(episode)
            if upcoming is not None:
                keep.add(upcoming.id)
                # decode ahead once this frame is on screen (so it does not compete with it)
                self.call_after_refresh(self._prefetch, upcoming)
        else:
            player.load("", {}, 0.0, play=False)
        for episode_id in list(self._cache):
            if episode_id not in keep:
                for source in self._cache.pop(episode_id).values():
                    source.stop()
        self.current_id = episode.id if episode else None
        self.refresh_panels()

    def _prefetch(self, episode: BlindEpisode) -> None:
        if self.current_id is not None and episode.id == self._after_id:
            self.sources_for(episode)

    @property
    def _after_id(self) -> str | None:
        current = self.episode(self.current_id)
        upcoming = self._after(current) if current else None
        return upcoming.id if upcoming else None

    def _after(self, episode: BlindEpisode) -> BlindEpisode | None:
        """The episode likely to follow `episode` once it is labelled (to decode it ahead)."""
        for candidate in self.order:
            if candidate.id not in self.labels and candidate.id != episode.id:
                return candidate
        nxt = self.next_episode(after=episode.id)
        return nxt if nxt is not None and nxt.id != episode.id else None

    # ---------------------------------------------------------------- panels

    def progress_text(self) -> str:
        decided, total, unsure = judging_progress(self.order, self.labels)
        text = f"{decided} of {total} judged"
        return text + (f" ({unsure} unsure)" if unsure else "")

    def refresh_panels(self) -> None:
        episode = self.episode(self.current_id)
        if episode is None:
            head = f"All {len(self.order)} episodes judged.\nz undoes the last label, q quits."
            label = ""
        else:
            position = [e.id for e in self.order].index(episode.id) + 1
            head = f"Episode {episode.id}\n({position} in your order)\n{episode.mark.describe()}"
            if episode.arm_still:
                head += "\n! the arm never moved in this episode: check the start (a: first|last)"
            record = self.labels.get(episode.id)
            if record is None:
                label = "Label: (none yet)"
                if episode.id in self.pending_notes:
                    label += "\nnote waiting: " + self.pending_notes[episode.id]
            else:
                label = f"Label: {record.label}"
                if record.label == "unsure":
                    label += " (asked again: s, f or u)"
                if record.failure_mode:
                    label += f"\nfailure mode: {record.failure_mode}"
                if record.note:
                    label += f"\nnote: {record.note}"
        self.query_one("#episode", Static).update(head)
        self.query_one("#label", Static).update(label)
        self.query_one("#progress", Static).update(self.progress_text())

    def status(self, text: str) -> None:
        self.query_one("#status", Static).update(text)

    # ---------------------------------------------------------------- labelling

    def _reload_labels(self) -> None:
        self.labels = current_labels(self.source.history())

    def _not_saved(self, exc: Exception) -> None:
        """A label could not be written (disk full, store locked, read-only bundle): say so, stay."""
        if isinstance(exc, OSError) and exc.strerror:
            reason = exc.strerror
        else:
            reason = f"{type(exc).__name__}: {exc}"
        self.status(f"NOT SAVED ({reason}); fix it and press the key again, or q to quit")
        try:
            self._reload_labels()
        except Exception:
            pass
        self.refresh_panels()

    def _replace(self, old: LabelRecord | None, label: str, failure_mode: str | None,
                 note: str | None, episode_id: str) -> LabelRecord:
        """Write the new label, then retract the one it replaces (one live label per episode)."""
        record = self.source.add(episode_id, label, failure_mode, note)
        if old is not None:
            self.source.retract(old.id)
        self._reload_labels()
        return record

    def action_label(self, label: str) -> None:
        self.invalid_prompt = False
        episode = self.episode(self.current_id)
        if episode is None:
            self.status("Nothing left to judge (z undoes the last label, q quits).")
            return
        old = self.labels.get(episode.id)
        note = self.pending_notes.pop(episode.id, None) or (old.note if old else None)
        mode = old.failure_mode if (old and label == "failure") else None
        try:
            self.last = self._replace(old, label, mode, note, episode.id)
        except Exception as exc:
            if note and not (old and old.note == note):
                self.pending_notes[episode.id] = note
            self._not_saved(exc)
            return
        nxt = self.next_episode(after=episode.id)
        hint = " - press 1-9 for the failure mode" if label == "failure" else ""
        self.status(f"Saved: {label} for {episode.id}{hint}")
        self.go(nxt)

    def _annotation_target(self) -> LabelRecord | None:
        current = self.labels.get(self.current_id or "")
        if current is not None:
            return current
        if self.last is not None and self.labels.get(self.last.episode_id) == self.last:
            return self.last
        return None

    def action_mode(self, number: int) -> None:
        if self.invalid_prompt:
            self.invalid_start(number)
            return
        modes = self.info.failure_modes
        if not 1 <= number <= len(modes):
            self.status(f"No failure mode {number}: the protocol lists {len(modes)} (1-{len(modes)}).")
            return
        target = self._annotation_target()
        if target is None or target.label != "failure":
            self.status("Failure mode: label the episode a failure first (f), then press 1-9.")
            return
        try:
            self.last = self._replace(target, "failure", modes[number - 1], target.note, target.episode_id)
        except Exception as exc:
            self._not_saved(exc)
            return
        where = "" if target.episode_id == self.current_id else " (the episode just labelled)"
        self.status(f"Saved: failure mode {modes[number - 1]!r} for {target.episode_id}{where}")
        self.refresh_panels()

    def action_note(self) -> None:
        target = self._annotation_target()
        box = self.query_one("#note", Input)
        if target is not None:
            box.placeholder = f"note for {target.episode_id} ({target.label}); Enter saves, Esc cancels"
            box.value = target.note or ""
        elif self.current_id:
            box.placeholder = (f"note for {self.current_id} (saved with its label); "
                               "Enter keeps it, Esc cancels")
            box.value = self.pending_notes.get(self.current_id, "")
        else:
            self.status("No episode to add a note to.")
            return
        box.display = True
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        box = event.input
        text = box.value.strip() or None
        self._close_note()
        target = self._annotation_target()
        if target is not None:
            try:
                self.last = self._replace(target, target.label, target.failure_mode, text,
                                          target.episode_id)
            except Exception as exc:
                self._not_saved(exc)
                return
            self.status(f"Saved: note for {target.episode_id}")
        elif self.current_id:
            if text:
                self.pending_notes[self.current_id] = text
            else:
                self.pending_notes.pop(self.current_id, None)
            self.status(f"Note kept for {self.current_id}; it is saved with the label.")
        self.refresh_panels()

    def _close_note(self) -> None:
        box = self.query_one("#note", Input)
        box.display = False
        box.value = ""
        self.query_one(Player).focus()

    def on_key(self, event) -> None:
        box = self.query_one("#note", Input)
        if event.key == "escape" and box.display:
            self._close_note()
            self.status("Note cancelled.")
            event.stop()
        elif event.key == "escape" and self.invalid_prompt:
            self.invalid_prompt = False
            self.status("Invalid start cancelled.")
            event.stop()

    def action_undo(self) -> None:
        history = self.source.history()
        if not history:
            self.status("Nothing to undo.")
            return
        record = history[-1]
        try:
            self.source.retract(record.id)
        except Exception as exc:
            self._not_saved(exc)
            return
        self._reload_labels()
        self.last = None
        self.status(f"Undone: {record.label} for {record.episode_id}; label it again.")
        episode = self.episode(record.episode_id)
        if episode is None:   # not in this order any more (should not happen)
            episode = self.next_episode()
        self.go(episode)

    # ---------------------------------------------------------------- player keys

    def action_play(self) -> None:
        self.query_one(Player).toggle()

    def action_step(self, delta: int) -> None:
        self.query_one(Player).step(delta)

    def action_speed(self, direction: int) -> None:
        player = self.query_one(Player)
        player.change_speed(direction)
        self.status(f"Speed x{player.speed:g}")

    def action_end(self) -> None:
        self.query_one(Player).to_end()

    def action_camera(self) -> None:
        player = self.query_one(Player)
        player.next_view()
        self.status(f"Camera: {player.view_name}")

    def action_open(self) -> None:
        episode = self.episode(self.current_id)
        if episode is None or not episode.videos:
            self.status("No video to open.")
            return
        player = self.query_one(Player)
        camera = player.view_name if player.view_name in episode.videos else episode.cameras[0]
        path = Path(episode.videos[camera])
        shown = f"{path.parent.name}/{path.name}"
        opener = find_opener()
        if opener is None:
            self.status(f"No external player found (xdg-open / open); the file is {shown}")
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
            self.status(f"Could not open the video in an external player ({exc.strerror}); "
                        f"the file is {shown}")
            return
        self.status(f"Opening {shown} in the external player...")

        def check() -> None:
            code = proc.poll()
            if code is None or code == 0:
                self.status(f"Opened {shown} in the external player.")
            else:
                self.status(f"The external player could not open {shown} ({Path(opener[0]).name} "
                            f"exit {code}: no default video player?)")

        self.set_timer(1.0, check)

    async def action_quit(self) -> None:
        self.exit(0)

    def on_unmount(self) -> None:
        self._terminal_title(push=False)
        if self._open_dir is not None:   # open files stay readable for a running player
            shutil.rmtree(self._open_dir, ignore_errors=True)
        for sources in self._cache.values():
            for source in sources.values():
                source.stop()
