"""Printable 1:1 layout templates (`orchestrator layout print`): SVG, PDF or PNG, A4 or A3.

The template is taped to the table so each cube is placed where the layout says. Everything
is drawn in millimetres on paper at 1:1: one SVG user unit is one millimetre (`width="210mm"`
with `viewBox="0 0 210 297"`), and the PDF figure is the paper size in inches.

The drawing (`drawing.Shape`, `Group`, in the sheet frame of `drawing.to_sheet`) is one for
every output: SVG and PDF here, a raster image (PNG, `PNG_DPI`) through the PDF's matplotlib
figure. The simulated and twin tables are textured with the same drawing (`raster.sheet_image`).

Each page has a content area (margins hold crop marks), a footer with a 10 cm scale bar (check
it with a ruler: printing "fit to page" breaks the scale) and the page number. A layout that
does not fit one page is tiled over several; neighbouring pages overlap by `OVERLAP_MM`, the
overlap is shaded and carries registration crosses drawn at the same table point on both pages.

Drawn in every page, where it falls: the SO-101 base footprint (about 0.10 x 0.10 m, centred at
the origin) with arrows for +x and +y, the x axis (y = 0) with distances from the base centre
(to position the sheet when the base is off the sheet), and every mark as the cube footprint
(the layout's cube size, rotated by its yaw) with a centre cross and its id; and the camera's
fiducials (`fiducials.BOARD`: ArUco markers at fixed table points, each with its quiet zone).
A fiducial that a mark's cube would cover is left off (`printed_fiducials`).
"""

from __future__ import annotations

import math
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from orchestrator.core.durable import publish, staged
from orchestrator.core.errors import BadInput
from orchestrator.design.drawing import Group, Page, Shape, to_sheet
from orchestrator.design.fiducials import BOARD, Fiducial, fiducial_groups, overlaps
from orchestrator.design.protocol import Layout

PAPERS_MM = {"A4": (210.0, 297.0), "A3": (297.0, 420.0)}
MARGIN_MM = 10.0        # crop marks live here; printers cannot print the outermost ~5 mm
FOOTER_MM = 16.0        # scale bar and page label, below the content area
OVERLAP_MM = 12.0       # shared strip between neighbouring pages of a tiled template
PAD_MM = 3.0            # space kept around the drawn marks
BASE_SIZE_M = 0.10      # SO-101 base footprint (square, centred at the origin)
SCALE_BAR_MM = 100.0
PNG_DPI = 300
_EPS = 1e-6


def _square(cx_m: float, cy_m: float, size_m: float, yaw_deg: float) -> list[tuple[float, float]]:
    half = size_m / 2
    c, s = math.cos(math.radians(yaw_deg)), math.sin(math.radians(yaw_deg))
    corners = [(half, half), (-half, half), (-half, -half), (half, -half)]
    return [to_sheet(cx_m + c * dx - s * dy, cy_m + s * dx + c * dy) for dx, dy in corners]


def _label_inside(layout: Layout) -> bool:
    return layout.cube.size_m * 1000 >= 18.0


def _mark_groups(layout: Layout) -> list[Group]:
    groups = []
    size_mm = layout.cube.size_m * 1000
    inside = _label_inside(layout)
    arm = min(4.0, size_mm * 0.2)
    font = 3.5 if inside else 3.0
    for mark in layout.marks:
        u, v = to_sheet(mark.x, mark.y)
        c, s = math.cos(math.radians(mark.yaw_deg)), math.sin(math.radians(mark.yaw_deg))
        # cross arms along the cube's own x and y axes (sheet: x -> -v, y -> -u)
        ax = (-s * arm, -c * arm)   # the cube's x axis in sheet coordinates
        ay = (-c * arm, s * arm)    # the cube's y axis in sheet coordinates
        shapes = [
            Shape("polygon", _square(mark.x, mark.y, layout.cube.size_m, mark.yaw_deg), width=0.35),
            Shape("polyline", [(u - ax[0], v - ax[1]), (u + ax[0], v + ax[1])], width=0.25),
            Shape("polyline", [(u - ay[0], v - ay[1]), (u + ay[0], v + ay[1])], width=0.25),
        ]
        if inside:
            shapes.append(Shape("text", [(u, v - size_mm * 0.3)], text=mark.id, size=font, stroke="none"))
        else:
            shapes.append(Shape("text", [(u + size_mm * 0.75 + 1.0, v)], text=mark.id, size=font,
                                anchor="start", stroke="none"))
        groups.append(Group(
            id=f"mark-{mark.id}", shapes=shapes, css_class="mark",
            data={"mark-id": mark.id, "x-m": repr(mark.x), "y-m": repr(mark.y),
                  "yaw-deg": repr(mark.yaw_deg), "stratum": mark.stratum,
                  "size-mm": f"{size_mm:g}"}))
    return groups


