"""`orchestrator validate`: every bad-input class exits 2 with one located line per problem.

Lines are `path:line:col: message`, and the line is the line of the offending key in the YAML
source (docs/design.md section 5). No traceback, ever, for a bad file.
"""

from __future__ import annotations

import os
import random

import pytest

from support.cli import run_module
from support.repo import GRID20, LOCATED, REPO, line_of, sim_protocol_text

SIM = sim_protocol_text()
GRID = GRID20.read_text()


def assert_located(result, path, expected: list[tuple[int | None, str]]):
    """Exit 2, nothing on stdout, every stderr line located in `path`, and for each expected
    (line, substring) one stderr line with that line number that contains the substring."""
    assert result.code == 2, result
    assert "Traceback" not in result.err
    lines = result.err_lines
    assert lines, "no message"
    parsed = []
    for line in lines:
        match = LOCATED.match(line)
        assert match, f"not located: {line!r}"
        parsed.append(match)
    for want_line, want_text in expected:
        hits = [m for m in parsed if want_text in m["message"]
                and (want_line is None or int(m["line"]) == want_line)]
        assert hits, f"no line {want_line} with {want_text!r} in:\n{result.err}"
        assert all(m["path"] == str(path) for m in hits), result.err
    return parsed


# ------------------------------------------------------------------ shipped files


@pytest.mark.parametrize("name", ["sim_demo.yaml", "pick_cube_ab.yaml"])
def test_shipped_protocols_validate(cli, name):
    result = cli("validate", REPO / "protocols" / name)
    assert result.code == 0, result.err
    assert ": ok: " in result.out
    assert result.err == ""


# ------------------------------------------------------------------ unreadable files


@pytest.mark.parametrize("content, text, line", [
    (b"", "is empty", 1),
    (b"\n\n   \n", "is empty", 1),
    (b"# only a comment\n", "is empty", 1),
    (b"- A\n- B\n", "must be a mapping", 1),
    (b"just a sentence\n", "must be a mapping", 1),
    (b"42\n", "must be a mapping", 1),
    (b"name: x\nseed: 1\ntask: caf\xe9 \xff\n", "not UTF-8", 3),
    (b"name: x\n\x00\x01\x02\n", "NUL bytes", 2),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "not UTF-8", 1),
    (b"name: [unclosed\nseed: 1\n", "YAML syntax error", None),
    (b"name: x\norder: balanced: twice\n", "YAML syntax error", 2),
    (b"name: x\n  seed: 1\n bad indent\n", "YAML syntax error", None),
    (b"name: 'unterminated\n", "YAML syntax error", None),
    (b"a: &x [*x]\n", "unknown key 'a'", 1),
    (b"policies: !!python/object:os.system {}\n", "YAML syntax error", 1),
], ids=["empty", "blank", "comment", "list", "scalar-string", "scalar-int", "latin1", "nul", "png",
        "unclosed-flow", "double-colon", "bad-indent", "unterminated-quote", "alias", "python-tag"])
def test_unusable_files(cli, tmp_path, content, text, line):
    path = tmp_path / "protocol.yaml"
    path.write_bytes(content)
    assert_located(cli("validate", path), path, [(line, text)])


def test_binary_garbage(cli, tmp_path):
    rng = random.Random(7)
    for k in range(20):
        path = tmp_path / f"garbage{k}.yaml"
        path.write_bytes(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400))))
        result = cli("validate", path)
        assert result.code == 2, result
        assert len(result.err_lines) == 1
        assert_located(result, path, [(None, "")])


def test_aliases_cannot_loop_or_explode(cli, tmp_path):
    path = tmp_path / "protocol.yaml"
    # a recursive alias inside real fields
    path.write_text(_edit("episode: {fps: 30, duration_s: 12}", "episode: &e {fps: 30, duration_s: *e}"))
    assert_located(cli("validate", path), path, [(line_of(path.read_text(), "episode:"), "episode.duration_s")])
    # "billion laughs": 10**9 leaves if expanded
    bomb = "".join(f"l{k}: &l{k} [" + ", ".join([f"*l{k - 1}"] * 10) + "]\n" for k in range(1, 10))
    path.write_text("l0: &l0 [lol]\n" + bomb + "policies: *l9\n")
    result = cli("validate", path)
    assert_located(result, path, [(1, "unknown key 'l0'"), (11, "policies")])


