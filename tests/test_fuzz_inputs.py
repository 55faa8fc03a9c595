"""Bad input everywhere: rig profiles, outcome CSVs and damaged campaign stores.

Whatever the bytes, the command answers exit 0 or exit 2 with located one-line messages;
never a traceback or an "internal error", and a refused input changes no store.
(Protocols and layouts are fuzzed in test_protocol_fuzz.py, judge bundles in test_bundle.py.)
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.cli import main
from orchestrator.core.errors import BadInput
from orchestrator.rigs.profile import load_rig
from orchestrator.store.sqlite import CampaignStore
from support.evidence import accept_edits

ROOT = Path(__file__).resolve().parents[1]
SIM_RIG = (ROOT / "hardware" / "sim.yaml").read_text()
LOCATED = re.compile(r"^.+:\d+(:\d+)?: \S")
FUZZ = settings(max_examples=120, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _mutations(text: str):
    """Strategy: the text with a slice deleted, replaced or duplicated, or random bytes."""
    n = len(text)
    cut = st.tuples(st.integers(0, n), st.integers(0, n)).map(sorted)
    junk = st.text(alphabet=st.characters(codec="utf-8"), max_size=12)
    return st.one_of(
        st.builds(lambda c: text[:c[0]] + text[c[1]:], cut),
        st.builds(lambda c, j: text[:c[0]] + j + text[c[1]:], cut, junk),
        st.builds(lambda c: text[:c[1]] + text[c[0]:], cut),
        st.text(max_size=200),
    )


@FUZZ
@given(_mutations(SIM_RIG))
def test_mutated_rig_profile_loads_or_gives_located_lines(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("rig") / "rig.yaml"
    path.write_bytes(text.encode("utf-8", errors="replace"))
    try:
        load_rig(path)
    except BadInput as exc:
        assert exc.problems
        for line in exc.problems:
            assert LOCATED.match(line), line
            assert "\n" not in line


CSV_CELLS = st.sampled_from(["M01", "M02", "A", "B", "1", "0", "yes", "no", "true", "maybe", "",
                             " ", "2", "-1", "x,y", '"', "edge", "\x00", "é"])
HEADERS = st.sampled_from(["layout,policy,success", "layout,policy,success,repeat",
                           "layout,policy,success,stratum,judge,failure_mode", "layout,policy",
                           "policy,success,layout", "layout;policy;success", "", "a,b,c"])


@FUZZ
@given(header=HEADERS, rows=st.lists(st.lists(CSV_CELLS, min_size=0, max_size=5), max_size=8))
def test_outcome_csv_report_exit_0_or_located_exit_2(tmp_path_factory, capsys, header, rows):
    path = tmp_path_factory.mktemp("csv") / "outcomes.csv"
    path.write_text("\n".join([header, *(",".join(r) for r in rows)]) + "\n", encoding="utf-8")
    code = main(["report", "--outcomes", str(path), "--format", "json"])
    err = capsys.readouterr().err
    assert code in (0, 2), err
    assert "internal error" not in err and "Traceback" not in err
    if code == 2:
        lines = err.strip().splitlines()
        assert lines and all(LOCATED.match(l) or l.startswith("orchestrator: ") for l in lines), err


@pytest.fixture(scope="module")
def small_campaign(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("fuzzdb") / "c"
    assert main(["run", str(ROOT / "tests/data/tiny_protocol.yaml"), "--rig",
                 str(ROOT / "tests/data/tiny_sim.yaml"), "--out", str(out), "--workers", "1",
                 "--stop-after", "2"]) == 0
    return out


@pytest.fixture(scope="module")
def small_report(small_campaign) -> str:
    """The undamaged campaign's JSON report: what an exit 0 on a damaged copy must still say."""
    import contextlib
    import io

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert main(["report", str(small_campaign), "--format", "json"]) == 0
    return buffer.getvalue()


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(offset=st.integers(0, 1 << 16), garbage=st.binary(min_size=1, max_size=64))
def test_damaged_campaign_db_is_named_not_crashed(small_campaign, small_report, tmp_path_factory, capsys,
                                                  offset, garbage):
    """Damage anywhere in campaign.db: `report` refuses with one line naming the campaign store
    (exit 2), or reports under the very protocol and layout the campaign froze (their SHA-256 are
    checked against the stored texts). What SQLite cannot see is not claimed: it keeps no
    checksum of the values in its rows, so a byte changed inside a stored value (a session's
    note, a label, a timing figure) can pass unnoticed (docs/reliability.md "What the campaign
    store guarantees"): a sweep of one space over every byte of such a store (61,440 offsets) had 3,233
    refused and 404 changing the report silently, 127 of them its verdict; none changed the
    frozen protocol's hash or name."""
    copy = tmp_path_factory.mktemp("dmg") / "c"
    shutil.copytree(small_campaign, copy)
    db = copy / "campaign.db"
    data = bytearray(db.read_bytes())
    offset %= len(data)
    data[offset:offset + len(garbage)] = garbage
    db.write_bytes(bytes(data))
    capsys.readouterr()
    code = main(["report", str(copy), "--format", "json"])
    captured = capsys.readouterr()
    err = captured.err
    assert "internal error" not in err and "Traceback" not in err, err
    if code == 0:
        mine, theirs = json.loads(captured.out)["campaign"], json.loads(small_report)["campaign"]
        frozen = ("protocol_sha256", "protocol_name")   # from the frozen texts, checked by their SHA-256
        assert [mine.get(k) for k in frozen] == [theirs.get(k) for k in frozen], f"damage at byte {offset}"
    else:
        assert code == 2, err
        lines = err.strip().splitlines()
        assert len(lines) == 1 and ("campaign store" in lines[0] or "campaign.db" in lines[0]), err


def test_foreign_sqlite_file_is_named(tmp_path, capsys):
    import sqlite3

    (tmp_path / "c").mkdir()
    sqlite3.connect(tmp_path / "c" / "campaign.db").execute("CREATE TABLE x (y)").connection.close()
    assert main(["report", str(tmp_path / "c")]) == 2
    assert "not a campaign store" in capsys.readouterr().err
    with pytest.raises(BadInput, match="foreign"):
        CampaignStore.open_readonly(tmp_path / "c")


def test_a_frozen_protocol_that_lost_its_identity_is_refused_by_report_and_export(small_campaign, tmp_path,
                                                                                    capsys):
    """The damage the helper's fuzz run found at byte 3703: protocol_sha256 blanked, and `report`
    said exit 0 with a blank hash. Every reader of the frozen protocol checks it now (exit 2, one
    line); the undamaged copy (the positive control) reports."""
    import sqlite3

    for column, value in (("protocol_sha256", ""), ("layout_sha256", "0" * 64),
                          ("protocol_text", None), (None, None)):
        copy = tmp_path / f"c-{column}"
        shutil.copytree(small_campaign, copy)
        with sqlite3.connect(copy / "campaign.db") as db:
            if column == "protocol_text":
                db.execute("UPDATE campaign SET protocol_text = replace(protocol_text, 'seed: 7', 'seed: 8')")
            elif column:
                db.execute(f"UPDATE campaign SET {column} = ?", (value,))
        # chained as if the tool had written it: the frozen protocol's own hash must still refuse
        # it (the evidence chain would refuse it first: test_evidence_chain.py)
        accept_edits(copy)
        capsys.readouterr()
        code = main(["report", str(copy), "--format", "json"])
        err = capsys.readouterr().err
        if column is None:
            assert code == 0, err
            continue
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert "campaign.db: the" in err and "does not match its SHA-256" in err, err
