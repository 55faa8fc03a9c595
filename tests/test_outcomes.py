"""Outcomes CSV: every bad input is a located one-line error (exit 2); nothing is silently
changed; a layout missing a policy is reported, not dropped."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.analysis.outcomes import consensus_label
from orchestrator.analysis.outcomes_csv import load_outcomes_csv, parse_success
from orchestrator.analysis.stopping import stopping_decision
from orchestrator.cli import main
from orchestrator.core.errors import BadInput


def write(tmp_path: Path, text: str, name: str = "o.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


GOOD = """layout,policy,success
M01,A,1
M01,B,0
M02,A,yes
M02,B,YES
M03,A,False
M03,B,true
"""


def test_success_words_case_insensitive():
    for word, value in [("1", True), ("0", False), ("TRUE", True), ("False", False), (" yes ", True),
                        ("No", False)]:
        assert parse_success(word) is value
    for word in ("2", "y", "t", "", "1.0", "success", "-1"):
        assert parse_success(word) is None


def test_good_csv(tmp_path):
    data = load_outcomes_csv(write(tmp_path, GOOD))
    assert data.policies == ("A", "B")
    assert [(k, a, b) for k, a, b in data.pairs("A", "B")] == [
        (("M01", 0), True, False), (("M02", 0), True, True), (("M03", 0), False, True)]
    assert data.unpaired() == []


def test_columns_in_any_order_with_optionals(tmp_path):
    text = ("Policy,Success,Layout,repeat,stratum,judge,failure_mode\n"
            "A,1,M01,0,edge,ann,\nB,0,M01,0,edge,ann,pushed\nA,0,M01,1,edge,ann,missed\nB,0,M01,1,edge,ann,missed\n")
    data = load_outcomes_csv(write(tmp_path, text))
    assert len(data.pairs("A", "B")) == 2        # pairs on (layout, repeat)
    assert {o.failure_mode for o in data.outcomes if not o.success} == {"pushed", "missed"}
    assert {o.stratum for o in data.outcomes} == {"edge"}


@pytest.mark.parametrize("text, line, fragment", [
    ("layout,policy\nM01,A\n", 1, "missing required column 'success'"),
    ("layout,policy,success,colour\nM01,A,1,red\n", 1, "unknown column 'colour'"),
    ("layout,policy,success\nM01,A,1\nM01,B,maybe\n", 3, "success must be one of 1,0,true,false,yes,no, not 'maybe'"),
    ("layout,policy,success\nM01,A,1\nM01,B,2\n", 3, "not '2'"),
    ("layout,policy,success\nM01,A,1\nM01,B\n", 3, "expected 3 fields"),
    ("layout,policy,success\nM01,A,1,extra\nM01,B,1\n", 2, "expected 3 fields"),
    ("layout,policy,success\nM01,A,1\nM01,B,1\nM01,A,0\n", 4, "duplicate row for layout 'M01', repeat 0, policy 'A' (first at line 2)"),
    ("layout,policy,success,repeat\nM01,A,1,x\nM01,B,1,0\n", 2, "repeat must be a whole number"),
    ("layout,policy,success\n,A,1\nM01,B,1\n", 2, "empty layout"),
    ("layout,policy,success\nM01,,1\nM01,B,1\n", 2, "empty policy"),
    ("layout,policy,success\n", 1, "no data rows"),
    ("layout,policy,success\nM01,A,1\nM02,A,0\n", 2, "only one policy"),
    ("layout,policy,success,stratum\nM01,A,1,edge\nM01,B,1,centre\n", 3, "stratum"),
    ("layout,layout,policy,success\nM01,M01,A,1\n", 1, "appears twice"),
    ("", 1, "empty file"),
])
def test_bad_csv_is_a_located_error(tmp_path, text, line, fragment):
    path = write(tmp_path, text)
    with pytest.raises(BadInput) as info:
        load_outcomes_csv(path)
    first = info.value.problems[0]
    assert first.startswith(f"{path}:{line}: "), first
    assert fragment in first


@pytest.mark.parametrize("raw,fragment", [
    (b"\xef\xbb\xbflayout,policy,success\nM01,A,1\n\xffM01,B,1\n", "not UTF-8 text"),   # after a spreadsheet's BOM
    (b"layout,policy,success\nM01,A,1\nM01,B,1\x00\n", "NUL bytes"),
])
def test_a_file_that_is_not_text_is_located_at_its_line(tmp_path, raw, fragment):
    """The text file rule of `core/textfile.py`, as for a protocol: the line of the bad byte (the
    byte order mark used to shift a bad byte at the start of a line to the line before; a NUL
    byte was read as part of a value)."""
    path = tmp_path / "o.csv"
    path.write_bytes(raw)
    with pytest.raises(BadInput) as info:
        load_outcomes_csv(path)
    first = info.value.problems[0]
    assert first.startswith(f"{path}:3:1:" if fragment == "not UTF-8 text" else f"{path}:3:"), first
    assert fragment in first and "\n" not in first


def test_line_numbers_count_blank_lines_and_quoted_newlines(tmp_path):
    text = 'layout,policy,success,failure_mode\nM01,A,1,\n\n"M0\n2",B,0,missed\nM03,B,nah,\n'
    path = write(tmp_path, text)
    with pytest.raises(BadInput) as info:
        load_outcomes_csv(path)
    assert info.value.problems == [f"{path}:6: success must be one of 1,0,true,false,yes,no, not 'nah'"]


def test_every_bad_row_is_reported(tmp_path):
    path = write(tmp_path, "layout,policy,success\nM01,A,x\nM01,B,1\nM02,A,y\n")
    with pytest.raises(BadInput) as info:
        load_outcomes_csv(path)
    assert [p.split(": ")[0] for p in info.value.problems] == [f"{path}:2", f"{path}:4"]


def test_missing_policy_is_reported_not_dropped(tmp_path):
    data = load_outcomes_csv(write(tmp_path, GOOD + "M04,A,1\n"))
    assert data.unpaired() == [(("M04", 0), "no row for B")]
    assert len(data.pairs("A", "B")) == 3
    # the trial still counts for A's own rate
    assert sum(1 for o in data.judged("A")) == 4


def test_cli_bad_csv_exit_2_one_line(tmp_path, capsys):
    path = write(tmp_path, "layout,policy,success\nM01,A,1\nM01,B,perhaps\n")
    assert main(["report", "--outcomes", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    # cli.py prefixes "orchestrator: " unless the head has two colons (path:line:col)
    assert err[0].removeprefix("orchestrator: ") == \
        f"{path}:3: success must be one of 1,0,true,false,yes,no, not 'perhaps'"


def test_cli_missing_file_exit_2(tmp_path, capsys):
    assert main(["report", "--outcomes", str(tmp_path / "nope.csv")]) == 2
    assert "file not found" in capsys.readouterr().err


def test_cli_missing_policy_is_in_the_output(tmp_path, capsys):
    path = write(tmp_path, GOOD + "M04,A,1\n")
    assert main(["report", "--outcomes", str(path)]) == 0
    out = capsys.readouterr().out
    assert "M04: no row for B" in out
    assert "cannot form a complete pair" in out


def test_consensus_rule():
    assert consensus_label(["success", "success", "failure"]) == "success"
    assert consensus_label(["success", "failure"]) == "unsure"
    assert consensus_label(["success", "unsure"]) == "unsure"
    assert consensus_label(["failure", "failure", "unsure"]) == "failure"
    assert consensus_label(["success"]) == "success"
    assert consensus_label([]) == "unsure"


def test_stopping_decision_on_outcomes(tmp_path):
    rows = ["layout,policy,success"]
    for i in range(30):   # A wins every layout: the e-value grows 2^k / (k + 1)
        rows += [f"L{i},A,1", f"L{i},B,0"]
    data = load_outcomes_csv(write(tmp_path, "\n".join(rows) + "\n"))
    proto = {"policies": {"A": {}, "B": {}}, "analysis": {"alpha": 0.05, "stopping": {"kind": "evalue", "max_layouts": 40}}}
    stop, reason, e = stopping_decision(data.outcomes[:16], proto)   # 8 layouts: 2^8/9 = 28.4 >= 20
    assert stop and "e-value" in reason and e == pytest.approx(2 ** 8 / 9)
    stop, reason, e = stopping_decision(data.outcomes[:14], proto)   # 7 layouts: 2^7/8 = 16 < 20
    assert not stop and e == pytest.approx(16.0)
    ties = [o for o in data.outcomes[:14]]
    proto_max = {"policies": {"A": {}, "B": {}}, "analysis": {"alpha": 0.05, "stopping": {"kind": "evalue", "max_layouts": 7}}}
    stop, reason, _ = stopping_decision(ties, proto_max)
    assert stop and "max_layouts = 7" in reason
    stop, reason, _ = stopping_decision(data.outcomes, {"policies": {"A": {}, "B": {}}, "analysis": {"stopping": "none"}})
    assert not stop and "no stopping rule" in reason


def test_max_layouts_counts_layouts_run_even_unjudged():
    from orchestrator.analysis.outcomes import TrialOutcome

    outs = [TrialOutcome(layout=f"L{i}", repeat=0, policy=p, success=None, state="done")
            for i in range(5) for p in ("A", "B")]
    outs.append(TrialOutcome(layout="L9", repeat=0, policy="A", success=None, state="done"))
    proto = {"policies": {"A": {}, "B": {}}, "analysis": {"alpha": 0.05, "stopping": {"kind": "evalue", "max_layouts": 5}}}
    stop, reason, e = stopping_decision(outs, proto)
    assert stop and "max_layouts = 5" in reason and "0 of them with known outcomes" in reason and e == 1.0
    proto["analysis"]["stopping"]["max_layouts"] = 6
    assert not stopping_decision(outs, proto).stop
