"""The blinded view of a campaign store: the only reads a judge's view is built from
(`judging/blinding.py`), and the seal that makes a judge's SQLite connection refuse every other.

The key -- which policy ran which episode -- lives only in `trials` (`policy`, and
`seed`/`position`/`slot`, from which the schedule and so the policy could be reconstructed).
The view is two statements that select none of those columns: per episode of the judges' queue
(`QUEUE_WHERE`: with an audit, the audited and the unsure episodes only) the opaque id, the
frame count, the duration, the files and the layout mark (`VIEW_SQL`), and the campaign's random
id with its frozen texts (`INFO_SQL`, read before the seal; only the success test and the failure
modes are passed on). On a PostgreSQL store the same view is the server's objects a judge's role
is granted (`postgres_blind.py`, `postgres_roles.py`).
"""

from __future__ import annotations

from contextvars import ContextVar
from pathlib import Path
from typing import Any, Protocol

from orchestrator.core.errors import BadInput


class CampaignStore(Protocol):
    """What these reads use of a store (`sqlite.CampaignStore`, which imports this module)."""

    directory: Path
    conn: Any

# They must never name trials.policy, trials.seed, trials.position or trials.slot (a test
# checks this text).
#
# The judges' queue (docs/judging.md "The audit"): with an audit sample in the store (table
# `audit`, store/audit.py; a protocol with `judging.audit` above 0 always draws one), an episode is
# in the view when its trial is audited or when the `auto` rater has no live sure label for it
# (unsure, or not rated); without one, every episode is. The view gives nothing that says which of
# the two let an episode in: the same columns, and episode ids drawn alike for every trial.
QUEUE_WHERE = (" WHERE NOT EXISTS (SELECT 1 FROM audit)"
               " OR EXISTS (SELECT 1 FROM audit a WHERE a.slot = e.slot)"
               " OR NOT EXISTS (SELECT 1 FROM judgments j WHERE j.episode_id = e.id AND j.judge = 'auto'"
               " AND j.retracted_at IS NULL AND j.label IN ('success', 'failure'))")
VIEW_SQL = ("SELECT e.id, e.frames, e.duration_s, e.files, t.mark_id"
            " FROM episodes e JOIN trials t ON t.slot = e.slot" + QUEUE_WHERE)
INFO_SQL = "SELECT id, protocol_text, layout_text FROM campaign"
SERVER_VIEW_SQL = "SELECT id, frames, duration_s, files, mark_id FROM blind_episodes"
SERVER_INFO_SQL = "SELECT ref, success_test, failure_modes, marks, min_height_m FROM judging_info"


# True while the view's one statement is prepared: a judge's sealed SQLite connection (`seal`) lets
# it read `audit` then (as a server's view reads it with its owner's rights); only ids leave.
_QUEUE_READ: ContextVar[bool] = ContextVar("queue_read", default=False)


def blind_episode_rows(store: CampaignStore) -> list[tuple[str, int, float, Any, str]]:
    """(id, frames, duration_s, files, mark_id) of every episode in the judges' queue (every
    recorded episode when the campaign has no audit), through the view only."""
    token = _QUEUE_READ.set(True)
    try:
        cursor = store.conn.execute(store.conn.backend.blind_episodes_sql)
    finally:
        _QUEUE_READ.reset(token)
    return [tuple(row) for row in cursor]  # type: ignore[misc]


def has_audit(store: CampaignStore) -> bool:
    """Whether the campaign has an audit sample (read before the seal; a server's judge role may
    not read it)."""
    return store.conn.execute("SELECT count(*) FROM audit").fetchone()[0] > 0


def campaign_texts(store: CampaignStore) -> tuple[str, str, str]:
    """(campaign id, frozen protocol text, frozen layout text) of a SQLite store, read before
    the seal; BadInput when the store has no campaign record."""
    row = store.conn.execute(INFO_SQL).fetchone()
    if row is None:
        raise BadInput(f"{store.directory}: campaign store has no campaign record")
    return tuple(row)  # type: ignore[return-value]


def server_judging_info(store: CampaignStore) -> tuple[str, str, str, str, float]:
    """(ref, success test, failure modes JSON, marks JSON, success height in metres): the
    server's `judging_info` row."""
    return tuple(store.conn.execute(SERVER_INFO_SQL).fetchone())  # type: ignore[return-value]


# Columns the judge's connection may never read: the key; anything that may name a policy
# (the campaign name and protocol path are chosen by the researcher; events and abort reasons
# may quote them; inference timings differ by policy type); and the physics outcome, which
# would bias the judge.
SEALED = {"trials": {"policy", "seed", "position", "unit", "repeat_index"},
          "campaign": {"name", "protocol_path", "protocol_text", "rig_path", "rig_text"},
          "episodes": {"physics_success", "max_lift_m", "time_to_success_s", "safety_events",
                       "timing"},
          "attempts": {"reason", "abort_class", "abort_cause", "settles", "operator_answer"},   # an abort's cause would unblind
          "events": None,
          "audit": None,   # which trials are audited (store/audit.py): the queue's view reads it, a judge never
          "chain": None}   # a trial's row digest could be matched against guesses of its policy


def seal(store: CampaignStore) -> None:
    """Make the store's connection refuse (SQLite authorizer) every read of the key and of
    policy-naming text (`SEALED`); on a server, blinding is the judge role's privileges.

    The one exception: the evidence chain's own reads (`store.chain.hashing()`), which hash the
    rows a judge's label or invalid start changes and hand back no value."""
    import sqlite3

    from orchestrator.store.chain import hashing

    def authorizer(action, table, column, *_):
        if action == sqlite3.SQLITE_READ and table == "audit" and _QUEUE_READ.get():
            return sqlite3.SQLITE_OK   # the queue's statement (`blind_episode_rows`), which returns no flag
        if action == sqlite3.SQLITE_READ and table in SEALED and not hashing():
            columns = SEALED[table]
            if columns is None or column in columns:
                return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK

    store.conn.set_authorizer(authorizer)
