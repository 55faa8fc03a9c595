"""The evidence chain (store/chain.py), in process: its digests recomputed from their definition,
every write of the store extending it, an edit made outside the tool named by the first row that
does not match, a write refused on an edited row, the migration of an older store, and a judge's
sealed connection that writes through the chain without reading it."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
import struct
import time
from pathlib import Path

import pytest

from orchestrator.core.errors import BadInput
from orchestrator.design.schedule import Trial
from orchestrator.store import chain
from orchestrator.store.sqlite import CampaignStore, EpisodeRecord, new_episode_id
from support.tiny import PROTOCOL

FIXTURE = Path(__file__).parent / "fixtures" / "schema1" / "campaign.db"


def _by_the_definition(row: dict) -> str:
    """The row digest as the module docstring defines it, written out again independently."""
    parts = b""
    for name in sorted(row):
        value = row[name]
        if value is None:
            continue
        if isinstance(value, int):
            tag, data = "i", str(value).encode("ascii")
        elif isinstance(value, float):
            tag, data = "f", struct.pack(">d", value)
        else:
            tag, data = "s", value.encode("utf-8")
        parts += name.encode() + b"\0" + tag.encode() + hashlib.sha256(data).digest()
    return hashlib.sha256(parts).hexdigest()


def test_the_row_digest_follows_its_definition():
    row = {"id": 7, "label": "success", "created_at": 1712345678.25, "note": None, "judge": "alice"}
    assert chain.row_sha256(row) == _by_the_definition(row)
    assert chain.row_sha256(dict(reversed(list(row.items())))) == chain.row_sha256(row)   # column order
    assert chain.row_sha256({**row, "added_later": None}) == chain.row_sha256(row)       # a NULL column
    # every value and its type count: 1, 1.0 and "1" differ; so does one changed byte
    variants = [{**row, "id": 1}, {**row, "id": 1.0}, {**row, "id": "1"}, {**row, "label": "failure"},
                {**row, "created_at": 1712345678.2500002}, {**row, "note": ""}]
    digests = {chain.row_sha256(v) for v in variants} | {chain.row_sha256(row)}
    assert len(digests) == len(variants) + 1
    # a copy that leaves a value out (its tag and digest) has the same digest
    assert chain.row_sha256({**row, "judge": chain.redacted("alice")}) == chain.row_sha256(row)
    assert chain.row_sha256({**row, "judge": chain.redacted("mallory")}) != chain.row_sha256(row)


def test_the_entry_digest_follows_its_definition():
    prev, at = "ab" * 32, 1712345678.5
    text = "\x1f".join([prev, "12", "judgments", "7", "cd" * 32, struct.pack(">d", at).hex()])
    assert chain.entry_digest(prev, 12, "judgments", "7", "cd" * 32, at) == hashlib.sha256(text.encode()).hexdigest()


def _schedule(n: int = 4) -> list[Trial]:
    return [Trial(slot=i, unit=i // 2, mark_id=f"M{i // 2:02d}", repeat=0, position=i % 2, policy="AB"[i % 2],
                  seed=100 + i) for i in range(n)]


def _new(directory: Path) -> CampaignStore:
    """A store of the tiny protocol's frozen texts (a judge's facts are read from them) with a
    schedule of its own."""
    from orchestrator.design.protocol import load_protocol

    loaded = load_protocol(PROTOCOL)
    text = loaded.text.replace("judging: {judges: 1,", "judging: {judges: 1, auto: counted, audit: 0.5,")  # chains `audit`
    assert text != loaded.text
    return CampaignStore.create(directory, name="c", protocol_path="p.yaml", protocol_text=text,
                                protocol_sha256="0" * 64, layout_text=loaded.layout_text, layout_sha256="1" * 64,
                                rig_path="r.yaml", rig_text="{}", simulated=True, schedule=_schedule(), audit=0.5)


def _finish(store: CampaignStore, slot: int, success: bool = True) -> str:
    episode_id = new_episode_id()
    attempt = store.begin_attempt(slot, episode_id)
    store.finish_attempt(attempt, EpisodeRecord(
        episode_id=episode_id, frames=5, duration_s=1.0, cameras=["front"], files={"front": "v.mp4"},
        digests={"v.mp4": (10, "e" * 64)}, physics_success=success, auto=("unsure", "band straddles")))   # unsure: every episode in the judges' queue
    return episode_id


@pytest.fixture
def worked(tmp_path) -> Path:
    """A store through every write the tool makes: sessions, attempts done, aborted (re-run and
    scored), interrupted, an invalidated episode, labels added and retracted, events, finish."""
    directory = tmp_path / "c"
    store = _new(directory)
    session = store.begin_session()
    first = _finish(store, 0)
    _finish(store, 1, success=False)
    store.abort_attempt(store.begin_attempt(2, new_episode_id()), "operator: e-stop", "operator_unsafe")
    store.abort_attempt(store.begin_attempt(2, new_episode_id()), "policy: non-finite action", "policy", "failure")
    store.begin_attempt(3, new_episode_id())
    store.recover_interrupted()
    _finish(store, 3)
    label = store.add_judgment(first, "alice", "failure", "dropped")
    store.retract_judgment(label)
    store.add_judgment(first, "alice", "success")
    store.invalidate_episode(store.episodes()[1]["id"], "files damaged")
    _finish(store, 1)
    store.log_event("note", "operator note", data={"x": 1})
    store.mark_finished("complete")
    store.end_session(session, "ended")
    store.close()
    return directory


def _status(directory: Path) -> chain.ChainStatus:
    with CampaignStore.open_readonly(directory, allow_broken_chain=True) as store:
        return store.evidence


def _edit(directory: Path, sql: str, args: tuple = ()) -> None:
    with sqlite3.connect(directory / "campaign.db") as conn:
        assert conn.execute(sql, args).rowcount == 1   # the edit hit exactly one row
    conn.close()


def test_every_write_of_the_store_is_chained(worked):
    status = _status(worked)
    assert status.intact and status.origin == "created" and status.origin_text() == "chained from the start"
    with sqlite3.connect(worked / "campaign.db") as conn:
        entries = conn.execute("SELECT tbl, count(*) FROM chain GROUP BY tbl").fetchall()
        rows = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in chain.CHAINED}
        head = conn.execute("SELECT digest FROM chain ORDER BY seq DESC LIMIT 1").fetchone()[0]
        deleted = conn.execute("SELECT count(*) FROM chain WHERE row_sha256 = 'deleted'").fetchone()[0]
    per_table = dict(entries)
    assert status.entries == sum(per_table.values()) and status.head == head
    assert per_table["chain"] == 1                               # the origin
    for table, n in rows.items():                                # each row chained at least once
        assert per_table[table] >= n > 0, table
    assert per_table["trials"] > rows["trials"]                  # updates are entries of their own
    assert deleted == 3                                          # the invalidated episode, its 2 labels


@pytest.mark.parametrize("what, sql, named", [
    ("a judge's label", "UPDATE judgments SET label = 'failure' WHERE judge = 'alice' AND retracted_at IS NULL",
     "judgments id"),
    ("a trial's outcome (its state)", "UPDATE trials SET state = 'aborted' WHERE slot = 0", "trials slot 0"),
    ("a physics outcome", "UPDATE episodes SET physics_success = 0 WHERE slot = 0", "episodes id"),
    ("an abort's settling", "UPDATE attempts SET settles = NULL WHERE settles = 'failure'", "attempts id"),
    ("a label removed", "DELETE FROM judgments WHERE judge = 'auto' AND episode_id ="
     " (SELECT id FROM episodes WHERE slot = 0)", "judgments id"),
    ("a label added", "INSERT INTO judgments (episode_id, judge, label, created_at) SELECT id, 'mallory', 'success', 1"
     " FROM episodes WHERE slot = 1", "judgments id"),
    ("an event", "UPDATE events SET message = 'x' WHERE kind = 'finished'", "events id"),
    ("the campaign record", "UPDATE campaign SET simulated = 0", "campaign id"),
    ("a session", "UPDATE sessions SET outcome = 'interrupted'", "sessions id"),
    ("an entry of the chain", "UPDATE chain SET at = at + 1 WHERE seq = 5", "chain seq 5"),
    ("an entry of another type", "UPDATE chain SET at = '' WHERE seq = 6", "chain seq 6"),
    ("an entry removed", "DELETE FROM chain WHERE seq = 7", "chain seq 7"),
    ("the last entry removed", "DELETE FROM chain WHERE seq = (SELECT max(seq) FROM chain)", "sessions id"),
])
def test_an_edit_outside_the_tool_is_named_by_its_row(worked, tmp_path, what, sql, named):
    copy = tmp_path / "edited"
    shutil.copytree(worked, copy)
    assert _status(copy).intact                                  # the positive control
    _edit(copy, sql)
    status = _status(copy)
    assert not status.intact and status.unverified[0].startswith(named), (what, status.unverified)
    with pytest.raises(BadInput, match=f"the evidence chain breaks at {named}"):
        CampaignStore.open_readonly(copy)
    with pytest.raises(BadInput, match=f"the evidence chain breaks at {named}"):
        CampaignStore.open_for_labels(copy)


def test_the_first_row_named_is_the_first_written(worked):
    _edit(worked, "UPDATE sessions SET host = 'elsewhere'")
    _edit(worked, "UPDATE trials SET seed = 1 WHERE slot = 2")
    status = _status(worked)
    # trial 2's latest entry was written before the session's last one
    assert status.unverified == ("trials slot 2", "sessions id 1")


def test_a_write_to_an_edited_row_is_refused_and_writes_nothing(worked):
    _edit(worked, "UPDATE judgments SET label = 'failure' WHERE judge = 'alice' AND retracted_at IS NULL")
    before = _status(worked)
    with CampaignStore.open_for_labels(worked, allow_broken_chain=True) as store:
        label = next(j.id for j in store.judgments("alice"))
        with pytest.raises(BadInput, match=f"judgments id {label} does not match its chained digest"):
            store.retract_judgment(label)
        store.add_judgment(store.episodes()[0]["id"], "bob", "success")   # another row is still written
    after = _status(worked)
    assert after.unverified == before.unverified and after.entries == before.entries + 1


def test_compare_orders_breaks_as_written():
    entries, prev = [], chain.GENESIS
    for seq, (tbl, key, sha) in enumerate([("chain", "created", chain.origin_sha256()), ("trials", "0", "a"),
                                           ("judgments", "1", "b"), ("trials", "1", "c")], start=1):
        digest = chain.entry_digest(prev, seq, tbl, key, sha, 1.0)
        entries.append((seq, tbl, key, sha, 1.0, digest))
        prev = digest
    rows = {"trials": [("0", "a"), ("1", "x"), ("2", "y")], "judgments": [("1", "z")]}
    assert chain.compare(entries, rows) == ("judgments id 1", "trials slot 1", "trials slot 2")
    assert chain.compare(entries, {"trials": [("0", "a"), ("1", "c")], "judgments": [("1", "b")]}) == ()
    forged = entries[:2] + [(3, "judgments", "1", "z", 1.0, entries[2][5])] + entries[3:]
    assert chain.compare(forged, rows)[:2] == ("chain seq 3", "judgments id 1")


def test_an_older_store_is_chained_from_its_migration(tmp_path):
    directory = tmp_path / "old"
    directory.mkdir()
    shutil.copy(FIXTURE, directory / "campaign.db")
    with sqlite3.connect(directory / "campaign.db") as conn:
        counts = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                  for t in chain.CHAINED if t not in ("sessions", "audit")}   # tables of later schemas
    conn.close()
    status = _status(directory)                                  # opening migrates it
    assert status.intact and status.origin == "migrated" and status.origin_at is not None
    assert status.entries == 1 + sum(counts.values())            # the origin, then every row once
    assert "migrated" in status.origin_text() and "chained from 20" in status.origin_text()
    with sqlite3.connect(directory / "campaign.db") as conn:
        first = conn.execute("SELECT tbl, row_key FROM chain WHERE seq = 1").fetchone()
    conn.close()
    assert first == ("chain", "migrated")
    _edit(directory, "UPDATE judgments SET label = CASE label WHEN 'success' THEN 'failure' ELSE 'success' END"
                     " WHERE id = (SELECT min(id) FROM judgments)")
    assert _status(directory).unverified[0].startswith("judgments id")   # and it guards from then on


def test_a_judges_sealed_connection_writes_through_the_chain_without_reading_it(worked):
    from orchestrator.judging.blinding import CampaignSource

    source = CampaignSource(worked, "carol")
    with pytest.raises(sqlite3.DatabaseError, match="prohibited"):
        source.store.conn.execute("SELECT row_sha256 FROM chain").fetchall()
    with pytest.raises(sqlite3.DatabaseError, match="prohibited"):
        source.store.conn.execute("SELECT policy FROM trials").fetchall()
    episodes = source.episodes()
    label = source.add(episodes[0].id, "failure", "dropped")
    source.retract(label.id)
    source.invalidate(episodes[1].id, "cube not on its mark")
    source.close()
    status = _status(worked)
    assert status.intact
    with CampaignStore.open_readonly(worked) as store:
        assert [j.label for j in store.judgments("carol", include_retracted=True)] == ["failure"]
        assert store.events()[-1]["kind"] == "invalid_start"


def test_an_index_that_no_longer_matches_its_table_is_refused(worked):
    """The sweep's case (offsets 14658 and 78092 of bench/store_damage_sweep.py): a byte of the
    campaign id changed in the table's page but not in its index. The chain's query reads the id
    from the index and matches; a reader's table scan gets the damaged id. SQLite's integrity
    check, part of every verification, finds the difference."""
    db = worked / "campaign.db"
    assert _status(worked).intact                                # the positive control
    with sqlite3.connect(db) as conn:
        campaign_id = conn.execute("SELECT id FROM campaign").fetchone()[0].encode()
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'campaign'").fetchone()[0]
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    data = bytearray(db.read_bytes())
    page = bytes(data[(root - 1) * page_size:root * page_size])
    assert page.count(campaign_id) == 1
    offset = (root - 1) * page_size + page.index(campaign_id) + 2
    data[offset] = ord(" ")
    db.write_bytes(bytes(data))
    status = _status(db.parent)
    assert status.unverified == () and "missing from index sqlite_autoindex_campaign_1" in status.damage
    with pytest.raises(BadInput, match="the campaign store is damaged .SQLite's integrity check: row 1 missing"):
        CampaignStore.open_readonly(db.parent)


def test_readers_verify_one_snapshot_while_a_writer_commits(worked):
    """A report while a run or a judge commits: the chain and the rows are read in one snapshot,
    so the reader never sees entries and rows of two different moments."""
    import threading

    stop, written = threading.Event(), []

    def write() -> None:
        with CampaignStore.open_for_labels(worked) as store:
            episode = store.episodes()[0]["id"]
            while not stop.is_set():
                store.retract_judgment(store.add_judgment(episode, "writer", "success"))
                written.append(1)

    writer = threading.Thread(target=write)
    writer.start()
    heads, readings, deadline = set(), 0, time.monotonic() + 60
    try:   # read 20 times, and until the writer has committed 20 times (each commit and each
        # verifying open syncs or reads the whole chain: either side is the slower under load)
        while (len(written) < 20 or readings < 20) and time.monotonic() < deadline:
            with CampaignStore.open_readonly(worked) as store:
                assert store.evidence.intact, store.evidence.unverified
                heads.add(store.evidence.head)
            readings += 1
    finally:
        stop.set()
        writer.join()
    assert len(written) >= 20 and readings >= 20 and len(heads) >= 3   # commits fell between readings
