"""One judge's labelling session, without a screen: the queue and the label rules that both faces
of the blind judge drive, the Textual judge (`judging.tui.app`) and the browser judge
(`judging.web.app`), so a campaign judged in either face holds the same rows.

The rules:

- the queue: first the episodes not yet judged, in this judge's own order (`JudgeSource.episodes`),
  then the `unsure` ones again, cycling after the one just labelled; episodes this judge sent
  back as an invalid start are not offered;
- one live label per episode: a new label (or a failure mode / a note added to one) is written
  first (`JudgeSource.add`), then the previous one is retracted (`JudgeSource.retract`);
- a failure mode (`1`-`9`) or a note applies to the current episode's label, else to the label
  made last in this session; a note typed before any label waits and is saved with it;
- `l` steps the stage of the progress ladder the judge saw (none, reached, grasped, lifted, held,
  then none again) of that same label, kept beside it (and, with no label yet, saved with the
  current episode's label, like a note); the stages are the same words for every episode, so
  the key shows nothing about the episode or its policy;
- `z` retracts this judge's last label and goes back to that episode;
- `j` + N goes to episode N of this judge's order (or to an episode by its id), labelled or not:
  a label made there replaces the one it had (written, then the old one retracted: the old one
  stays, with its time, in the campaign's store and evidence chain or in the bundle's labels
  file), and the queue goes on from there;
- `x` + reason: `JudgeSource.invalidate` (the trial is re-run, never counted), judged from the
  start alone: refused once the face reports that more than `queue.START_WINDOW_S` of the episode
  or its last frame was on screen, and for an episode this judge has labelled (a live label, or
  one made and undone in this session: an `unsure` that comes back, or `z`, replays it from its
  start, but its outcome was seen); re-rolling an outcome the judge has seen is selection bias.

A face turns keys into these calls and shows `status` (one line) after each. A write that fails
(disk full, store locked, read-only bundle) raises nothing: the session reloads the labels from
the source and says `NOT SAVED (...)` in `status`. Methods are called from one thread (the
Textual event loop, or the web server's).

The session sees only a `JudgeSource` (blinded episodes, success test, failure modes): nothing
here can read which policy ran an episode.
"""

from __future__ import annotations

from orchestrator.judging.queue import START_ONLY, find_episode, judgeable, judging_progress, next_to_judge, start_only
from orchestrator.judging.source import (
    INVALID_START_REASONS,
    LADDER_STAGES,
    BlindEpisode,
    JudgeSource,
    LabelRecord,
    current_labels,
)

INVALID_PROMPT = ("Invalid start (the trial is re-run, never counted) - why? "
                  + "  ".join(f"{i}: {r}" for i, r in enumerate(INVALID_START_REASONS, 1)) + "  (esc cancels)")


LABELLED_ALREADY = ("You have labelled this episode, so its outcome was seen: an invalid start is marked "
                    "before labelling. Label it as you see it.")