def test_nonexistent_path(cli, tmp_path):
    path = tmp_path / "nope.yaml"
    assert_located(cli("validate", path), path, [(1, "not found")])


def test_directory(cli, tmp_path):
    assert_located(cli("validate", tmp_path), tmp_path, [(1, "directory")])


def test_no_argument_is_usage_error(cli):
    result = cli("validate")
    assert result.code == 2
    assert "Traceback" not in result.err


# ------------------------------------------------------------------ protocol content


def _edit(old: str, new: str, text: str = SIM) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


PROTOCOL_CASES = {
    # wrong types
    "fps-string": (_edit("fps: 30", 'fps: "fast"'), [("episode: {fps", "episode.fps")]),
    "seed-string": (_edit("seed: 20261129", "seed: twenty"), [("seed:", "seed")]),
    "trials-float": (_edit("trials_per_layout: 1", "trials_per_layout: 1.5"), [("trials_per_layout", "trials_per_layout")]),
    "policies-list": (_edit("  A: {type: scripted, aim_noise_mm: 3}\n  B: {type: scripted, aim_noise_mm: 12}",
                            "  - A\n  - B"), [("policies:", "policies")]),
    "episode-scalar": (_edit("episode: {fps: 30, duration_s: 12}", "episode: 12"), [("episode:", "episode")]),
    "noise-list": (_edit("aim_noise_mm: 3", "aim_noise_mm: [3]"), [("A: {type", "policies.A.aim_noise_mm")]),
    "order-unknown": (_edit("order: balanced", "order: alphabetical"), [("order:", "order")]),
    # out of range
    "fps-zero": (_edit("fps: 30", "fps: 0"), [("episode: {fps", "greater than 0")]),
    "fps-negative": (_edit("fps: 30", "fps: -30"), [("episode: {fps", "episode.fps")]),
    "duration-zero": (_edit("duration_s: 12", "duration_s: 0"), [("duration_s", "episode.duration_s")]),
    "duration-negative": (_edit("duration_s: 12", "duration_s: -1.5"), [("duration_s", "episode.duration_s")]),
    "height-zero": (_edit("min_height_m: 0.04", "min_height_m: 0"), [("min_height_m", "success.min_height_m")]),
    "height-negative": (_edit("min_height_m: 0.04", "min_height_m: -0.04"), [("min_height_m", "success.min_height_m")]),
    "alpha-zero": (_edit("alpha: 0.05", "alpha: 0"), [("alpha:", "analysis.alpha")]),
    "alpha-one": (_edit("alpha: 0.05", "alpha: 1"), [("alpha:", "analysis.alpha")]),
    "alpha-big": (_edit("alpha: 0.05", "alpha: 1.5"), [("alpha:", "analysis.alpha")]),
    "alpha-negative": (_edit("alpha: 0.05", "alpha: -0.05"), [("alpha:", "analysis.alpha")]),
    # policies
    "one-policy": (_edit("  B: {type: scripted, aim_noise_mm: 12}\n", ""), [("policies:", "at least 2 policies")]),
    "no-policies": (_edit("  A: {type: scripted, aim_noise_mm: 3}\n  B: {type: scripted, aim_noise_mm: 12}",
                          "  {}"), [("policies:", "at least 2 policies")]),
    "unknown-type": (_edit("B: {type: scripted", "B: {type: magic"), [("B: {type", "magic")]),
    "missing-type": (_edit("B: {type: scripted, aim_noise_mm: 12}", "B: {aim_noise_mm: 12}"), [("B: {", "policies.B")]),
    "lerobot-no-path": (_edit("B: {type: scripted, aim_noise_mm: 12}", "B: {type: lerobot}"),
                        [("B: {type", "missing required key 'policies.B.path'")]),
    "bad-label": (_edit("  B: {type", "  'B/x': {type"), [("policies:", "policy label")]),
    # unknown keys, with did-you-mean
    "unknown-top": (_edit("seed: 20261129", "seed: 20261129\nsede: 1"), [("sede:", "did you mean 'seed'")]),
    "misspelt-top": (_edit("trials_per_layout:", "trials_per_layot:"),
                     [("trials_per_layot", "did you mean 'trials_per_layout'")]),
    "unknown-nested": (_edit("min_height_m", "min_hieght_m"), [("min_hieght_m", "did you mean 'min_height_m'")]),
    "unknown-policy-key": (_edit("aim_noise_mm: 3", "aim_nois_mm: 3"),
                           [("aim_nois_mm", "unknown key 'policies.A.aim_nois_mm' (did you mean 'aim_noise_mm'?)")]),
    "unknown-episode-key": (_edit("duration_s: 12}", "duration_s: 12, fsp: 3}"), [("fsp", "did you mean 'fps'")]),
    # missing keys
    "missing-seed": (_edit("seed: 20261129\n", ""), [(None, "missing required key 'seed'")]),
    "missing-episode": (_edit("episode: {fps: 30, duration_s: 12}\n", ""), [(None, "missing required key 'episode'")]),
    # layout file
    "missing-layout": (_edit("layout: layout.yaml", "layout: nowhere/grid.yaml"), [("layout:", "not found")]),
    "layout-empty-string": (_edit("layout: layout.yaml", "layout: ''"), [("layout:", "layout")]),
    "layout-is-dir": (_edit("layout: layout.yaml", "layout: ."), [("layout:", "")]),
    # stopping rule
    "stopping-too-long": (_edit("stopping: none", "stopping: {kind: evalue, max_layouts: 500}"),
                          [("stopping", "max_layouts")]),
    "duplicate-failure-modes": (_edit("[missed, pushed,", "[missed, missed,"), [("failure_modes", "unique")]),
}