def printed_fiducials(layout: Layout) -> tuple[Fiducial, ...]:
    """The board's fiducials that no mark's drawn cube footprint (at the mark's yaw) would
    cover: the others are left off the sheet, where a cube would hide them anyway."""
    half = layout.cube.size_m / 2.0
    covered = {i for m in layout.marks
               for i in overlaps(m.x, m.y, half * (abs(math.cos(math.radians(m.yaw_deg)))
                                                   + abs(math.sin(math.radians(m.yaw_deg)))))}
    return tuple(f for f in BOARD if f.id not in covered)


def _base_group() -> Group:
    half = BASE_SIZE_M / 2
    outline = [to_sheet(half, half), to_sheet(-half, half), to_sheet(-half, -half), to_sheet(half, -half)]
    grey = "#555555"
    shapes = [
        Shape("polygon", outline, stroke=grey, width=0.4, dash=(3.0, 1.5)),
        Shape("polyline", [(-4.0, 0.0), (4.0, 0.0)], stroke=grey, width=0.25),
        Shape("polyline", [(0.0, -4.0), (0.0, 4.0)], stroke=grey, width=0.25),
        # +x arrow: forward, up the page
        Shape("polyline", [(0.0, 0.0), (0.0, -80.0)], stroke=grey, width=0.4),
        Shape("polygon", [(0.0, -84.0), (-2.5, -78.0), (2.5, -78.0)], stroke=grey, width=0.2, fill=grey),
        Shape("text", [(3.0, -80.0)], text="+x (forward)", size=3.0, anchor="start", stroke="none"),
        # +y arrow: left
        Shape("polyline", [(0.0, 0.0), (-30.0, 0.0)], stroke=grey, width=0.4),
        Shape("polygon", [(-34.0, 0.0), (-28.0, -2.5), (-28.0, 2.5)], stroke=grey, width=0.2, fill=grey),
        Shape("text", [(-31.0, -4.0)], text="+y", size=3.0, stroke="none"),
        Shape("text", [(0.0, 1000 * half - 3.0)], text="SO-101 base (centre = origin)", size=2.8,
              stroke="none"),
    ]
    return Group(id="robot-base", shapes=shapes, css_class="base",
                 data={"size-mm": f"{BASE_SIZE_M * 1000:g}", "origin-u": "0", "origin-v": "0"})


def _axis_group(v_top: float, v_bottom: float) -> Group:
    """The x axis (y = 0) with ticks every 10 mm and distances from the base centre every 50."""
    grey = "#999999"
    shapes = [Shape("polyline", [(0.0, v_bottom), (0.0, v_top)], stroke=grey, width=0.2, dash=(1.0, 1.0))]
    start = math.ceil(-v_bottom / 10.0) * 10
    stop = math.floor(-v_top / 10.0) * 10
    for dist in range(int(start), int(stop) + 1, 10):
        if dist < 60:   # inside the base outline
            continue
        long = dist % 50 == 0
        half = 2.0 if long else 1.0
        shapes.append(Shape("polyline", [(-half, -dist), (half, -dist)], stroke=grey, width=0.2))
        if long:
            shapes.append(Shape("text", [(2.8, -dist + 0.9)], text=f"{dist} mm", size=2.2,
                                anchor="start", stroke="none"))
    return Group(id="x-axis", shapes=shapes, css_class="axis")


def _bbox(groups: list[Group]) -> tuple[float, float, float, float]:
    us = [p[0] for g in groups for s in g.shapes if s.kind != "text" for p in s.points]
    vs = [p[1] for g in groups for s in g.shapes if s.kind != "text" for p in s.points]
    return min(us), min(vs), max(us), max(vs)


