"""`orchestrator layout print`: a 1:1 template whose marks are where the layout says.

The SVG is parsed: 1 user unit = 1 mm (`width="210mm"`, `viewBox="0 0 210 297"`); every mark
is a `<g class="mark" data-mark-id=...>` holding its cube footprint polygon; the robot base is
`<g id="robot-base">` whose first polygon is the 100 mm base square centred at the origin.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from support.repo import GRID20, LOCATED

NS = {"svg": "http://www.w3.org/2000/svg"}
A4_PT = (595.276, 841.89)
A3_PT = (841.89, 1190.551)


def points(element) -> list[tuple[float, float]]:
    return [tuple(map(float, p.split(","))) for p in element.get("points").split()]


def centroid(pts):
    return sum(p[0] for p in pts) / len(pts), sum(p[1] for p in pts) / len(pts)


def read_svg(path: Path) -> dict:
    root = ET.parse(path).getroot()
    base = root.find(".//svg:g[@id='robot-base']", NS)
    origin = centroid(points(base.find("svg:polygon", NS)))
    clip = root.find(".//svg:clipPath/svg:rect", NS)
    content = tuple(float(clip.get(k)) for k in ("x", "y", "width", "height"))
    marks = {}
    for g in root.findall(".//svg:g[@class='mark']", NS):
        polygon = points(g.find("svg:polygon", NS))
        lines = [points(pl) for pl in g.findall("svg:polyline", NS)]
        text = g.find("svg:text", NS).text
        marks[g.get("data-mark-id")] = {"polygon": polygon, "cross": lines, "text": text}
    return {"root": root, "origin": origin, "base": points(base.find("svg:polygon", NS)),
            "content": content, "marks": marks}


def yaml_marks(path: Path = GRID20) -> dict:
    data = yaml.safe_load(path.read_text())
    return {m["id"]: m for m in data["marks"]}, data.get("cube", {}).get("size_m", 0.03)


def side_lengths(polygon):
    return [math.dist(polygon[i], polygon[(i + 1) % len(polygon)]) for i in range(len(polygon))]


def inside(polygon, content) -> bool:
    x, y, w, h = content
    return all(x <= u <= x + w and y <= v <= y + h for u, v in polygon)


def check_marks_at_yaml_positions(page: dict, marks: dict, size_m: float, tol: float = 0.01) -> None:
    ou, ov = page["origin"]
    for mark_id, drawn in page["marks"].items():
        spec = marks[mark_id]
        u, v = centroid(drawn["polygon"])
        # 1:1 in mm; +x (forward) is up the sheet, +y (left) is to the left
        assert u - ou == pytest.approx(-1000 * spec["y"], abs=tol), mark_id
        assert v - ov == pytest.approx(-1000 * spec["x"], abs=tol), mark_id
        assert side_lengths(drawn["polygon"]) == pytest.approx([1000 * size_m] * 4, abs=tol)
        for line in drawn["cross"]:  # the centre cross is centred on the mark
            assert centroid(line) == pytest.approx((u, v), abs=tol)
        assert drawn["text"] == mark_id


# ------------------------------------------------------------------ SVG


def test_grid20_svg_a4_marks_where_the_yaml_says(cli, tmp_path):
    out = tmp_path / "t.svg"
    result = cli("layout", "print", GRID20, "--out", out)
    assert result.code == 0, result.err
    assert out.exists() and list(tmp_path.iterdir()) == [out]   # one page, no temp files left
    page = read_svg(out)
    root = page["root"]
    assert (root.get("width"), root.get("height"), root.get("viewBox")) == ("210mm", "297mm", "0 0 210 297")
    marks, size = yaml_marks()
    assert set(page["marks"]) == set(marks) and len(marks) == 20
    check_marks_at_yaml_positions(page, marks, size)
    for drawn in page["marks"].values():   # every mark fully on the printable content area
        assert inside(drawn["polygon"], page["content"])
    # the base outline: a 100 mm square around the origin
    assert side_lengths(page["base"]) == pytest.approx([100.0] * 4, abs=0.01)
    # the scale bar is 100 mm long
    bar = points(root.find(".//svg:g[@id='scale-bar']/svg:polyline", NS))
    assert math.dist(bar[0], bar[-1]) == pytest.approx(100.0)
    assert len(root.findall(".//svg:g[@id='crop-marks']/svg:polyline", NS)) == 8
    # M01 (x 0.16, y -0.075) is to the right of M04 (y +0.075) and nearer the robot than M17
    c = {k: centroid(v["polygon"]) for k, v in page["marks"].items()}
    assert c["M01"][0] > c["M04"][0] and c["M01"][1] > c["M17"][1]


def test_rotated_marks_and_small_cube(cli, tmp_path):
    layout = tmp_path / "rot.yaml"
    layout.write_text(
        "name: rot\ncube: {size_m: 0.012}\nmarks:\n"
        "  - {id: R30, x: 0.20, y: 0.05, yaw_deg: 30}\n"
        "  - {id: R45, x: 0.22, y: -0.05, yaw_deg: -45}\n"
        "  - {id: R00, x: 0.25, y: 0.00}\n")
    out = tmp_path / "rot.svg"
    assert cli("layout", "print", layout, "--out", out).code == 0
    page = read_svg(out)
    marks, size = yaml_marks(layout)
    check_marks_at_yaml_positions(page, marks, size)
    for mark_id, drawn in page["marks"].items():
        yaw = math.radians(marks[mark_id].get("yaw_deg", 0))
        (u0, v0), (u1, v1) = drawn["polygon"][0], drawn["polygon"][1]
        edge = (u1 - u0, v1 - v0)
        along = (-math.sin(yaw), -math.cos(yaw))    # the cube's x axis on the sheet
        across = (-math.cos(yaw), math.sin(yaw))    # the cube's y axis on the sheet
        cross = [abs(edge[0] * d[1] - edge[1] * d[0]) / math.hypot(*edge) for d in (along, across)]
        assert min(cross) == pytest.approx(0, abs=1e-3), mark_id   # edges follow the yaw


def test_template_too_big_for_a4_is_tiled(cli, tmp_path):
    """--with-base on A4 needs two sheets; each page keeps 1:1 and the same origin, and every
    mark lies whole on at least one page."""
    out = tmp_path / "t.svg"
    result = cli("layout", "print", GRID20, "--out", out, "--with-base")
    assert result.code == 0, result.err
    files = sorted(tmp_path.iterdir())
    assert files == [out.with_name("t-2.svg"), out]
    marks, size = yaml_marks()
    whole = set()
    crosses = []
    for path in files:
        page = read_svg(path)
        check_marks_at_yaml_positions(page, marks, size)
        whole |= {k for k, v in page["marks"].items() if inside(v["polygon"], page["content"])}
        ou, ov = page["origin"]
        reg = page["root"].find(".//svg:g[@id='registration']", NS)
        crosses.append({(round(centroid(points(p))[0] - ou, 3), round(centroid(points(p))[1] - ov, 3))
                        for p in reg.findall("svg:polygon", NS)
                        if inside(points(p), page["content"])})
        assert page["root"].get("data-pages") == "2"
    assert whole == set(marks)
    assert crosses[0] & crosses[1], "registration crosses must sit at the same table point on both pages"


def test_wide_layout_tiles_in_both_directions(cli, tmp_path):
    layout = tmp_path / "wide.yaml"
    ids = []
    rows = []
    for i, (x, y) in enumerate([(0.12, -0.25), (0.12, 0.25), (0.28, -0.10), (0.28, 0.10), (0.20, 0.0)]):
        ids.append(f"W{i}")
        rows.append(f"  - {{id: W{i}, x: {x}, y: {y}}}\n")
    layout.write_text("name: wide\ntable: {x_min: 0, x_max: 0.4, y_min: -0.3, y_max: 0.3}\nmarks:\n" + "".join(rows))
    out = tmp_path / "wide.svg"
    assert cli("layout", "print", layout, "--out", out, "--with-base").code == 0
    files = sorted(tmp_path.glob("wide*.svg"))
    assert len(files) >= 4
    marks, size = yaml_marks(layout)
    whole = set()
    for path in files:
        page = read_svg(path)
        check_marks_at_yaml_positions(page, marks, size)
        whole |= {k for k, v in page["marks"].items() if inside(v["polygon"], page["content"])}
    assert whole == set(ids)


def test_a3_fits_grid20_on_one_sheet_and_with_the_base_on_two(cli, tmp_path):
    """grid20 and the camera's fiducials fit one A3 sheet; with the whole base outline too they
    span 401 mm down the sheet (the base's back edge at x = -0.05 m to the far fiducials'
    quiet zone at 0.345 m), more than A3's 384 mm content height: two sheets."""
    out = tmp_path / "a3.svg"
    assert cli("layout", "print", GRID20, "--out", out, "--paper", "a3").code == 0
    assert [p.name for p in tmp_path.iterdir()] == ["a3.svg"]
    page = read_svg(out)
    assert (page["root"].get("width"), page["root"].get("height")) == ("297mm", "420mm")
    check_marks_at_yaml_positions(page, *yaml_marks())
    based = tmp_path / "based"
    based.mkdir()
    assert cli("layout", "print", GRID20, "--out", based / "a3.svg", "--paper", "a3", "--with-base").code == 0
    assert sorted(p.name for p in based.iterdir()) == ["a3-2.svg", "a3.svg"]
    lower = read_svg(based / "a3-2.svg")
    back_edge_v = max(v for _, v in lower["base"])
    _, top, _, height = lower["content"]
    assert top < back_edge_v < top + height   # the base's back edge is printed on the second sheet


