"""The layout drawn in text: the marked area seen from above, every mark, the target highlighted.

Orientation: the robot base is below the bottom edge, x (forward, away from the base) points up,
+y (the robot's left) points left. The view is zoomed to the marks (with a margin) so
neighbouring marks stay apart; the caption gives the orientation and where the base is.
"""

from __future__ import annotations

from rich.text import Text

from orchestrator.design.protocol import Layout, Mark

MARGIN_M = 0.03


def _view(layout: Layout) -> tuple[float, float, float, float]:
    """(x0, x1, y0, y1): the marks' bounding box plus a margin, inside the table."""
    t = layout.table
    xs = [m.x for m in layout.marks]
    ys = [m.y for m in layout.marks]
    px = max(MARGIN_M, 0.25 * (max(xs) - min(xs)))
    py = max(MARGIN_M, 0.25 * (max(ys) - min(ys)))
    x0, x1 = max(t.x_min, min(xs) - px), min(t.x_max, max(xs) + px)
    y0, y1 = max(t.y_min, min(ys) - py), min(t.y_max, max(ys) + py)
    if x1 - x0 < 1e-3:
        x0, x1 = x0 - MARGIN_M, x1 + MARGIN_M
    if y1 - y0 < 1e-3:
        y0, y1 = y0 - MARGIN_M, y1 + MARGIN_M
    return x0, x1, y0, y1


def _cell(view: tuple[float, float, float, float], x: float, y: float, cols: int, rows: int) -> tuple[int, int]:
    x0, x1, y0, y1 = view
    col = round((y1 - y) / (y1 - y0) * (cols - 1))
    row = round((x1 - x) / (x1 - x0) * (rows - 1))
    return max(0, min(rows - 1, row)), max(0, min(cols - 1, col))


def render_layout(layout: Layout, target: Mark | None, cols: int = 56, rows: int = 15) -> Text:
    """A framed character map of the marked area with all marks (·) and the target (●, labelled)."""
    view = _view(layout)
    grid = [[" "] * cols for _ in range(rows)]
    styles: dict[tuple[int, int], str] = {}
    for mark in layout.marks:
        r, c = _cell(view, mark.x, mark.y, cols, rows)
        grid[r][c] = "·"
        styles[(r, c)] = "bold"
    if target is not None:
        r, c = _cell(view, target.x, target.y, cols, rows)
        grid[r][c] = "●"
        styles[(r, c)] = "bold reverse yellow"
        label = f" {target.id}"
        start = c + 1 if c + 1 + len(label) <= cols else max(0, c - len(label))
        for i, ch in enumerate(label):
            if grid[r][start + i] == " ":
                grid[r][start + i] = ch
                styles[(r, start + i)] = "bold yellow"
    x0, x1, y0, y1 = view
    bottom = ["─"] * cols
    base_note = ""
    if y0 <= 0.0 <= y1:
        _, base_col = _cell(view, x0, 0.0, cols, rows)
        bottom[base_col] = "▼" if x0 > 0.0 else "▲"
        base_note = (f"robot base {x0 * 100:.0f} cm below ▼" if x0 > 0.0 else "robot base ▲ on the bottom edge")
    text = Text()
    text.append("┌" + "─" * cols + "┐\n", style="dim")
    for r in range(rows):
        text.append("│", style="dim")
        for c in range(cols):
            text.append(grid[r][c], style=styles.get((r, c), ""))
        text.append("│\n", style="dim")
    text.append("└" + "".join(bottom) + "┘\n", style="dim")
    text.append(f"seen from above: forward (x) up, robot's left (+y) to the left\n"
                f"shown: x {x0 * 100:.0f} to {x1 * 100:.0f} cm, y {y0 * 100:.0f} to {y1 * 100:.0f} cm; "
                f"{base_note}", style="italic dim")
    return text


def describe_mark(mark: Mark) -> str:
    """`M07: 19.0 cm forward, 2.5 cm left of the base axis, yaw 0° (centre)`."""
    side = "left" if mark.y >= 0 else "right"
    text = (f"{mark.id}: {mark.x * 100:.1f} cm forward, {abs(mark.y) * 100:.1f} cm {side} of the base axis, "
            f"yaw {mark.yaw_deg:g}°")
    if mark.stratum and mark.stratum != "all":
        text += f" ({mark.stratum})"
    return text
