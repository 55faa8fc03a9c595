"""The campaign store: schema version, transactions that survive a killed writer, the run
lock, refusal of foreign/garbage/newer files, recovery of interrupted attempts."""

from __future__ import annotations

import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.core.errors import BadInput, RuntimeFailure
from orchestrator.store.sqlite import (
    APPLICATION_ID,
    DB_NAME,
    SCHEMA_VERSION,
    CampaignStore,
    new_episode_id,
)
from support.repo import REPO
from support.store_rows import create, record

FIXTURES = Path(__file__).parent / "fixtures"


def consistency_problems(conn: sqlite3.Connection) -> list[str]:
    """Invariants a crash must never break, as SQL over one snapshot of the database."""
    checks = {
        "done trial without exactly one done attempt":
            "SELECT slot FROM trials t WHERE state='done' AND "
            "(SELECT COUNT(*) FROM attempts a WHERE a.slot=t.slot AND a.status='done') != 1",
        "done trial without exactly one episode":
            "SELECT slot FROM trials t WHERE state='done' AND "
            "(SELECT COUNT(*) FROM episodes e WHERE e.slot=t.slot) != 1",
        "done trial whose episode_id is not its episode":
            "SELECT slot FROM trials t WHERE state='done' AND episode_id IS NOT "
            "(SELECT id FROM episodes e WHERE e.slot=t.slot)",
        "episode of a trial that is not done":
            "SELECT e.id FROM episodes e JOIN trials t ON t.slot=e.slot WHERE t.state!='done'",
        "episode whose attempt is not done":
            "SELECT e.id FROM episodes e JOIN attempts a ON a.id=e.attempt_id WHERE a.status!='done' "
            "OR a.slot != e.slot OR a.episode_id != e.id",
        "running attempt on a trial that is not running":
            "SELECT a.id FROM attempts a JOIN trials t ON t.slot=a.slot WHERE a.status='running' "
            "AND t.state!='running'",
        "running trial without exactly one running attempt":
            "SELECT slot FROM trials t WHERE state='running' AND "
            "(SELECT COUNT(*) FROM attempts a WHERE a.slot=t.slot AND a.status='running') != 1",
        "attempt counter differs from the attempts":
            "SELECT slot FROM trials t WHERE attempts != (SELECT COUNT(*) FROM attempts a WHERE a.slot=t.slot)",
        "pending trial with attempts":
            "SELECT slot FROM trials WHERE state='pending' AND attempts != 0",
        "unknown state":
            "SELECT slot FROM trials WHERE state NOT IN ('pending','running','done','aborted')",
        "physics label count differs from episodes with a physics result":
            "SELECT 1 WHERE (SELECT COUNT(*) FROM judgments WHERE judge='physics') != "
            "(SELECT COUNT(*) FROM episodes WHERE physics_success IS NOT NULL)",
    }
    problems = []
    for name, sql in checks.items():
        rows = conn.execute(sql).fetchall()
        if rows:
            problems.append(f"{name}: {[tuple(r) for r in rows][:5]}")
    return problems


# ------------------------------------------------------------------ creation and opening


def test_create_sets_schema_version_wal_and_full_sync(tmp_path):
    with create(tmp_path / "c") as store:
        conn = store.conn
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert store.integrity_ok()
        assert [t.state for t in store.trials()] == ["pending"] * 6
        assert store.campaign()["protocol_text"] == "name: test\n"
        assert store.events()[0]["kind"] == "created"
    assert not (tmp_path / "c" / (DB_NAME + ".creating")).exists()


def test_create_refuses_an_existing_campaign(tmp_path):
    create(tmp_path / "c").close()
    with pytest.raises(BadInput, match="already exists"):
        create(tmp_path / "c")
    # the refused create released the lock
    CampaignStore.open_for_run(tmp_path / "c").close()


def test_create_after_an_interrupted_create(tmp_path):
    """A create killed half-way leaves only `campaign.db.creating`: no campaign exists, and the
    next create starts afresh."""
    directory = tmp_path / "c"
    directory.mkdir()
    (directory / (DB_NAME + ".creating")).write_bytes(b"SQLite format 3\x00half written")
    with pytest.raises(BadInput, match="no campaign here"):
        CampaignStore.open_readonly(directory)
    with create(directory) as store:
        assert store.integrity_ok() and len(store.trials()) == 6
    assert not (directory / (DB_NAME + ".creating")).exists()


def test_open_missing_campaign(tmp_path):
    for opener in (CampaignStore.open_for_run, CampaignStore.open_readonly):
        with pytest.raises(BadInput, match="no campaign here"):
            opener(tmp_path)


