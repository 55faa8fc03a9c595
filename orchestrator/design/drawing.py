"""The template's drawing: primitives in millimetres that every output renders (SVG and PDF in
`template`, the raster in `raster`), and the map from the layout frame onto the sheet.

Sheet frame. Seen from above with the robot at the bottom edge of the sheet, looking up the
sheet: the base frame's +x (forward) points up the page and +y (left) points to the left.
A point (x, y) in metres maps to sheet millimetres (u, v) = (-1000 y, -1000 x) relative to
the base centre (u to the right, v down the page), which is a rotation, not a mirror image.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Shape:
    """One primitive in sheet millimetres (world shapes) or page millimetres (page furniture).

    kind: polygon (closed), polyline, text. `attrs` become `data-*` / id attributes in SVG.
    """

    kind: str
    points: list[tuple[float, float]]
    stroke: str = "#000000"
    width: float = 0.25                 # line width, mm
    fill: str | None = None
    dash: tuple[float, ...] | None = None
    text: str = ""
    size: float = 3.0                   # font size, mm
    anchor: str = "middle"              # start | middle | end
    bold: bool = False


@dataclass
class Group:
    """Shapes that belong together (a mark, the base, the scale bar); `id` and `data` for SVG."""

    id: str
    shapes: list[Shape]
    data: dict[str, str] = field(default_factory=dict)
    css_class: str = ""


@dataclass
class Page:
    paper: str
    width: float
    height: float
    orientation: str
    number: int
    count: int
    row: int
    col: int
    content: tuple[float, float, float, float]    # x, y, w, h of the content area (page mm)
    world: list[Group]                            # in page mm, clipped to the content area
    furniture: list[Group]                        # page mm, not clipped


def to_sheet(x_m: float, y_m: float) -> tuple[float, float]:
    """Base frame (metres) -> sheet (mm; u right, v down the page; origin at the base centre)."""
    return (-1000.0 * y_m, -1000.0 * x_m)