class JudgeSession:
    """The labelling state of one judge over one `JudgeSource`."""

    def __init__(self, source: JudgeSource):
        self.source = source
        self.info = source.info
        self.labels: dict[str, LabelRecord] = current_labels(source.history())
        self.order: list[BlindEpisode] = self._judgeable(source.episodes())
        self.last: LabelRecord | None = None          # the label made last in this session
        self.pending_notes: dict[str, str] = {}
        self.pending_stages: dict[str, str] = {}       # `l` before the episode's label
        self.labelled_here: set[str] = set()          # episodes labelled in this session (undone too)
        self.status = ""
        self.current_id: str | None = None
        self.go(self.next_episode())

    # ---------------------------------------------------------------- queue

    def _judgeable(self, episodes: list[BlindEpisode]) -> list[BlindEpisode]:
        return judgeable(episodes, self.labels)

    def next_episode(self, after: str | None = None) -> BlindEpisode | None:
        """First unjudged episode in this judge's order; then unsure ones, cycling after `after`."""
        return next_to_judge(self.order, self.labels, after)

    def episode(self, episode_id: str | None) -> BlindEpisode | None:
        return find_episode(self.order, episode_id)

    @property
    def current(self) -> BlindEpisode | None:
        return self.episode(self.current_id)

    def upcoming(self) -> BlindEpisode | None:
        """The episode likely to follow the current one once it is labelled (to load it ahead)."""
        current = self.current
        if current is None:
            return None
        for candidate in self.order:
            if candidate.id not in self.labels and candidate.id != current.id:
                return candidate
        nxt = self.next_episode(after=current.id)
        return nxt if nxt is not None and nxt.id != current.id else None

    def go(self, episode: BlindEpisode | None) -> None:
        """Make `episode` the current one (None: everything is judged, unless the campaign has
        recorded more episodes meanwhile: then the first of those)."""
        if episode is None:
            fresh = self._judgeable(self.source.episodes())
            if len(fresh) != len(self.order):
                self.order = fresh
                episode = self.next_episode()
        self.current_id = episode.id if episode else None

    def position(self, episode: BlindEpisode) -> int:
        """Where `episode` is in this judge's order (1-based)."""
        return [e.id for e in self.order].index(episode.id) + 1

    def progress(self) -> dict:
        decided, total, unsure = judging_progress(self.order, self.labels)
        text = f"{decided} of {total} judged" + (f" ({unsure} unsure)" if unsure else "")
        return {"decided": decided, "total": total, "unsure": unsure, "text": text}

    # ---------------------------------------------------------------- writes

    def _reload(self) -> None:
        self.labels = current_labels(self.source.history())

    def _not_saved(self, exc: Exception) -> None:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else f"{type(exc).__name__}: {exc}"
        self.status = f"NOT SAVED ({reason}); fix it and press the key again"
        try:
            self._reload()
        except Exception:
            pass

    def _replace(self, old: LabelRecord | None, label: str, failure_mode: str | None,
                 note: str | None, episode_id: str, stage: str | None = None) -> LabelRecord:
        """Write the new label, then retract the one it replaces (one live label per episode)."""
        record = self.source.add(episode_id, label, failure_mode, note, stage)
        self.labelled_here.add(episode_id)
        if old is not None:
            self.source.retract(old.id)
        self._reload()
        return record

    def label(self, label: str) -> None:
        """Label the current episode `success`, `failure` or `unsure`, then go to the next one."""
        episode = self.current
        if episode is None:
            self.status = "Nothing left to judge (z undoes the last label)."
            return
        old = self.labels.get(episode.id)
        note = self.pending_notes.pop(episode.id, None) or (old.note if old else None)
        mode = old.failure_mode if (old and label == "failure") else None
        stage = self.pending_stages.pop(episode.id, None) or (old.stage if old else None)
        try:
            self.last = self._replace(old, label, mode, note, episode.id, stage)
        except Exception as exc:
            if note and not (old and old.note == note):
                self.pending_notes[episode.id] = note
            if stage and not (old and old.stage == stage):
                self.pending_stages[episode.id] = stage
            self._not_saved(exc)
            return
        hint = " - press 1-9 for the failure mode" if label == "failure" else ""
        replaced = f" (relabelled: it was {old.label})" if old is not None and old.label != label else ""
        self.status = f"Saved: {label} for {episode.id}{replaced}{hint}"
        self.go(self.next_episode(after=episode.id))

    def annotation_target(self) -> LabelRecord | None:
        """The label a failure mode or a note goes with: the current episode's, else the one made
        last in this session (if it is still live)."""
        current = self.labels.get(self.current_id or "")
        if current is not None:
            return current
        if self.last is not None and self.labels.get(self.last.episode_id) == self.last:
            return self.last
        return None

    def mode(self, number: int) -> None:
        """Failure mode `number` (1-based, the protocol's list) for the annotation target."""
        modes = self.info.failure_modes
        if not 1 <= number <= len(modes):
            self.status = f"No failure mode {number}: the protocol lists {len(modes)} (1-{len(modes)})."
            return
        target = self.annotation_target()
        if target is None or target.label != "failure":
            self.status = "Failure mode: label the episode a failure first (f), then press 1-9."
            return
        try:
            self.last = self._replace(target, "failure", modes[number - 1], target.note, target.episode_id,
                                      target.stage)
        except Exception as exc:
            self._not_saved(exc)
            return
        where = "" if target.episode_id == self.current_id else " (the episode just labelled)"
        self.status = f"Saved: failure mode {modes[number - 1]!r} for {target.episode_id}{where}"

    def note(self, text: str | None) -> None:
        """Set (or, empty, clear) the note of the annotation target; with no label yet, keep it
        for the current episode until it is labelled."""
        text = (text or "").strip() or None
        target = self.annotation_target()
        if target is not None:
            try:
                self.last = self._replace(target, target.label, target.failure_mode, text, target.episode_id,
                                          target.stage)
            except Exception as exc:
                self._not_saved(exc)
                return
            self.status = f"Saved: note for {target.episode_id}"
        elif self.current_id:
            if text:
                self.pending_notes[self.current_id] = text
            else:
                self.pending_notes.pop(self.current_id, None)
            self.status = f"Note kept for {self.current_id}; it is saved with the label."
        else:
            self.status = "No episode to add a note to."

    def stage(self) -> None:
        """`l`: the next stage of the progress ladder (`LADDER_STAGES`, cycling) for the
        annotation target; with no label yet, kept for the current episode until it is labelled."""
        target = self.annotation_target()
        if target is None and not self.current_id:
            self.status = "No episode to record a stage for."
            return
        now = target.stage if target is not None else self.pending_stages.get(self.current_id or "")
        stage = LADDER_STAGES[(LADDER_STAGES.index(now) + 1) % len(LADDER_STAGES) if now in LADDER_STAGES else 1]
        if target is None:
            self.pending_stages[self.current_id or ""] = stage
            self.status = f"Stage seen: {stage} (l: next); it is saved with the label."
            return
        try:
            self.last = self._replace(target, target.label, target.failure_mode, target.note, target.episode_id, stage)
        except Exception as exc:
            self._not_saved(exc)
            return
        where = "" if target.episode_id == self.current_id else " (the episode just labelled)"
        self.status = f"Saved: stage seen {stage} for {target.episode_id}{where} (l: next)"

    def undo(self) -> None:
        """Retract this judge's last label (of any session) and go back to that episode."""
        history = self.source.history()
        if not history:
            self.status = "Nothing to undo."
            return
        record = history[-1]
        try:
            self.source.retract(record.id)
        except Exception as exc:
            self._not_saved(exc)
            return
        self._reload()
        self.last = None
        self.status = f"Undone: {record.label} for {record.episode_id}; label it again."
        self.go(self.episode(record.episode_id) or self.next_episode())

    # ---------------------------------------------------------------- go to episode N

    def listing(self) -> list[tuple[int, str | None]]:
        """(number in this judge's order, this judge's live label or None) for every episode: what
        `j` offers (numbers and the judge's own labels only, in the judge's own order)."""
        return [(n, getattr(self.labels.get(e.id), "label", None)) for n, e in enumerate(self.order, 1)]

    def listing_text(self) -> str:
        short = {"success": "s", "failure": "f", "unsure": "u", None: "-"}
        return "  ".join(f"{n}:{short.get(label, '?')}" for n, label in self.listing())

    def goto(self, target: str | None) -> None:
        """`j`: go to episode `target` (its number in this judge's order, or its id), labelled or
        not; s, f or u there relabels it."""
        text = (target or "").strip()
        episode = self.order[int(text) - 1] if text.isdigit() and 1 <= int(text) <= len(self.order) else None
        episode = episode or self.episode(text)
        if episode is None:
            self.status = f"No episode {text!r}: give its number in your order, 1-{len(self.order)}."
            return
        self.go(episode)
        record = self.labels.get(episode.id)
        where = f"Episode {self.position(episode)} of {len(self.order)} ({episode.id})"
        self.status = (f"{where}: labelled {record.label}; s, f or u relabels it (the old label is kept, "
                       "marked retracted)" if record else f"{where}: not labelled yet")

    # ---------------------------------------------------------------- invalid start

    def _start_only(self, seen_s: float, end_seen: bool) -> bool:
        """Nothing of the current episode's outcome was seen (`queue.start_only`), and this judge
        has not labelled it; else `status` says why not."""
        episode_id = self.current_id
        if episode_id in self.labels or episode_id in self.labelled_here:
            self.status = LABELLED_ALREADY
            return False
        if not start_only(seen_s, end_seen):
            self.status = START_ONLY
            return False
        return True

    def ask_invalid_start(self, seen_s: float, end_seen: bool) -> bool:
        """`x`: whether the face may ask for the reason now (`status` then lists the reasons; else
        it says why not). `seen_s`/`end_seen`: what of the current episode was on screen."""
        if self.current is None:
            self.status = "No episode to mark."
            return False
        if not self._start_only(seen_s, end_seen):
            return False
        self.status = INVALID_PROMPT
        return True

    def invalid_start(self, number: int, seen_s: float, end_seen: bool) -> None:
        """Send the current episode's trial back for a re-run with reason `number` (1-3), judged
        from the start alone: refused when more than START_WINDOW_S of the episode (`seen_s`,
        the furthest clock time shown) or its last frame (`end_seen`) was on screen."""
        episode = self.current
        if episode is None or not 1 <= number <= len(INVALID_START_REASONS):
            self.status = "Invalid start cancelled (no such reason)."
            return
        if not self._start_only(seen_s, end_seen):
            return
        reason = INVALID_START_REASONS[number - 1]
        try:
            self.source.invalidate(episode.id, reason)
        except Exception as exc:
            self._not_saved(exc)
            return
        self.order = [e for e in self.order if e.id != episode.id]
        self._reload()
        self.labels.pop(episode.id, None)
        self.status = f"Saved: invalid start ({reason}) for {episode.id}; the trial will be re-run"
        self.go(self.next_episode())