def test_transaction_rolls_back_on_error(tmp_path):
    with create(tmp_path / "c") as store:
        with pytest.raises(ZeroDivisionError):
            with store.transaction() as c:
                c.execute("UPDATE trials SET state='done'")
                raise ZeroDivisionError
        assert {t.state for t in store.trials()} == {"pending"}


def test_a_transaction_left_open_by_an_interrupt_is_rolled_back_by_the_next_change(tmp_path):
    """Ctrl-C between BEGIN and the transaction's `try` leaves the connection in a transaction
    nothing committed: the next change must roll it back and go through, not fail with
    "cannot start a transaction within a transaction"."""
    with create(tmp_path / "c") as store:
        store.conn.execute("BEGIN IMMEDIATE")
        store.conn.execute("UPDATE trials SET state='done' WHERE slot=1")  # never committed
        attempt = store.begin_attempt(0, new_episode_id())
        assert not store.conn.in_transaction
        assert [t.state for t in store.trials()[:2]] == ["running", "pending"]
        assert [a["id"] for a in store.attempts()] == [attempt]


def test_attempt_lifecycle(tmp_path):
    with create(tmp_path / "c") as store:
        ep1, ep2 = new_episode_id(), new_episode_id()
        assert ep1 != ep2 and ep1.startswith("ep_")
        a1 = store.begin_attempt(0, ep1)
        assert store.trials()[0].state == "running"
        store.abort_attempt(a1, "e-stop")
        assert store.trials()[0].state == "aborted"
        a2 = store.begin_attempt(0, ep2)
        store.finish_attempt(a2, record(ep2, success=False))
        t = store.trials()[0]
        assert (t.state, t.episode_id, t.attempts) == ("done", ep2, 2)
        assert [a["status"] for a in store.attempts()] == ["aborted", "done"]
        assert [e["id"] for e in store.episodes()] == [ep2]
        assert [(j.judge, j.label) for j in store.judgments()] == [("physics", "failure")]
        assert [t.slot for t in store.trials() if t.state != "done"] == [1, 2, 3, 4, 5]
        with pytest.raises(RuntimeFailure):
            store.begin_attempt(0, new_episode_id())  # already done
        with pytest.raises(RuntimeFailure):
            store.finish_attempt(a2, record(new_episode_id()))  # not running
        jid = store.add_judgment(ep2, "ann", "success")
        with pytest.raises(BadInput):
            store.add_judgment(ep2, "ann", "maybe")
        with pytest.raises(BadInput):
            store.add_judgment("ep_missing", "ann", "success")
        store.retract_judgment(jid)
        assert store.latest_labels("ann") == {}
        assert consistency_problems(store.conn) == []


def test_recover_interrupted_turns_running_into_aborted(tmp_path):
    store = create(tmp_path / "c")
    ep = new_episode_id()
    store.begin_attempt(2, ep)
    store.conn.close()           # the process "dies" without finishing the attempt
    store._lock.release()
    with CampaignStore.open_for_run(tmp_path / "c") as again:
        assert again.recover_interrupted() == [(2, ep)]
        trial = again.trials()[2]
        assert trial.state == "aborted" and trial.attempts == 1
        attempt = again.attempts()[0]
        assert attempt["status"] == "aborted" and "interrupted" in attempt["reason"]
        assert attempt["ended_at"] is not None
        assert any(e["kind"] == "aborted" and e["slot"] == 2 for e in again.events())
        assert 2 in [t.slot for t in again.trials() if t.state != "done"]
        assert again.recover_interrupted() == []   # idempotent
        assert consistency_problems(again.conn) == []
        new_attempt = again.begin_attempt(2, new_episode_id())  # re-run from the start
        assert again.trials()[2].attempts == 2
        again.abort_attempt(new_attempt, "test")


# ------------------------------------------------------------------ refusing files


def test_garbage_and_empty_files_are_refused(tmp_path):
    for name, content in [("garbage", os.urandom(4096)), ("empty", b""),
                          ("text", b"name: not a database\n"),
                          ("truncated", b"SQLite format 3\x00" + b"\xff" * 200)]:
        d = tmp_path / name
        d.mkdir()
        (d / DB_NAME).write_bytes(content)
        for opener in (CampaignStore.open_for_run, CampaignStore.open_readonly):
            with pytest.raises(BadInput) as info:
                opener(d)
            message = str(info.value)
            assert str(d / DB_NAME) in message and "\n" not in message
            assert "not a campaign store" in message or "corrupted" in message
        with pytest.raises(BadInput, match="not a campaign store|corrupted"):  # lock was released
            CampaignStore.open_for_run(d)


