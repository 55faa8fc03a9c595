"""Block leases on a server store: the SQL of the stations (`run/stations.py` runs them) over
the tables of `postgres_stations.py`.

A station claims the next block with `SELECT ... FOR UPDATE SKIP LOCKED` (two stations never
wait on or take the same row) and holds it under a lease of `lease_s` seconds, renewed by a
heartbeat on its own connection (`Heartbeat`); leases are read on the server's clock
(`clock_timestamp()`), so the stations' clocks need not agree. `BlockClaim` is the store's guard
on a station: beginning or committing an attempt checks, in the same transaction, that the
station still holds the trial's block.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, cast

from orchestrator.core.errors import RuntimeFailure
from orchestrator.store.postgres_stations import install_station_tables
from orchestrator.store.sqlite import CampaignStore

if TYPE_CHECKING:
    from orchestrator.store.postgres import PgConnection


def _server(store: CampaignStore) -> PgConnection:
    """The store's server connection: stations exist only on a PostgreSQL store."""
    return cast("PgConnection", store.conn)

NOW = "extract(epoch from clock_timestamp())"


class LeaseLost(RuntimeFailure):
    """This station no longer holds the block of the trial it is running."""


class BlockClaim:
    """One station's claim on its block, passed to the store as its guard (`TrialGuard`) when
    the campaign is opened for the station: raises LeaseLost when the station does not hold
    the block of the trial in the transaction, or when its heartbeat found the lease gone
    (`lost`)."""

    def __init__(self, station: str, lease_s: float):
        self.station, self.lease_s = station, float(lease_s)
        self.lost = threading.Event()

    def __call__(self, conn: Any, slot: int) -> None:
        row = conn.execute("SELECT b.unit FROM blocks b JOIN trials t ON t.unit = b.unit WHERE t.slot = ?"
                           " AND b.station = ? AND b.state = 'claimed' FOR UPDATE OF b",
                           (slot, self.station)).fetchone()
        if row is None or self.lost.is_set():
            raise LeaseLost(f"station {self.station} lost its claim on the block of trial {slot + 1} "
                            f"(lease of {self.lease_s:g} s ran out); another station re-runs it")


def register_station(store: CampaignStore, name: str, *, host: str, pid: int, rig_path: str,
                     rig_text: str, rig_sha256: str, calibration_sha256: str | None) -> None:
    """Create the station tables if no station has yet, then record (or update) this station's
    host, process and rig."""
    install_station_tables(store.conn)
    _server(store).raw.execute(
        f"INSERT INTO stations VALUES (%s, %s, %s, %s, %s, %s, %s, {NOW}, {NOW})"
        " ON CONFLICT (name) DO UPDATE SET host = EXCLUDED.host, pid = EXCLUDED.pid,"
        " rig_path = EXCLUDED.rig_path, rig_text = EXCLUDED.rig_text, rig_sha256 = EXCLUDED.rig_sha256,"
        " calibration_sha256 = EXCLUDED.calibration_sha256, last_seen = EXCLUDED.last_seen",
        (name, host, pid, rig_path, rig_text, rig_sha256, calibration_sha256))


def station_process(store: CampaignStore, name: str) -> tuple[str, int] | None:
    """(host, pid) of station `name`'s last registered process; None before its first session."""
    if not store.conn.backend.has_table(store.conn, "stations"):
        return None
    row = _server(store).raw.execute("SELECT host, pid FROM stations WHERE name = %s", (name,)).fetchone()
    return None if row is None else (str(row[0]), int(row[1]))


