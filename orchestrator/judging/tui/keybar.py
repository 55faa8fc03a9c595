"""The terminal judge's keys on screen, from `judging.keys` (the list the browser judge uses too):
the key bar under the video, which wraps onto as many lines as the terminal's width needs (every
key stays visible at 80 columns; an item is never split), and the `?` overlay listing every key
with what it does (any key closes it).
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from orchestrator.judging.keys import bar_items, help_lines, pack


class KeyBar(Static):
    """Every key of the judge, packed onto lines of the widget's width."""

    def lines(self, width: int) -> list[str]:
        return pack(bar_items(), max(1, width))

    def render(self) -> str:
        return "\n".join(self.lines(self.content_size.width or self.app.size.width))

    def get_content_height(self, container, viewport, width: int) -> int:
        return len(self.lines(width))


class HelpScreen(ModalScreen[None]):
    """`?`: every key and what it does; any key closes it."""

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > Vertical { width: auto; max-width: 100%; height: auto; max-height: 100%;
                            border: round $primary; background: $surface; padding: 0 1; }
    HelpScreen Static { width: auto; height: auto; }
    """

    def compose(self) -> ComposeResult:
        with Vertical() as box:
            box.border_title = "Every key (any key closes this list)"
            yield Static("\n".join(help_lines()), id="help", markup=False)

    def on_key(self, event) -> None:
        event.stop()
        self.dismiss()