def _tiles(extent: float, avail: float) -> int:
    if extent <= avail + _EPS:
        return 1
    return math.ceil((extent - OVERLAP_MM) / (avail - OVERLAP_MM) - _EPS)


def plan_pages(layout: Layout, paper: str = "A4", with_base: bool = False) -> list[Page]:
    """Lay the template out on as few pages of `paper` as possible (portrait on a tie)."""
    if paper not in PAPERS_MM:
        raise BadInput(f"paper must be one of {', '.join(PAPERS_MM)}, not {paper!r}")
    marks = _mark_groups(layout)
    fiducials = fiducial_groups(printed_fiducials(layout))
    base = _base_group()
    u0, v0, u1, v1 = _bbox(marks + fiducials + ([base] if with_base else []))
    if not _label_inside(layout):
        u1 += 12.0  # ids written to the right of small footprints
    u0, v0, u1, v1 = u0 - PAD_MM, v0 - PAD_MM, u1 + PAD_MM, v1 + PAD_MM
    width, height = u1 - u0, v1 - v0

    short, long = PAPERS_MM[paper]
    options = []
    for orientation, (pw, ph) in (("portrait", (short, long)), ("landscape", (long, short))):
        cw, ch = pw - 2 * MARGIN_MM, ph - 2 * MARGIN_MM - FOOTER_MM
        cols, rows = _tiles(width, cw), _tiles(height, ch)
        options.append((cols * rows, orientation != "portrait", orientation, pw, ph, cw, ch, cols, rows))
    _, _, orientation, pw, ph, cw, ch, cols, rows = min(options)

    covered_w = cols * cw - (cols - 1) * OVERLAP_MM
    covered_h = rows * ch - (rows - 1) * OVERLAP_MM
    origin_u = u0 - (covered_w - width) / 2
    origin_v = v0  # spare room goes to the robot's side: more of the axis and base shows
    step_w, step_h = cw - OVERLAP_MM, ch - OVERLAP_MM

    axis = _axis_group(origin_v, origin_v + covered_h)
    registration = _registration_group(cols, rows, origin_u, origin_v, cw, ch)
    world_groups = [axis, base, *fiducials, *marks] + ([registration] if registration.shapes else [])

    pages = []
    count = cols * rows
    for row in range(rows):
        for col in range(cols):
            tu, tv = origin_u + col * step_w, origin_v + row * step_h
            du, dv = MARGIN_MM - tu, MARGIN_MM - tv
            world = [_shift(g, du, dv) for g in world_groups]
            number = row * cols + col + 1
            furniture = [
                _crop_marks(MARGIN_MM, MARGIN_MM, cw, ch),
                _overlap_bands(cw, ch, col < cols - 1, row < rows - 1),
                _scale_bar(MARGIN_MM, MARGIN_MM + ch + 4.0),
                _page_label(layout, paper, orientation, number, count, row, col, pw, MARGIN_MM + ch),
            ]
            furniture = [g for g in furniture if g.shapes]
            pages.append(Page(paper=paper, width=pw, height=ph, orientation=orientation, number=number,
                              count=count, row=row, col=col, content=(MARGIN_MM, MARGIN_MM, cw, ch),
                              world=world, furniture=furniture))
    return pages


def _shift(group: Group, du: float, dv: float) -> Group:
    shapes = [Shape(**{**s.__dict__, "points": [(u + du, v + dv) for u, v in s.points]})
              for s in group.shapes]
    data = dict(group.data)
    if group.id == "robot-base":
        data["origin-u"], data["origin-v"] = f"{du:.4f}", f"{dv:.4f}"
    if group.css_class == "mark":
        u, v = to_sheet(float(group.data["x-m"]), float(group.data["y-m"]))
        data["cx-mm"], data["cy-mm"] = f"{u + du:.4f}", f"{v + dv:.4f}"
    return Group(id=group.id, shapes=shapes, data=data, css_class=group.css_class)