@pytest.mark.parametrize("case", list(PROTOCOL_CASES))
def test_protocol_problems_are_located(cli, protocol_dir, case):
    text, expected = PROTOCOL_CASES[case]
    path = protocol_dir / "protocol.yaml"
    path.write_text(text)
    result = cli("validate", path)
    if case == "layout-is-dir":  # the layout "file" is the protocol's folder: located in the folder path
        assert result.code == 2 and "directory" in result.err and "Traceback" not in result.err
        assert all(LOCATED.match(line) for line in result.err_lines), result.err
        return
    want = [(line_of(text, needle) if needle else None, message) for needle, message in expected]
    assert_located(result, path, want)


def test_several_problems_one_line_each(cli, protocol_dir):
    text = SIM
    for old, new in [("fps: 30", "fps: 0"), ("duration_s: 12", "duration_s: -1"),
                     ("min_height_m: 0.04", "min_height_m: 0"), ("alpha: 0.05", "alpha: 2"),
                     ("seed: 20261129", "seed: 1\nsede: 2")]:
        text = _edit(old, new, text)
    path = protocol_dir / "protocol.yaml"
    path.write_text(text)
    result = cli("validate", path)
    parsed = assert_located(result, path, [
        (line_of(text, "fps: 0"), "episode.fps"),
        (line_of(text, "fps: 0"), "episode.duration_s"),
        (line_of(text, "min_height_m"), "success.min_height_m"),
        (line_of(text, "alpha"), "analysis.alpha"),
        (line_of(text, "sede"), "did you mean 'seed'"),
    ])
    assert len(parsed) == 5
    # columns distinguish two keys on one line
    cols = {m["message"].split(":")[0]: int(m["col"]) for m in parsed}
    assert cols["episode.fps"] < cols["episode.duration_s"]


# ------------------------------------------------------------------ layout content


def _layout_edit(old: str, new: str) -> str:
    assert old in GRID, old
    return GRID.replace(old, new, 1)


LAYOUT_CASES = {
    "duplicate-id": (_layout_edit("id: M02", "id: M01"), [("id: M01", 2, "'M01' is used twice")]),
    "too-far": (_layout_edit("x: 0.280, y: +0.075", "x: 0.380, y: +0.075"), [("M20", 1, "from the base")]),
    "too-near": (_layout_edit("x: 0.160, y: -0.075", "x: 0.050, y: -0.075"), [("M01", 1, "from the base")]),
    "off-table": (_layout_edit("y_max: 0.25", "y_max: 0.05"),
                  [("M04", 1, "not on the table"), ("M20", 1, "not on the table")]),
    "behind-table": (_layout_edit("x_min: -0.05, x_max: 0.40", "x_min: 0.20, x_max: 0.40"),
                     [("M01", 1, "not on the table")]),
    "x-string": (_layout_edit("x: 0.160, y: -0.075", 'x: "abc", y: -0.075'), [("M01", 1, "marks.0.x")]),
    "x-nan": (_layout_edit("x: 0.160, y: -0.075", "x: .nan, y: -0.075"), [("M01", 1, "finite")]),
    "unknown-mark-key": (_layout_edit("yaw_deg: 0, stratum: edge}", "yaw: 0, stratum: edge}"),
                         [("M01", 1, "did you mean 'yaw_deg'")]),
    "no-marks": (GRID.split("marks:")[0] + "marks: []\n", [("marks:", 1, "marks")]),
    "cube-too-big": (_layout_edit("size_m: 0.03", "size_m: 0.5"), [("size_m", 1, "cube.size_m")]),
    "table-inverted": (_layout_edit("x_min: -0.05, x_max: 0.40", "x_min: 0.40, x_max: -0.05"),
                       [("table:", 1, "x_min < x_max")]),
    "syntax": (_layout_edit("  - {id: M05", "  - {id: M05 ]"), [(None, 1, "YAML syntax error")]),
    "list": ("- {id: M01, x: 0.2, y: 0}\n", [(None, 1, "must be a mapping")]),
    "empty": ("", [(None, 1, "empty")]),
}


