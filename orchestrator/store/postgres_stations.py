"""The tables only a server store has, for several arms on one campaign: `blocks` (one row per
schedule unit: who holds it, its lease, when it finished) and `stations` (each arm's rig profile
and calibration hash). `run/stations.py` claims and leases blocks; this module creates them."""

from __future__ import annotations

STATION_DDL = (
    "CREATE TABLE IF NOT EXISTS blocks (unit BIGINT PRIMARY KEY, state TEXT NOT NULL DEFAULT 'pending',"
    " station TEXT, lease_until DOUBLE PRECISION, claimed_at DOUBLE PRECISION,"
    " finished_at DOUBLE PRECISION, claims BIGINT NOT NULL DEFAULT 0)",
    "CREATE TABLE IF NOT EXISTS stations (name TEXT PRIMARY KEY, host TEXT NOT NULL, pid BIGINT NOT NULL,"
    " rig_path TEXT NOT NULL, rig_text TEXT NOT NULL, rig_sha256 TEXT NOT NULL, calibration_sha256 TEXT,"
    " started_at DOUBLE PRECISION NOT NULL, last_seen DOUBLE PRECISION NOT NULL)",
)


def install_station_tables(conn, in_transaction: bool = False) -> None:
    """Create `blocks` (one row per schedule unit) and `stations` once, whoever comes first
    (in its own transaction, or in the caller's)."""
    if not in_transaction:
        conn.execute("BEGIN")
    try:
        conn.raw.execute("SELECT pg_advisory_xact_lock(%s)", (0x50414233,))
        if not (conn.has_table("blocks") and conn.has_table("stations")):
            for statement in STATION_DDL:
                conn.raw.execute(statement)
        conn.raw.execute("INSERT INTO blocks (unit) SELECT DISTINCT unit FROM trials ON CONFLICT DO NOTHING")
        conn.raw.execute("UPDATE blocks SET state = 'done' WHERE state <> 'done' AND unit NOT IN"
                         " (SELECT unit FROM trials WHERE state <> 'done')")
        if not in_transaction:
            conn.execute("COMMIT")
    except BaseException:
        if not in_transaction:
            conn.execute("ROLLBACK")
        raise