def _registration_group(cols: int, rows: int, ou: float, ov: float, cw: float, ch: float) -> Group:
    """Crosses at fixed table points in every overlap strip: they coincide on both pages."""
    shapes: list[Shape] = []
    step_w, step_h = cw - OVERLAP_MM, ch - OVERLAP_MM

    def cross(u: float, v: float) -> None:
        shapes.append(Shape("polyline", [(u - 4, v), (u + 4, v)], width=0.2))
        shapes.append(Shape("polyline", [(u, v - 4), (u, v + 4)], width=0.2))
        shapes.append(Shape("polygon", _circle(u, v, 2.0), width=0.2))

    for col in range(cols - 1):
        u = ou + (col + 1) * step_w + OVERLAP_MM / 2
        for row in range(rows):
            for frac in (0.25, 0.75):
                cross(u, ov + row * step_h + OVERLAP_MM + frac * (ch - 2 * OVERLAP_MM))
    for row in range(rows - 1):
        v = ov + (row + 1) * step_h + OVERLAP_MM / 2
        for col in range(cols):
            for frac in (0.25, 0.75):
                cross(ou + col * step_w + OVERLAP_MM + frac * (cw - 2 * OVERLAP_MM), v)
    return Group(id="registration", shapes=shapes, css_class="registration")


def _circle(u: float, v: float, r: float, n: int = 24) -> list[tuple[float, float]]:
    return [(u + r * math.cos(2 * math.pi * k / n), v + r * math.sin(2 * math.pi * k / n)) for k in range(n)]


def _crop_marks(x: float, y: float, w: float, h: float) -> Group:
    shapes = []
    gap, length = 1.5, 6.0
    for cx, sx in ((x, -1), (x + w, 1)):
        for cy, sy in ((y, -1), (y + h, 1)):
            shapes.append(Shape("polyline", [(cx + sx * gap, cy), (cx + sx * (gap + length), cy)], width=0.2))
            shapes.append(Shape("polyline", [(cx, cy + sy * gap), (cx, cy + sy * (gap + length))], width=0.2))
    return Group(id="crop-marks", shapes=shapes, css_class="crop")


def _overlap_bands(cw: float, ch: float, right: bool, bottom: bool) -> Group:
    shapes = []
    x0, y0 = MARGIN_MM, MARGIN_MM
    if right:
        shapes.append(Shape("polygon", [(x0 + cw - OVERLAP_MM, y0), (x0 + cw, y0), (x0 + cw, y0 + ch),
                                        (x0 + cw - OVERLAP_MM, y0 + ch)], stroke="#bbbbbb", width=0.15,
                            fill="#eeeeee"))
    if bottom:
        shapes.append(Shape("polygon", [(x0, y0 + ch - OVERLAP_MM), (x0 + cw, y0 + ch - OVERLAP_MM),
                                        (x0 + cw, y0 + ch), (x0, y0 + ch)], stroke="#bbbbbb", width=0.15,
                            fill="#eeeeee"))
    return Group(id="overlap", shapes=shapes, css_class="overlap",
                 data={"overlap-mm": f"{OVERLAP_MM:g}"} if shapes else {})


def _scale_bar(x: float, y: float) -> Group:
    shapes = [Shape("polyline", [(x, y), (x + SCALE_BAR_MM, y)], width=0.4)]
    for cm in range(11):
        tick = 3.0 if cm in (0, 5, 10) else 1.8
        shapes.append(Shape("polyline", [(x + 10 * cm, y), (x + 10 * cm, y + tick)], width=0.3))
    shapes.append(Shape("text", [(x + SCALE_BAR_MM / 2, y + 7.5)],
                        text="10 cm: measure this bar; print at 100 % (actual size)", size=2.6,
                        stroke="none"))
    return Group(id="scale-bar", shapes=shapes, css_class="scale",
                 data={"length-mm": f"{SCALE_BAR_MM:g}", "x0": f"{x:g}", "x1": f"{x + SCALE_BAR_MM:g}"})


def _page_label(layout: Layout, paper: str, orientation: str, number: int, count: int, row: int,
                col: int, page_w: float, y: float) -> Group:
    right = page_w - MARGIN_MM
    where = f"page {number} of {count}" + (f" (row {row + 1}, column {col + 1})" if count > 1 else "")
    shapes = [
        Shape("text", [(right, y + 5.5)], text=f"{layout.name}: {len(layout.marks)} marks, "
              f"cube {layout.cube.size_m * 1000:g} mm", size=3.0, anchor="end", stroke="none", bold=True),
        Shape("text", [(right, y + 10.0)], text=f"{where}, {paper} {orientation}", size=2.6,
              anchor="end", stroke="none"),
        Shape("text", [(right, y + 14.0)], text="robot at the bottom edge, +x up the sheet",
              size=2.4, anchor="end", stroke="none"),
    ]
    return Group(id="page-label", shapes=shapes, css_class="label",
                 data={"page": str(number), "pages": str(count)})


