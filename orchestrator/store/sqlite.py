"""The campaign store: one SQLite file per campaign (`<campaign>/campaign.db`).

It holds the frozen protocol (text and SHA-256), the rig profile, the schedule, every trial
with its state (pending, running, done, aborted), every attempt, the episodes, the judges'
labels and an event log, and the evidence chain over those rows (`chain.py`): every write of
one extends it in the write's transaction, every reader verifies it when it opens the store
(`CampaignStore._reader`). Every state change is one transaction; the database runs in WAL
mode with `synchronous=FULL`, so a committed change survives a crash or power loss and
readers (report, judge) can read while a run writes. A run holds an exclusive lock file
(`campaign.lock`), so a second runner on the same campaign is refused.

The SQL is plain and portable (no SQLite-only types in the schema) so a shared PostgreSQL
store for several arms can follow.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Protocol

from filelock import FileLock

from orchestrator.core.durable import fsync_dir
from orchestrator.core.errors import BadInput, RuntimeFailure
from orchestrator.design.protocol import LoadedProtocol, frozen_protocol_from
from orchestrator.design.schedule import Trial
from orchestrator.store import chain
from orchestrator.store.abort_answers import AbortAnswers
from orchestrator.store.abort_causes import abort_cause
from orchestrator.store.audit import AuditRows
from orchestrator.store.backend import SqliteConnection
from orchestrator.store.judgments import JudgmentRows, insert_row, machine_label
from orchestrator.store.new_campaign import write_new_campaign
from orchestrator.store.records import (  # noqa: F401  (the store's vocabulary, read from here too)
    AUTO_JUDGE,
    INTERRUPTED_CLASS,
    LABELS,
    PHYSICS_JUDGE,
    SETTLES_EXCLUDED,
    SETTLES_FAILURE,
    TRIAL_STATES,
    EpisodeRecord,
    Judgment,
    new_episode_id,
    physics_note,
)
from orchestrator.store.run_sessions import SessionRows
from orchestrator.store.schema import SCHEMA_VERSION, migrate
from orchestrator.store.sqlite_file import (  # noqa: F401
    APPLICATION_ID,
    DB_NAME,
    LOCK_NAME,
    acquire,
    checked,
    connect,
    existing,
    upgrade,
)

# Set by `pgstore.using_server` around a verb given `--store URL`: how to open a campaign on that
# server (directory, purpose) -> store. The store itself never imports the server module.
SERVER_OPENER: ContextVar[Callable[[Path, str], CampaignStore] | None] = ContextVar("server_opener", default=None)


def _server(purpose: str):
    """With `--store URL` (pgstore.using_server), an opener of the campaign on that server."""
    opener = SERVER_OPENER.get()
    if opener is None:
        return None
    return lambda directory: opener(directory, purpose)


def _event(c, kind: str, message: str, slot: int | None = None, data: str | None = None,
           at: float | None = None) -> None:
    """One row of the event log, chained, inside the caller's transaction."""
    new_id = insert_row(c, "INSERT INTO events (at, kind, slot, message, data) VALUES (?,?,?,?,?)",
                    (time.time() if at is None else at, kind, slot, message, data))
    chain.append(c, "events", new_id)


class TrialGuard(Protocol):
    """What a store's guard does (a station's claim on its block, `leases.BlockClaim`): called
    first inside the transactions that begin and commit an attempt of trial `slot`, on that
    transaction's connection, it raises (and so rolls the change back) when this process may no
    longer write the trial; it writes nothing."""

    def __call__(self, conn: Any, slot: int) -> None: ...