@pytest.mark.parametrize("case", list(LAYOUT_CASES))
def test_layout_problems_are_located_in_the_layout(cli, protocol_dir, case):
    text, expected = LAYOUT_CASES[case]
    layout = protocol_dir / "layout.yaml"
    layout.write_text(text)
    result = cli("validate", protocol_dir / "protocol.yaml")
    want = [(line_of(text, needle, nth) if needle else None, message) for needle, nth, message in expected]
    assert_located(result, layout.resolve(), want)


# ------------------------------------------------------------------ paths


def test_relative_layout_resolved_from_protocol_folder(cli, tmp_path, monkeypatch):
    (tmp_path / "protocols").mkdir()
    (tmp_path / "layouts").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "layouts" / "grid.yaml").write_text(GRID)
    protocol = tmp_path / "protocols" / "p.yaml"
    protocol.write_text(sim_protocol_text("../layouts/grid.yaml"))
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert cli("validate", protocol).code == 0
    assert cli("validate", os.path.relpath(protocol)).code == 0
    # a layout next to the cwd but not next to the protocol is not used
    (tmp_path / "elsewhere" / "g.yaml").write_text(GRID)
    protocol.write_text(sim_protocol_text("g.yaml"))
    result = cli("validate", "../protocols/p.yaml")
    assert_located(result, "../protocols/p.yaml", [(line_of(protocol.read_text(), "layout:"), "not found")])
    assert str(tmp_path / "protocols" / "g.yaml") in result.err


@pytest.mark.subprocess
def test_subprocess_exit_codes_and_messages(tmp_path):
    """Once through a real interpreter: exit 2 with located lines, exit 0 from another cwd."""
    bad = tmp_path / "bad.yaml"
    text = _edit("alpha: 0.05", "alpha: 1.5", sim_protocol_text(str(GRID20)))
    bad.write_text(text)
    result = run_module("validate", "bad.yaml", cwd=tmp_path)
    assert result.code == 2
    assert result.err_lines == [f"bad.yaml:{line_of(text, 'alpha')}:35: analysis.alpha: Input should be less than 1"]
    ok = run_module("validate", os.path.relpath(REPO / "protocols" / "sim_demo.yaml", tmp_path), cwd=tmp_path)
    assert ok.code == 0, ok.err


def test_control_characters_in_keys_stay_on_one_line(cli, protocol_dir):
    """Found by the fuzz test: a key holding U+001E or U+2028 split the message in two."""
    text = _edit("  B: {type: scripted, aim_noise_mm: 12}",
                 '  B: {type: scripted, aim_noise_mm: 12}\n  "\\x1E": null\n  "a\\u2028b": 1')
    path = protocol_dir / "protocol.yaml"
    path.write_text(text)
    result = cli("validate", path)
    assert_located(result, path, [(line_of(text, "x1E"), "policies.\\x1e"),
                                  (line_of(text, "u2028"), "policies.a\\u2028b")])
    assert len(result.err_lines) == 2


def test_control_characters_in_paths_stay_on_one_line(cli, protocol_dir):
    """Found by the fuzz test: `layout: "\\r"` printed the looked-for path across two lines."""
    text = _edit("layout: layout.yaml", 'layout: "x\\ry\\n"')
    path = protocol_dir / "protocol.yaml"
    path.write_text(text)
    result = cli("validate", path)
    assert_located(result, path, [(line_of(text, "layout:"), "not found")])
    assert len(result.err_lines) == 1 and "x\\ry\\n" in result.err