# ---------------------------------------------------------------- SVG


def _fmt(value: float) -> str:
    text = f"{value:.3f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _svg_shape(shape: Shape) -> str:
    if shape.kind == "text":
        (u, v), = shape.points
        weight = ' font-weight="bold"' if shape.bold else ""
        return (f'<text x="{_fmt(u)}" y="{_fmt(v)}" font-size="{_fmt(shape.size)}" '
                f'text-anchor="{shape.anchor}" dominant-baseline="middle"{weight}>{escape(shape.text)}</text>')
    points = " ".join(f"{_fmt(u)},{_fmt(v)}" for u, v in shape.points)
    tag = "polygon" if shape.kind == "polygon" else "polyline"
    style = f'stroke="{shape.stroke}" stroke-width="{_fmt(shape.width)}" fill="{shape.fill or "none"}"'
    if shape.dash:
        style += f' stroke-dasharray="{" ".join(_fmt(d) for d in shape.dash)}"'
    return f'<{tag} points="{points}" {style}/>'


def _svg_group(group: Group, clip: str | None = None) -> str:
    attrs = f" id={quoteattr(group.id)}"
    if group.css_class:
        attrs += f" class={quoteattr(group.css_class)}"
    for key, value in group.data.items():
        attrs += f" data-{key}={quoteattr(value)}"
    if clip:
        attrs += f' clip-path="url(#{clip})"'
    body = "\n    ".join(_svg_shape(s) for s in group.shapes)
    return f"  <g{attrs}>\n    {body}\n  </g>"


def render_svg(page: Page) -> str:
    """One page as an SVG document: 1 user unit = 1 mm."""
    x, y, w, h = page.content
    out = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_fmt(page.width)}mm" '
        f'height="{_fmt(page.height)}mm" viewBox="0 0 {_fmt(page.width)} {_fmt(page.height)}" '
        f'data-paper="{page.paper}" data-orientation="{page.orientation}" '
        f'data-page="{page.number}" data-pages="{page.count}" data-units="mm" '
        'font-family="DejaVu Sans, Helvetica, Arial, sans-serif">',
        f"  <title>layout template, page {page.number} of {page.count}</title>",
        f'  <defs><clipPath id="content"><rect x="{_fmt(x)}" y="{_fmt(y)}" width="{_fmt(w)}" '
        f'height="{_fmt(h)}"/></clipPath></defs>',
        f'  <rect x="0" y="0" width="{_fmt(page.width)}" height="{_fmt(page.height)}" fill="#ffffff"/>',
    ]
    out += [_svg_group(g) for g in page.furniture if g.id == "overlap"]
    out += [_svg_group(g, clip="content") for g in page.world]
    out += [_svg_group(g) for g in page.furniture if g.id != "overlap"]
    out.append("</svg>\n")
    return "\n".join(out)


# ---------------------------------------------------------------- PDF