# ------------------------------------------------------------------ PDF


def pdf_pages(path: Path) -> list[tuple[float, float]]:
    data = path.read_bytes()
    assert data.startswith(b"%PDF-") and data.rstrip().endswith(b"%%EOF")
    boxes = re.findall(rb"/MediaBox\s*\[\s*([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*\]", data)
    assert len(re.findall(rb"/Type\s*/Page\b(?!s)", data)) == len(boxes)
    return [(float(b[2]) - float(b[0]), float(b[3]) - float(b[1])) for b in boxes]


@pytest.mark.parametrize("args, pages, size", [
    ([], 1, A4_PT),
    (["--with-base"], 2, A4_PT),
    (["--paper", "A3"], 1, A3_PT),
])
def test_pdf_pages_and_size(cli, tmp_path, args, pages, size):
    out = tmp_path / "t.pdf"
    result = cli("layout", "print", GRID20, "--out", out, *args)
    assert result.code == 0, result.err
    assert list(tmp_path.iterdir()) == [out]
    got = pdf_pages(out)
    assert len(got) == pages
    for w, h in got:
        assert (w, h) == pytest.approx(size, abs=0.1)


def test_existing_output_is_replaced(cli, tmp_path):
    out = tmp_path / "t.svg"
    out.write_text("old")
    assert cli("layout", "print", GRID20, "--out", out).code == 0
    assert out.read_text().startswith("<?xml")
    assert [p.name for p in tmp_path.iterdir()] == ["t.svg"]


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize("out, message", [
    ("t.jpg", "must end in .svg, .pdf or .png"),
    ("t", "must end in .svg, .pdf or .png"),
    ("missing/dir/t.svg", "does not exist"),
    ("adir.svg", "is a directory"),
])
def test_bad_output_paths(cli, tmp_path, out, message):
    (tmp_path / "adir.svg").mkdir()
    result = cli("layout", "print", GRID20, "--out", tmp_path / out)
    assert result.code == 2
    assert len(result.err_lines) == 1 and message in result.err and "Traceback" not in result.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir.svg"]   # nothing written


def test_bad_layouts_are_located(cli, tmp_path):
    text = GRID20.read_text().replace("id: M02", "id: M01", 1)
    layout = tmp_path / "dup.yaml"
    layout.write_text(text)
    result = cli("layout", "print", layout, "--out", tmp_path / "t.svg")
    assert result.code == 2
    (line,) = result.err_lines
    match = LOCATED.match(line)
    assert match and match["path"] == str(layout) and "used twice" in line
    assert int(match["line"]) == [i for i, l in enumerate(text.splitlines(), 1) if "id: M01" in l][1]
    missing = cli("layout", "print", tmp_path / "nope.yaml", "--out", tmp_path / "t.svg")
    assert missing.code == 2 and LOCATED.match(missing.err_lines[0]) and "not found" in missing.err
    assert not (tmp_path / "t.svg").exists()


@pytest.mark.parametrize("argv", [
    ["layout", "print", "layouts/grid20.yaml"],                        # no --out
    ["layout", "print", "layouts/grid20.yaml", "--out", "x.svg", "--paper", "A5"],
    ["layout"],
    ["layout", "show", "x"],
])
def test_usage_errors(cli, argv):
    result = cli(*argv)
    assert result.code == 2 and "Traceback" not in result.err
