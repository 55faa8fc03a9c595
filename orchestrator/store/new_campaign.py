"""A campaign's first rows, in one transaction: the schema, the frozen protocol, layout and rig
profile texts with their SHA-256, the seeded schedule, the audit sample when the protocol
pre-registers one (`audit.py`) and the 'created' event, each row chained (`chain.py`). The SQLite store and the PostgreSQL store write a new campaign through it."""

from __future__ import annotations

import secrets
import time

from orchestrator.design.schedule import Trial
from orchestrator.store import chain
from orchestrator.store.audit import write_audit
from orchestrator.store.judgments import insert_row
from orchestrator.store.schema import create_schema


def write_new_campaign(conn, *, name: str, protocol_path: str, protocol_text: str, protocol_sha256: str,
                       layout_text: str, layout_sha256: str, rig_path: str, rig_text: str,
                       simulated: bool, schedule: list[Trial], audit: float = 0.0) -> None:
    """One transaction: schema, frozen protocol, schedule and, with `audit` (the protocol's
    `judging.audit`) above 0, the audit sample drawn from the schedule, each row chained (SQLite
    file or PostgreSQL database)."""
    conn.execute("BEGIN")
    create_schema(conn)
    conn.backend.mark_as_ours(conn)
    conn.execute("INSERT INTO meta VALUES ('tool', 'so101-ab-orchestrator')")
    campaign_id = secrets.token_hex(6)
    conn.execute(
        "INSERT INTO campaign (id, name, created_at, protocol_path, protocol_text, protocol_sha256,"
        " layout_text, layout_sha256, rig_path, rig_text, simulated) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
        (campaign_id, name, time.time(), protocol_path, protocol_text, protocol_sha256,
         layout_text, layout_sha256, rig_path, rig_text, int(simulated)))
    chain.append(conn, "campaign", campaign_id)
    conn.executemany(
        "INSERT INTO trials (slot, unit, mark_id, repeat_index, position, policy, seed)"
        " VALUES (?,?,?,?,?,?,?)",
        [(t.slot, t.unit, t.mark_id, t.repeat, t.position, t.policy, t.seed) for t in schedule])
    for t in schedule:
        chain.append(conn, "trials", t.slot)
    write_audit(conn, audit, len(schedule))
    new_id = insert_row(conn, "INSERT INTO events (at, kind, message) VALUES (?, 'created', ?)",
                       (time.time(), f"campaign created with {len(schedule)} scheduled trials"))
    chain.append(conn, "events", new_id)
    conn.execute("COMMIT")