def page_figure(page: Page):
    """One page as a matplotlib Figure at 1:1 (figure size = paper size in inches)."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Polygon, Rectangle

    pt_per_mm = 72.0 / 25.4
    fig = Figure(figsize=(page.width / 25.4, page.height / 25.4))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, page.width)
    ax.set_ylim(page.height, 0)
    ax.set_axis_off()
    x, y, w, h = page.content
    clip = Rectangle((x, y), w, h, transform=ax.transData, fill=False)
    layers = ([(g, None) for g in page.furniture if g.id == "overlap"]
              + [(g, clip) for g in page.world]
              + [(g, None) for g in page.furniture if g.id != "overlap"])
    order = 0
    for group, clip_path in layers:
        for shape in group.shapes:
            artist = _mpl_shape(ax, shape, pt_per_mm, Polygon)
            order += 1
            artist.set_zorder(order)   # drawn in the SVG's order (matplotlib puts lines over patches)
            if clip_path is not None:
                artist.set_clip_on(True)
                artist.set_clip_path(clip_path)
            else:
                artist.set_clip_on(False)
    return fig


def render_pdf(pages: list[Page], target: Path) -> None:
    """All pages into one PDF at 1:1."""
    from matplotlib.backends.backend_pdf import PdfPages

    with PdfPages(target, metadata={"Title": "layout template", "Creator": "orchestrator layout print"}) as pdf:
        for page in pages:
            pdf.savefig(page_figure(page))


def render_png(page: Page, target: Path) -> None:
    """One page as a PNG at `PNG_DPI` (the PDF's figure, rasterised: 1:1 when printed at that dpi)."""
    page_figure(page).savefig(target, format="png", dpi=PNG_DPI)


def _mpl_shape(ax, shape: Shape, pt_per_mm: float, polygon_cls):
    if shape.kind == "text":
        (u, v), = shape.points
        return ax.text(u, v, shape.text, fontsize=shape.size * pt_per_mm, ha=shape.anchor.replace(
            "start", "left").replace("end", "right").replace("middle", "center"), va="center",
            fontweight="bold" if shape.bold else "normal")
    linestyle = (0, tuple(d * pt_per_mm / max(shape.width * pt_per_mm, 1e-9) for d in shape.dash)) \
        if shape.dash else "solid"
    if shape.kind == "polygon":
        patch = polygon_cls(shape.points, closed=True, facecolor=shape.fill or "none",
                            edgecolor=shape.stroke, linewidth=shape.width * pt_per_mm,
                            linestyle=linestyle)
        ax.add_patch(patch)
        return patch
    us, vs = zip(*shape.points, strict=True)
    (line,) = ax.plot(us, vs, color=shape.stroke, linewidth=shape.width * pt_per_mm,
                      linestyle=linestyle, solid_capstyle="butt")
    return line


# ---------------------------------------------------------------- output


def output_paths(out: Path, pages: int) -> list[Path]:
    """SVG and PNG hold one page: page 1 goes to `out`, page k to `<stem>-k.svg`. PDF: one file."""
    if out.suffix.lower() == ".pdf" or pages == 1:
        return [out]
    return [out] + [out.with_name(f"{out.stem}-{k}{out.suffix}") for k in range(2, pages + 1)]


def check_output(out: Path) -> str:
    """The output format (`svg`, `pdf` or `png`); `BadInput` if the path cannot be written."""
    kind = out.suffix.lower().lstrip(".")
    if kind not in ("svg", "pdf", "png"):
        raise BadInput(f"{out}: --out must end in .svg, .pdf or .png (got {out.suffix or 'no extension'!r})")
    if out.is_dir():
        raise BadInput(f"{out}: --out is a directory; give a file name ending in .{kind}")
    parent = out.parent
    if not parent.is_dir():
        raise BadInput(f"{out}: cannot write: folder {parent} does not exist")
    return kind


def _stage(target: Path, data: bytes | None, writer=None) -> Path:
    """Write to a temporary file beside the target (`durable.staged`); `publish` it later."""
    try:
        tmp_path = staged(target)
    except OSError as exc:
        raise BadInput(f"{target}: cannot write: {exc.strerror}") from None
    try:
        if data is not None:
            tmp_path.write_bytes(data)
        if writer is not None:
            writer(tmp_path)
        return tmp_path
    except OSError as exc:
        tmp_path.unlink(missing_ok=True)
        raise BadInput(f"{target}: cannot write: {exc.strerror}") from None
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise


def write_template(layout: Layout, out: Path, paper: str = "A4", with_base: bool = False) -> list[Path]:
    """Render and write the template; return the files written (atomically, all or none)."""
    out = Path(out)
    kind = check_output(out)
    pages = plan_pages(layout, paper, with_base)
    targets = output_paths(out, len(pages))
    temps: list[Path] = []
    try:
        if kind == "svg":
            for page, target in zip(pages, targets, strict=True):
                temps.append(_stage(target, render_svg(page).encode("utf-8")))
        elif kind == "png":
            for page, target in zip(pages, targets, strict=True):
                temps.append(_stage(target, None, lambda p, page=page: render_png(page, p)))
        else:
            temps.append(_stage(targets[0], None, lambda p: render_pdf(pages, p)))
        for tmp, target in zip(temps, targets, strict=False):
            try:
                publish(tmp, target)
            except OSError as exc:
                raise BadInput(f"{target}: cannot write: {exc.strerror}") from None
    finally:
        for tmp in temps:
            tmp.unlink(missing_ok=True)
    return targets