def test_foreign_sqlite_file_is_refused_and_left_untouched(tmp_path):
    db = tmp_path / DB_NAME
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.execute("INSERT INTO notes VALUES ('mine')")
    conn.commit()
    conn.close()
    before = db.read_bytes()
    for opener in (CampaignStore.open_for_run, CampaignStore.open_readonly):
        with pytest.raises(BadInput, match="not a campaign store of this tool"):
            opener(tmp_path)
    assert db.read_bytes() == before, "opening a foreign database must not modify it"
    assert not Path(str(db) + "-wal").exists()


def test_newer_schema_is_refused(tmp_path):
    create(tmp_path / "c").close()
    conn = sqlite3.connect(tmp_path / "c" / DB_NAME)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    for opener in (CampaignStore.open_for_run, CampaignStore.open_readonly):
        with pytest.raises(BadInput, match=rf"newer orchestrator \(schema {SCHEMA_VERSION + 1}"):
            opener(tmp_path / "c")
    # refused without holding the lock
    conn = sqlite3.connect(tmp_path / "c" / DB_NAME)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    conn.close()
    CampaignStore.open_for_run(tmp_path / "c").close()


def test_unversioned_store_is_refused(tmp_path):
    create(tmp_path / "c").close()
    conn = sqlite3.connect(tmp_path / "c" / DB_NAME)
    conn.execute("PRAGMA user_version = 0")
    conn.close()
    with pytest.raises(BadInput, match="no schema version"):
        CampaignStore.open_readonly(tmp_path / "c")


def test_schema1_fixture_still_opens(tmp_path):
    """A store written by schema 1 (tests/fixtures/schema1/campaign.db, made by
    tests/fixtures/make_schema1_store.py) must open with every later version."""
    shutil.copytree(FIXTURES / "schema1", tmp_path / "c")
    with CampaignStore.open_readonly(tmp_path / "c") as store:
        assert store.integrity_ok()
        trials = store.trials()
        assert len(trials) == 4
        assert [t.state for t in trials] == ["done", "done", "aborted", "pending"]
        assert len(store.episodes()) == 2
        assert {j.judge for j in store.judgments()} == {"physics", "ann"}
        assert consistency_problems(store.conn) == []
    with CampaignStore.open_for_run(tmp_path / "c") as store:
        assert store.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        attempt = store.begin_attempt(3, new_episode_id())
        store.finish_attempt(attempt, record(new_episode_id()))


def test_schema1_fixture_is_migrated_to_schema2_sessions(tmp_path):
    """Schema 2 added the `sessions` table: a schema-1 store gains it, keeps its data, and
    records run sessions from then on."""
    shutil.copytree(FIXTURES / "schema1", tmp_path / "c")
    raw = sqlite3.connect(tmp_path / "c" / "campaign.db")
    assert raw.execute("PRAGMA user_version").fetchone()[0] == 1
    assert raw.execute("SELECT count(*) FROM sqlite_master WHERE name='sessions'").fetchone()[0] == 0
    raw.close()
    with CampaignStore.open_for_run(tmp_path / "c") as store:
        assert store.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert store.conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
        assert store.sessions() == []
        session = store.begin_session()
        store.end_session(session, "ended")
        assert [s["outcome"] for s in store.sessions()] == ["ended"]
        assert len(store.trials()) == 4 and len(store.episodes()) == 2


def test_schema1_fixture_is_migrated_to_schema3_abort_classes(tmp_path):
    """Schema 3 added `attempts.abort_class` and `attempts.settles`: the old store's aborted
    attempt keeps NULL in both (it was re-run, as the tool then did) and counts as a re-run; new
    aborts are stored with their class, and one that settles its trial makes the trial done."""
    shutil.copytree(FIXTURES / "schema1", tmp_path / "c")
    with CampaignStore.open_readonly(tmp_path / "c") as store:   # a reader of the old schema
        old = [a for a in store.attempts() if a["status"] == "aborted"]
        assert old and all(a.get("abort_class") is None for a in old)
    with CampaignStore.open_for_run(tmp_path / "c") as store:
        (slot,) = {a["slot"] for a in old}
        assert [a["abort_class"] for a in store.attempts() if a["status"] == "aborted"] == [None] * len(old)
        assert store.reruns(slot) == len(old)
        attempt = store.begin_attempt(slot, new_episode_id())
        store.abort_attempt(attempt, "Ctrl-C", "interrupted")
        assert store.reruns(slot) == len(old)            # an interruption is not a re-run
        attempt = store.begin_attempt(slot, new_episode_id())
        store.abort_attempt(attempt, "DeviceFault: policy: boom", "policy", "failure")
        (trial,) = [t for t in store.trials() if t.slot == slot]
        assert trial.state == "done" and trial.episode_id is None
        with pytest.raises(RuntimeFailure):
            store.begin_attempt(slot, new_episode_id())
        with pytest.raises(ValueError):
            store.abort_attempt(attempt, "x", "rig", "maybe")


