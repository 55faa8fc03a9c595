"""What a Textual app shows, as plain text: the screen as a judge or an operator reads it, for
assertions. It renders the screen's compositor (Textual's own rendering of the visible widgets);
that is a private part of Textual, so it lives here in the tests and not in the product."""

from __future__ import annotations

import io


def screen_text(app) -> str:
    """The current screen of the running `app` as plain text, at the app's size."""
    from rich.console import Console

    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True,
                      color_system="truecolor", record=True, legacy_windows=False, safe_box=False)
    console.print(app.screen._compositor.render_update(full=True))
    return console.export_text(styles=False)