class Heartbeat:
    """A station's own connection to the server, for renewing its lease while the runner's
    connection is busy with a trial."""

    def __init__(self, store: CampaignStore):
        from orchestrator.store.postgres import PgConnection

        self._conn = PgConnection(_server(store).url)

    def beat(self, station: str, unit: int | None, lease_s: float) -> bool:
        """Mark the station seen and extend its lease on block `unit` by `lease_s` seconds;
        False when the station no longer holds that block (True with no block)."""
        self._conn.raw.execute(f"UPDATE stations SET last_seen = {NOW} WHERE name = %s", (station,))
        if unit is None:
            return True
        cur = self._conn.raw.execute(
            f"UPDATE blocks SET lease_until = {NOW} + %s WHERE unit = %s AND station = %s"
            " AND state = 'claimed'", (lease_s, unit, station))
        return cur.rowcount != 0

    def close(self) -> None:
        self._conn.close()


def claim_block(store: CampaignStore, station: str, lease_s: float, skip: set[int]) -> tuple[int, str | None] | None:
    """In one transaction, take the next block not done and not in `skip` that is free, this
    station's, or under a lease that ran out (this station's own first, then by unit), leasing
    it for `lease_s` seconds; (unit, its previous holder), or None when none is free now."""
    conn = _server(store)
    conn.execute("BEGIN")
    try:
        row = conn.raw.execute(
            "SELECT unit, station FROM blocks WHERE state <> 'done' AND NOT (unit = ANY(%s))"
            f" AND (state = 'pending' OR station = %s OR lease_until < {NOW})"
            " ORDER BY (station IS NOT DISTINCT FROM %s) DESC, unit LIMIT 1 FOR UPDATE SKIP LOCKED",
            (list(skip), station, station)).fetchone()
        if row is not None:
            conn.raw.execute(
                f"UPDATE blocks SET state = 'claimed', station = %s, lease_until = {NOW} + %s,"
                f" claimed_at = {NOW}, finished_at = NULL, claims = claims + 1 WHERE unit = %s",
                (station, lease_s, row[0]))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return None if row is None else (int(row[0]), row[1])


def blocks_left(store: CampaignStore, skip: set[int]) -> int:
    """How many blocks not in `skip` are not done (held by other stations, or free)."""
    return _server(store).one_row("SELECT count(*) FROM blocks WHERE state <> 'done' AND NOT (unit = ANY(%s))",
                                  (list(skip),))[0]


def running_attempts(store: CampaignStore, unit: int) -> list[tuple[int, str, int]]:
    """(attempt id, episode id, slot) of the attempts left running in block `unit`."""
    return [tuple(row) for row in store.conn.execute(  # type: ignore[misc]
        "SELECT a.id, a.episode_id, a.slot FROM attempts a JOIN trials t ON t.slot = a.slot"
        " WHERE t.unit = ? AND a.status = 'running'", (unit,)).fetchall()]


def done_episodes(store: CampaignStore, unit: int) -> list[str]:
    """The episode ids of block `unit`'s finished trials that have an episode (a trial settled by an
    abort the protocol counts as the policy's failure, e.g. `operator_unanswered`, has none: its
    outcome does not depend on the arm, and it stays counted)."""
    return [row[0] for row in store.conn.execute(
        "SELECT episode_id FROM trials WHERE unit = ? AND state = 'done' AND episode_id IS NOT NULL",
        (unit,)).fetchall()]


def trials_left(store: CampaignStore, unit: int) -> int:
    """How many of block `unit`'s trials are not done."""
    return store.conn.execute("SELECT count(*) FROM trials WHERE unit = ? AND state <> 'done'",
                              (unit,)).fetchone()[0]


def release_block(store: CampaignStore, unit: int, station: str, claimed_only: bool = False) -> None:
    """Give block `unit`, held by `station`, back to the queue (only while claimed: `claimed_only`)."""
    store.conn.execute("UPDATE blocks SET state = 'pending', lease_until = NULL WHERE unit = ?"
                       " AND station = ?" + (" AND state = 'claimed'" if claimed_only else ""), (unit, station))


def finish_block(store: CampaignStore, unit: int, station: str) -> None:
    """Record block `unit` done by `station`, now."""
    store.conn.execute(f"UPDATE blocks SET state = 'done', finished_at = {NOW}, lease_until = NULL"
                       " WHERE unit = ? AND station = ?", (unit, station))