def test_a_new_store_has_the_schema_of_an_upgraded_one(tmp_path):
    """Schema 1 and each migration step are frozen DDL; a new store is built by the same steps,
    so it has exactly the tables, columns and indexes of an upgraded schema-1 store."""
    def schema(db: Path) -> list[tuple]:
        conn = sqlite3.connect(db)
        try:
            return sorted(conn.execute("SELECT type, name, sql FROM sqlite_master").fetchall())
        finally:
            conn.close()

    shutil.copytree(FIXTURES / "schema1", tmp_path / "old")
    CampaignStore.open_for_run(tmp_path / "old").close()
    create(tmp_path / "new").close()
    assert schema(tmp_path / "new" / "campaign.db") == schema(tmp_path / "old" / "campaign.db")
    assert any(name == "sessions" for _, name, _ in schema(tmp_path / "new" / "campaign.db"))


def test_open_readonly_refuses_every_write(tmp_path):
    directory = tmp_path / "c"
    with create(directory) as store:
        ep = new_episode_id()
        store.finish_attempt(store.begin_attempt(0, ep), record(ep))
    before = (directory / "campaign.db").read_bytes()
    with CampaignStore.open_readonly(directory) as reader:
        assert reader.trials()[0].state == "done"
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            reader.add_judgment(ep, "ann", "success")
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            reader.conn.execute("DELETE FROM trials")
    assert (directory / "campaign.db").read_bytes() == before
    with CampaignStore.open_for_labels(directory) as judge:   # the labelling opener writes
        judge.add_judgment(ep, "ann", "success")
    with CampaignStore.open_readonly(directory) as reader:
        assert [j.label for j in reader.judgments("ann")] == ["success"]


LOCKER = """
import sys
from filelock import FileLock
lock = FileLock(sys.argv[1], timeout=0)
lock.acquire()
print("locked", flush=True)
sys.stdin.readline()
lock.release()
"""


@pytest.mark.subprocess
def test_an_older_store_is_upgraded_only_under_the_run_lock(tmp_path):
    """Opening a schema-1 store to read or label migrates it only after taking the run lock; while
    another process holds the lock it is refused (one line) and left at schema 1."""
    shutil.copytree(FIXTURES / "schema1", tmp_path / "c")
    db = tmp_path / "c" / "campaign.db"

    def version() -> int:
        conn = sqlite3.connect(db)
        try:
            return conn.execute("PRAGMA user_version").fetchone()[0]
        finally:
            conn.close()

    holder = subprocess.Popen([sys.executable, "-c", LOCKER, str(tmp_path / "c" / "campaign.lock")], cwd=REPO,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        for opener in (CampaignStore.open_readonly, CampaignStore.open_for_labels):
            with pytest.raises(BadInput, match="older schema and another `orchestrator run` holds its lock"):
                opener(tmp_path / "c")
        assert version() == 1
    finally:
        holder.communicate("\n", timeout=60)
    with CampaignStore.open_readonly(tmp_path / "c") as store:
        assert store.sessions() == [] and len(store.trials()) == 4
    assert version() == SCHEMA_VERSION
    CampaignStore.open_for_run(tmp_path / "c").close()   # the lock was released after the upgrade


# ------------------------------------------------------------------ processes

HOLDER = """
import sys, time
from orchestrator.store.sqlite import CampaignStore
store = CampaignStore.open_for_run(sys.argv[1])
print("locked", flush=True)
sys.stdin.readline()
store.close()
"""


@pytest.mark.subprocess
def test_lock_refuses_a_second_runner_while_readers_work(tmp_path):
    directory = tmp_path / "c"
    with create(directory) as store:
        ep = new_episode_id()
        store.finish_attempt(store.begin_attempt(0, ep), record(ep))
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(directory)], cwd=REPO,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(BadInput, match="another `orchestrator run` is running this campaign"):
            CampaignStore.open_for_run(directory)
        with pytest.raises(BadInput, match="another"):
            CampaignStore.create(directory, name="x", protocol_path="", protocol_text="", protocol_sha256="",
                                 layout_text="", layout_sha256="", rig_path="", rig_text="",
                                 simulated=True, schedule=[])
        with CampaignStore.open_for_labels(directory) as reader:   # report / judge during a run
            assert reader.trials()[0].state == "done"
            reader.add_judgment(ep, "ann", "success")
    finally:
        holder.communicate("\n", timeout=60)
    assert holder.returncode == 0
    CampaignStore.open_for_run(directory).close()   # free again once the runner has stopped