class CampaignStore(JudgmentRows, AbortAnswers, SessionRows, AuditRows):
    """Access to one campaign directory. Open with `create`, `open_for_run` (the runner, holding
    the run lock), `open_for_labels` (judging) or `open_readonly` (everything that only reads)."""

    def __init__(self, directory: Path, conn: SqliteConnection, lock: FileLock | None,
                 guard: TrialGuard | None = None):
        self.directory = Path(directory)
        self.conn = conn
        self._lock = lock
        self.guard = guard
        # What the evidence chain's check found when a reader opened the store (chain.py).
        self.evidence: chain.ChainStatus | None = None

    # ------------------------------------------------------------ opening

    @classmethod
    def create(cls, directory: Path, *, name: str, protocol_path: str, protocol_text: str,
               protocol_sha256: str, layout_text: str, layout_sha256: str, rig_path: str,
               rig_text: str, simulated: bool, schedule: list[Trial], audit: float = 0.0) -> CampaignStore:
        """Create a new campaign (directory, lock, schema, frozen protocol, schedule, and the audit
        sample when `audit`, the protocol's `judging.audit`, is above 0)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        lock = acquire(directory)
        db = directory / DB_NAME
        if db.exists():
            lock.release()
            raise BadInput(f"{db}: a campaign already exists here")
        tmp = directory / (DB_NAME + ".creating")
        for suffix in ("", "-journal", "-wal", "-shm"):   # of a creation killed before its rename
            Path(str(tmp) + suffix).unlink(missing_ok=True)
        conn = connect(tmp)
        try:
            write_new_campaign(conn, name=name, protocol_path=protocol_path, protocol_text=protocol_text,
                                protocol_sha256=protocol_sha256, layout_text=layout_text,
                                layout_sha256=layout_sha256, rig_path=rig_path, rig_text=rig_text,
                                simulated=simulated, schedule=schedule, audit=audit)
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.close()
            for suffix in ("-wal", "-shm"):
                Path(str(tmp) + suffix).unlink(missing_ok=True)
            os.replace(tmp, db)  # the campaign exists only once it is complete
            fsync_dir(directory)
        except BaseException:
            conn.close()
            tmp.unlink(missing_ok=True)
            lock.release()
            raise
        conn, _ = checked(db)
        return cls(directory, conn, lock)

    @classmethod
    def open_for_run(cls, directory: Path) -> CampaignStore:
        """Open an existing campaign to run it (read-write, holding the run lock; an older
        schema is upgraded here); refuses if another process is running it."""
        directory = Path(directory)
        if (server := _server("run")) is not None:
            return server(directory)
        db = existing(directory)
        lock = acquire(directory)
        try:
            conn, version = checked(db)
            if version < SCHEMA_VERSION:
                migrate(conn, version)
            return cls(directory, conn, lock)
        except BaseException:
            lock.release()
            raise

    @classmethod
    def open_readonly(cls, directory: Path, allow_broken_chain: bool = False) -> CampaignStore:
        """Open for reading only (report, export, bundle, plan): SQLite refuses every write on
        this connection. Works while a run is writing. The evidence chain is checked (`_reader`)."""
        return cls._reader(Path(directory), "read", allow_broken_chain)

    @classmethod
    def open_for_labels(cls, directory: Path, allow_broken_chain: bool = False) -> CampaignStore:
        """Open for judging: read-write without the run lock (labels are added while a run may
        be writing; SQLite's WAL serialises the two writers). The evidence chain is checked."""
        return cls._reader(Path(directory), "label", allow_broken_chain)

    @classmethod
    def _reader(cls, directory: Path, purpose: str, allow_broken_chain: bool) -> CampaignStore:
        """The one opening every reader goes through (report, judge, export, bundle,
        import-labels, compare, verify): the store, with its evidence chain recomputed
        (`chain.verify`, kept as `evidence`). A chain that does not verify is refused (BadInput,
        one line naming the first row that does not match) unless `allow_broken_chain`."""
        server = _server(purpose)
        store = server(directory) if server is not None else cls._open_unlocked(directory, purpose == "read")
        try:
            # One snapshot, so that a run committing meanwhile cannot make the chain and its rows
            # disagree; a reader keeps it to its end (what it reads is what was verified), a
            # judge's session, which may last hours, lets it go (a long snapshot holds the WAL).
            store.conn.execute(store.conn.backend.begin_snapshot)
            store.evidence = chain.verify(store.conn)
            if purpose != "read":
                store.conn.execute("COMMIT")
        except BaseException:
            store.close()
            raise
        if not store.evidence.intact and not allow_broken_chain:
            store.close()
            raise chain.refusal(store.where, store.evidence)
        return store

    @property
    def on_server(self) -> bool:
        """Whether the store is a PostgreSQL server's (`postgres.py`) rather than a SQLite file:
        for the stages above the store, whose judges and operators have roles only on a server."""
        return self.conn.backend.on_server

    def server_role(self) -> tuple[str, bool]:
        """On a server store: the role it connects as, and whether that role may read the key
        (which policy ran each trial: `trials.policy`; `postgres_roles.py` grants a judge none of it)."""
        can_read_key, role = self.conn.execute(
            "SELECT has_column_privilege('trials', 'policy', 'SELECT'), current_user").fetchone()
        return role, bool(can_read_key)

    @property
    def where(self) -> str:
        """The campaign store as the user knows it: its SQLite file, or the server's for a folder."""
        return self.conn.backend.where(self.directory)

    @classmethod
    def _open_unlocked(cls, directory: Path, readonly: bool) -> CampaignStore:
        db = existing(directory)
        conn, version = checked(db, readonly)
        if version < SCHEMA_VERSION:  # migrations run only under the run lock
            conn.close()
            upgrade(directory)
            conn, version = checked(db, readonly)
        return cls(directory, conn, None)

    def close(self) -> None:
        try:
            self.conn.close()
        finally:
            if self._lock is not None:
                self._lock.release()
                self._lock = None

    def __enter__(self) -> CampaignStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[SqliteConnection]:
        """One atomic change: BEGIN IMMEDIATE ... COMMIT (ROLLBACK on any exception).

        A Ctrl-C (KeyboardInterrupt) can land between BEGIN and the `try`, or inside COMMIT,
        and leave the connection inside a transaction that nothing committed; the next change
        rolls that leftover back first instead of failing with "cannot start a transaction
        within a transaction" (seen once in the Ctrl-C test)."""
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")
        self.conn.execute(self.conn.backend.begin_write)
        try:
            yield self.conn
            self.conn.execute("COMMIT")
        except BaseException:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            raise

    # ------------------------------------------------------------ reading

    def campaign(self) -> dict[str, Any]:
        row = self.conn.execute("SELECT * FROM campaign").fetchone()
        if row is None:
            raise BadInput(f"{self.directory / DB_NAME}: campaign store has no campaign record")
        return dict(row)

    def frozen_protocol(self) -> LoadedProtocol:
        """The protocol frozen in the store (for reports, judging and export), checked against the
        identity hashes frozen beside it: BadInput (one line) when the stored protocol or layout
        text no longer has its SHA-256 (the store was altered or damaged), so nothing is reported,
        judged or exported under a protocol other than the one the campaign ran."""
        c = self.campaign()
        loaded = frozen_protocol_from(c["protocol_path"], c["protocol_text"], c["layout_text"])
        for what, stored, actual in (("protocol", c.get("protocol_sha256"), loaded.sha256),
                                     ("layout", c.get("layout_sha256"), loaded.layout_sha256)):
            if stored != actual:
                raise BadInput(f"{self.where}: the {what} frozen in the campaign store does not "
                               f"match its SHA-256 ({str(stored or '')[:12] or 'blank'} stored, {actual[:12]} "
                               "computed); the store was altered or damaged")
        return loaded

    def trials(self) -> list[Trial]:
        rows = self.conn.execute(
            "SELECT slot, unit, mark_id, repeat_index, position, policy, seed, state, episode_id,"
            " attempts FROM trials ORDER BY slot").fetchall()
        return [Trial(*row) for row in rows]

    def attempts(self) -> list[dict[str, Any]]:
        return [dict(r) for r in self.conn.execute("SELECT * FROM attempts ORDER BY id")]

    def episodes(self) -> list[dict[str, Any]]:
        out = []
        for row in self.conn.execute("SELECT * FROM episodes ORDER BY slot"):
            record = dict(row)
            for key in ("cameras", "safety_events", "timing", "files", "digests"):
                record[key] = json.loads(record[key])
            out.append(record)
        return out

    def events(self) -> list[dict[str, Any]]:
        return [dict(r) for r in self.conn.execute("SELECT * FROM events ORDER BY id")]

    # ------------------------------------------------------------ writing

    def log_event(self, kind: str, message: str, slot: int | None = None,
                  data: dict[str, Any] | None = None) -> None:
        with self.transaction() as c:
            _event(c, kind, message, slot, json.dumps(data) if data else None)

    def recover_interrupted(self) -> list[tuple[int, str]]:
        """Mark trials left `running` by a dead process as aborted; return (slot, episode_id).

        The caller removes the files of those episode ids; the trials are re-run from the start.
        """
        stale = self.conn.execute(
            "SELECT a.id, a.slot, a.episode_id FROM attempts a WHERE a.status = 'running'").fetchall()
        now = time.time()
        with self.transaction() as c:
            for attempt_id, slot, _episode_id in stale:
                why = "interrupted: the process stopped during the episode"
                with chain.change(c, "attempts", attempt_id):
                    c.execute("UPDATE attempts SET status='aborted', ended_at=?, reason=?, abort_class=?,"
                              " abort_cause=? WHERE id=?",
                              (now, why, INTERRUPTED_CLASS, abort_cause(INTERRUPTED_CLASS, why), attempt_id))
                with chain.change(c, "trials", slot):
                    c.execute("UPDATE trials SET state='aborted' WHERE slot=? AND state='running'", (slot,))
                _event(c, "aborted", "attempt interrupted (process stopped); will re-run", slot, at=now)
        return [(slot, episode_id) for _, slot, episode_id in stale]

    def begin_attempt(self, slot: int, episode_id: str) -> int:
        with self.transaction() as c:
            if self.guard is not None:
                self.guard(c, slot)
            state = c.execute("SELECT state FROM trials WHERE slot=?", (slot,)).fetchone()
            if state is None or state[0] == "done":
                raise RuntimeFailure(f"trial {slot} is {'missing' if state is None else 'already done'}")
            attempt_id = insert_row(c, "INSERT INTO attempts (slot, episode_id, started_at, status)"
                                               " VALUES (?,?,?, 'running')", (slot, episode_id, time.time()))
            chain.append(c, "attempts", attempt_id)
            with chain.change(c, "trials", slot):
                c.execute("UPDATE trials SET state='running', attempts=attempts+1 WHERE slot=?", (slot,))
            return attempt_id

    def finish_attempt(self, attempt_id: int, record: EpisodeRecord) -> None:
        """Commit a completed episode: attempt done, episode row, trial done, the physics and `auto`
        labels with their progress ladders."""
        now = time.time()
        with self.transaction() as c:
            slot = c.execute("SELECT slot FROM attempts WHERE id=? AND status='running'",
                             (attempt_id,)).fetchone()
            if slot is None:
                raise RuntimeFailure(f"attempt {attempt_id} is not running")
            slot = slot[0]
            if self.guard is not None:
                self.guard(c, slot)
            with chain.change(c, "attempts", attempt_id):
                c.execute("UPDATE attempts SET status='done', ended_at=? WHERE id=?", (now, attempt_id))
            c.execute(
                "INSERT INTO episodes (id, slot, attempt_id, frames, duration_s, cameras, physics_success,"
                " max_lift_m, time_to_success_s, safety_events, timing, files, digests, created_at)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (record.episode_id, slot, attempt_id, record.frames, record.duration_s,
                 json.dumps(record.cameras),
                 None if record.physics_success is None else int(record.physics_success),
                 record.max_lift_m, record.time_to_success_s, json.dumps(list(record.safety_events)),
                 json.dumps(record.timing or {}), json.dumps(record.files),
                 json.dumps(record.digests or {}), now))
            chain.append(c, "episodes", record.episode_id)
            with chain.change(c, "trials", slot):
                c.execute("UPDATE trials SET state='done', episode_id=?, done_at=? WHERE slot=?",
                          (record.episode_id, now, slot))
            if record.physics_success is not None:
                machine_label(c, record.episode_id, PHYSICS_JUDGE, "success" if record.physics_success else "failure",
                              physics_note(record.max_lift_m, record.longest_hold_s), now, record.physics_ladder)
            if record.auto is not None:
                machine_label(c, record.episode_id, AUTO_JUDGE, *record.auto, now, record.auto_ladder)

    def invalidate_episode(self, episode_id: str, reason: str, kind: str = "invalidated") -> int | None:
        """Undo a done trial whose files did not survive (power loss, disk fault), or whose start
        a judge found invalid (`kind='invalid_start'`: cube not on its mark, knocked, arm not at
        rest): the episode and its labels are removed, the attempt is marked aborted with
        `reason` (reported like an e-stop, never an outcome), and the trial goes back to the
        queue, so the next `orchestrator run` re-runs it. Reads no key column, so a judge's
        sealed connection (`blind_view.seal`) may call it. Returns the trial slot (None for an
        invalid start on a server store, done by the server's `invalid_start` function so that a
        judge's role can do it without reading the schedule)."""
        now = time.time()
        with self.transaction() as c:
            if kind == "invalid_start" and c.backend.invalid_start(c, episode_id, reason):
                return None   # done by the server (a judge's role has no right on trials or episodes)
            row = c.execute("SELECT slot, attempt_id FROM episodes WHERE id=?", (episode_id,)).fetchone()
            if row is None:
                raise RuntimeFailure(f"episode {episode_id} is not in this campaign")
            slot, attempt_id = row
            c.backend.forget_episode_labels(c, episode_id)
            with chain.change(c, "episodes", episode_id):
                c.execute("DELETE FROM episodes WHERE id=?", (episode_id,))
            cls = "invalid_start" if kind == "invalid_start" else "rig"
            with chain.change(c, "attempts", attempt_id):
                c.execute("UPDATE attempts SET status='aborted', reason=?, abort_class=?, abort_cause=? WHERE id=?",
                          (reason, cls, abort_cause(cls, reason), attempt_id))
            with chain.change(c, "trials", slot):
                c.execute("UPDATE trials SET state='aborted', episode_id=NULL, done_at=NULL WHERE slot=?", (slot,))
            with chain.change(c, "campaign", chain.campaign_key(c)):
                c.execute("UPDATE campaign SET finished_at=NULL, stop_reason=NULL WHERE stop_reason='complete'")
            _event(c, kind, f"episode {episode_id}: {reason}; trial will be re-run", slot, at=now)
        return slot

    def abort_attempt(self, attempt_id: int, reason: str, abort_class: str | None = None,
                      settles: str | None = None) -> None:
        """Mark a running attempt aborted with `reason`, its cause's `abort_class` and the cause
        that `reason` reads as within the class (`abort_causes.abort_cause`). `settles`
        None: the trial goes back to the queue; `failure` (the protocol's `aborts` rule scored it
        as its policy's failure) or `excluded` (its re-run limit reached): the trial is done,
        with no episode, and is never run again."""
        if settles not in (None, SETTLES_FAILURE, SETTLES_EXCLUDED):
            raise ValueError(f"settles must be None, {SETTLES_FAILURE!r} or {SETTLES_EXCLUDED!r}, not {settles!r}")
        now = time.time()
        with self.transaction() as c:
            row = c.execute("SELECT slot FROM attempts WHERE id=?", (attempt_id,)).fetchone()
            with chain.change(c, "attempts", attempt_id):
                c.execute("UPDATE attempts SET status='aborted', ended_at=?, reason=?, abort_class=?, abort_cause=?,"
                          " settles=? WHERE id=?",
                          (now, reason, abort_class, abort_cause(abort_class, reason), settles, attempt_id))
            if row:
                state = "aborted" if settles is None else "done"
                with chain.change(c, "trials", row[0]):
                    c.execute("UPDATE trials SET state=?, done_at=? WHERE slot=? AND state='running'",
                              (state, None if settles is None else now, row[0]))
                _event(c, "aborted", reason if settles is None else f"{reason} ({settles})", row[0], at=now)

    def reruns(self, slot: int) -> int:
        """How many times trial `slot` was aborted and sent back to be re-run, not counting
        interruptions (Ctrl-C, a killed process), which say nothing about the trial."""
        row = self.conn.execute(
            "SELECT count(*) FROM attempts WHERE slot=? AND status='aborted' AND settles IS NULL"
            " AND (abort_class IS NULL OR abort_class <> ?)", (slot, INTERRUPTED_CLASS)).fetchone()
        return int(row[0])

    def mark_finished(self, reason: str) -> None:
        with self.transaction() as c:
            with chain.change(c, "campaign", chain.campaign_key(c)):
                c.execute("UPDATE campaign SET finished_at=?, stop_reason=?", (time.time(), reason))
            _event(c, "finished", reason)

    def integrity_ok(self) -> bool:
        return not self.conn.backend.integrity_problems(self.conn)

    def chain_status(self) -> chain.ChainStatus:
        """The evidence chain's check: as the opener found it (`evidence`), else computed now."""
        return self.evidence if self.evidence is not None else chain.verify(self.conn)

    def chain_entries(self) -> list[tuple]:
        return chain.entries_of(self.conn)

    def chained_rows(self, table: str) -> list[dict[str, Any]]:
        """Every row of a chained table, as the chain hashes it (`chain.rows_of`)."""
        return chain.rows_of(self.conn, table)
