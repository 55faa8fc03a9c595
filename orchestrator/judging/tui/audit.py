"""The judge app's start-state and view keys: `a` first frame beside last, `x` + `1`-`3` an
invalid start (the trial is re-run, never counted; the rule, including "only before the outcome
was on screen", is `JudgeSession.invalid_start`'s), `m` zoom on the mark, `g` the success-height
guide. A mixin of `JudgeApp` (`app.py`), kept apart so each module holds one idea.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from orchestrator.judging.session import JudgeSession
from orchestrator.judging.source import JudgingInfo
from orchestrator.judging.tui.player import Player


class JudgeScreen(Protocol):
    """What these keys use of the app they are mixed into (`JudgeApp`, app.py)."""

    session: JudgeSession
    info: JudgingInfo
    current_id: str | None
    status_line: str
    invalid_prompt: bool
    zoom: bool
    guide: bool

    def query_one(self, selector: type[Player]) -> Player: ...
    def apply(self, rule: Callable[..., None], *args: Any) -> None: ...
    def _overlay_status(self, what: str, on: bool) -> None: ...


class AuditKeys:
    """Actions of `JudgeApp` for the start-state audit and the frame overlays; each method's
    `self` is the app (`JudgeScreen`)."""

    def action_audit(self: JudgeScreen) -> None:
        player = self.query_one(Player)
        player.toggle_audit()
        self.status_line = ("First frame beside last: was the cube on its mark and the arm at rest?"
                            if player.audit else "Back to playback.")

    def _decorate(self: JudgeScreen, camera: str, image):
        """Zoom and guide on frames of a camera whose pose the rig recorded (`overlay`)."""
        episode = self.session.episode(self.current_id)
        pose = episode.camera_poses.get(camera) if episode else None
        if (episode is None or not (self.zoom or self.guide) or not pose or episode.mark.x is None
                or episode.mark.y is None):
            return image
        from orchestrator.judging.overlay import draw, posed_camera

        try:
            posed = posed_camera(pose)
        except (KeyError, TypeError, ValueError, ZeroDivisionError):
            return image
        return draw(image, posed, episode.mark.x, episode.mark.y, self.info.min_height_m,
                    zoom=self.zoom, guide=self.guide)

    def _overlay_status(self: JudgeScreen, what: str, on: bool) -> None:
        episode = self.session.episode(self.current_id)
        posed = sorted(c for c, p in episode.camera_poses.items() if "position" in p) if episode else []
        if not posed:
            self.status_line = (f"{what}: no camera of this episode has a known pose (the simulated rig's "
                                "front camera has one; real cameras and wrist cameras do not)")
        else:
            self.status_line = f"{what} {'on' if on else 'off'} (cameras: {', '.join(posed)})"
        player = self.query_one(Player)
        player._shown = None
        player.show()

    def action_zoom(self: JudgeScreen) -> None:
        self.zoom = not self.zoom
        self._overlay_status("Zoom on the mark", self.zoom)

    def action_guide(self: JudgeScreen) -> None:
        self.guide = not self.guide
        self._overlay_status(f"Success-height guide ({self.info.min_height_m * 100:g} cm: the cube's bottom "
                             "must be above the line)", self.guide)

    def action_invalid(self: JudgeScreen) -> None:
        """`x`: ask for the reason, if the session allows an invalid start from what was on screen
        (paused meanwhile, so choosing the reason does not play the episode past its start)."""
        player = self.query_one(Player)
        player.playing = False
        self.invalid_prompt = self.session.ask_invalid_start(player.seen_s, player.end_seen)
        self.status_line = self.session.status

    def invalid_start(self: JudgeScreen, number: int) -> None:
        """Send the current episode's trial back for a re-run with reason `number` (1-3)."""
        self.invalid_prompt = False
        player = self.query_one(Player)
        self.apply(self.session.invalid_start, number, player.seen_s, player.end_seen)