WRITER = """
import random, sys, time
from orchestrator.store.sqlite import CampaignStore, EpisodeRecord, new_episode_id
store = CampaignStore.open_for_run(sys.argv[1])
rng = random.Random(int(sys.argv[2]))
store.recover_interrupted()
print("ready", flush=True)
def pending():
    return [t for t in store.trials() if t.state != "done"]
while pending():
    for trial in pending():
        attempt = store.begin_attempt(trial.slot, new_episode_id())
        if rng.random() < 0.15:
            store.abort_attempt(attempt, "e-stop")
            continue
        ep = store.conn.execute("SELECT episode_id FROM attempts WHERE id=?", (attempt,)).fetchone()[0]
        store.finish_attempt(attempt, EpisodeRecord(
            episode_id=ep, frames=360, duration_s=12.0, cameras=["front", "wrist"],
            files={"front": f"videos/{ep}/front.mp4"}, physics_success=rng.random() < 0.5,
            timing={"late": 0}, safety_events=()))
        if rng.random() < 0.3:
            store.add_judgment(ep, "ann", rng.choice(["success", "failure", "unsure"]))
        store.log_event("progress", f"slot {trial.slot}", slot=trial.slot)
        time.sleep(0.005)  # a writer that lasts longer than the kill delays on a fast machine
print("finished", flush=True)
"""


@pytest.mark.subprocess
def test_transactions_survive_a_killed_writer(tmp_path):
    """SIGKILL a writer at random moments; every time the store opens, passes integrity_check
    and is consistent, and the next writer resumes. Finally every trial is done."""
    directory = tmp_path / "c"
    create(directory, n_units=60).close()
    rng = random.Random(1234)
    kills = 0
    for round_ in range(40):
        child = subprocess.Popen([sys.executable, "-c", WRITER, str(directory), str(round_)], cwd=REPO,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert child.stdout.readline().strip() == "ready", child.stderr.read()
        if kills < 4:
            time.sleep(rng.uniform(0.0, 0.25))   # the stimulus: a kill at a random (seeded) moment
            child.send_signal(signal.SIGKILL)
        out, err = child.communicate(timeout=300)
        if child.returncode == -signal.SIGKILL:
            kills += 1
        else:
            assert child.returncode == 0, err
        conn = sqlite3.connect(directory / DB_NAME)
        try:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
            assert consistency_problems(conn) == []
        finally:
            conn.close()
        if "finished" in out:
            break
    assert kills >= 3
    with CampaignStore.open_for_run(directory) as store:
        assert store.recover_interrupted() == []
        states = {t.state for t in store.trials()}
        assert states == {"done"}, states
        assert len(store.episodes()) == 120
        aborted = [a for a in store.attempts() if a["status"] == "aborted"]
        assert all(a["reason"] for a in aborted)
        assert consistency_problems(store.conn) == []


def test_a_campaign_killed_while_being_created_is_created_again(tmp_path):
    """SIGKILL between the first write of `campaign.db.creating` and its rename (met by
    bench/kill_anywhere.py in the suite) leaves that file, its journal and the lock: `run` creates
    the campaign again instead of calling the folder foreign ("not empty and holds no campaign",
    at every resume), and no stale journal is applied to the new store."""
    from orchestrator.run.campaign import open_campaign
    from support.tiny import PROTOCOL, RIG

    out = tmp_path / "campaign"
    out.mkdir()
    (out / "campaign.db.creating").write_bytes(b"SQLite format 3\x00" + bytes(4080))
    (out / "campaign.db.creating-journal").write_bytes(bytes(512))
    (out / "campaign.lock").touch()
    opened = open_campaign(PROTOCOL, RIG, out)
    try:
        assert not opened.resumed and len(opened.store.trials()) == 6
    finally:
        opened.store.close()
    assert not [p.name for p in out.iterdir() if "creating" in p.name]
    with CampaignStore.open_readonly(out) as store:
        assert [t.state for t in store.trials()] == ["pending"] * 6