def test_yaml_syntax_error_names_where_the_construct_opened_and_where_yaml_noticed(tmp_path, cli):
    """An unclosed `{` on line 3 is located at line 3 (where the user has to look); the message
    also names where PyYAML noticed (PyYAML's own marks are the oracle)."""
    import yaml

    text = "name: x\nseed: 1\npolicies: {A: {type: scripted}\norder: balanced\ntrials_per_layout: 1\n"
    with pytest.raises(yaml.MarkedYAMLError) as caught:
        yaml.safe_load(text)
    opened, noticed = caught.value.context_mark, caught.value.problem_mark
    assert opened.line + 1 == 3 and noticed.line + 1 > 3
    (tmp_path / "p.yaml").write_text(text)
    result = cli("validate", tmp_path / "p.yaml")
    assert result.code == 2 and len(result.err_lines) == 1, result.err
    m = LOCATED.match(result.err_lines[0])
    assert m and (int(m["line"]), int(m["col"])) == (3, opened.column + 1)
    assert f"at line {noticed.line + 1}, column {noticed.column + 1}" in m["message"]
    assert "while parsing a flow mapping that starts here" in m["message"]


def test_validate_says_what_the_protocol_leaves_to_the_default_and_the_draw(cli, tmp_path):
    """`ok` with no `success:` now names the default test it will freeze, and with `order:
    balanced` on 19 marks how the draw splits who goes first (10/9: it cannot be even); the
    shipped 20-mark demo splits 10/10."""
    layout = tmp_path / "layout19.yaml"
    layout.write_text("\n".join(line for line in (REPO / "layouts" / "grid20.yaml").read_text().splitlines()
                                if "id: M20" not in line) + "\n")
    text = (REPO / "protocols" / "sim_demo.yaml").read_text().replace("../layouts/grid20.yaml", str(layout))
    assert "success:" in text
    path = tmp_path / "p.yaml"
    path.write_text("\n".join(line for line in text.splitlines() if not line.startswith("success:")) + "\n")
    result = cli("validate", path)
    assert result.code == 0 and result.err == "", result.err
    lines = result.out.strip().splitlines()
    assert len(lines) == 3 and ": ok: sim-demo: 2 policies (A, B), 19 marks x 1" in lines[0]
    assert lines[1] == (f"{path}: success: none given, so the default: lift_and_hold (min_height_m 0.04, "
                        "hold_s 1): cube bottom lifted >= 4 cm, both jaws on it, held >= 1 s")
    assert lines[2].startswith(f"{path}: order balanced: first in its pairs of 19: A on ")
    firsts = sorted(int(part.split(" on ")[1].split()[0].rstrip(",")) for part in lines[2].split(": ")[-1].split(", "))
    assert firsts == [9, 10] and lines[2].endswith("(19 cannot be split evenly)")
    shipped = cli("validate", REPO / "protocols" / "sim_demo.yaml").out.strip().splitlines()
    assert len(shipped) == 2 and shipped[1].endswith("order balanced: first in its pairs of 20: A on 10, B on 10")


def test_an_unknown_policy_type_is_named_in_our_words_with_the_known_ones(cli, tmp_path):
    """A misspelt policy type gave pydantic's own words ("Input tag 'lerobt' found using 'type'
    does not match any of the expected tags: ..."); now one located line names it, the nearest
    known type and every known one (the protocol's POLICY_SPECS)."""
    from orchestrator.design.protocol import POLICY_SPECS

    text = (REPO / "protocols" / "sim_demo.yaml").read_text().replace("../layouts/grid20.yaml",
                                                                     str(REPO / "layouts" / "grid20.yaml"))
    path = tmp_path / "p.yaml"
    path.write_text(text.replace("A: {type: scripted, aim_noise_mm: 3}", "A: {type: lerobt, path: x}"))
    result = cli("validate", path)
    assert result.code == 2 and len(result.err_lines) == 1, result.err
    row = line_of(path.read_text(), "A: {type: lerobt")
    known = ", ".join(POLICY_SPECS)
    assert result.err_lines[0] == (f"{path}:{row}:3: policies.A: unknown type 'lerobt' (did you mean "
                                   f"'lerobot'?); known: {known}")
    assert "Input tag" not in result.err and "expected tags" not in result.err
