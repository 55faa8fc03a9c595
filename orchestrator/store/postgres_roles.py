"""Blinding enforced by the PostgreSQL server: judge and operator roles (`orchestrator store
add-judge` / `add-operator`), granted the objects of `pgblind.py` (the `blind_episodes` view,
`judging_info`, `judging_complete()`).

A judge is a login role in the group `<database>_judges`. The group may read `meta`,
`blind_episodes` and `judging_info`; on `judgments` row-level security lets it read, add and
retract (set `retracted_at`) only rows whose `judge` is its own role name, with `source`
'local'. It has no privilege on `trials`, `episodes`, `attempts`, `campaign`, `events` or
`sessions`, nor on `chain` (its writes extend the evidence chain through the functions of
`postgres_chain.py`, which hand back no row digest): the server answers "permission denied" (PostgreSQL documentation, "Row Security
Policies" and "Privileges", sections 5.8 and 5.9 of the PostgreSQL 15 manual). The campaign's
owner is not subject to the policies.

An operator is a login role in `<database>_operators`: it may run stations (every campaign
table) but reads human labels only once `judging_complete()` says so (the protocol's
`judging.hide_labels_from_operator`; otherwise always).
"""

from __future__ import annotations

import re

from orchestrator.core.errors import BadInput
from orchestrator.store.postgres_blind import install_blind_objects
from orchestrator.store.postgres_chain import grant_functions

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,40}$")


def add_judge(url: str, name: str, password: str | None = None) -> None:
    """Create the login role `name` for a judge of the campaign at `url` (run as its owner)."""
    if name in ("physics", "consensus", "auto"):
        raise BadInput(f"judge name {name!r}: physics, consensus and auto are reserved")
    _add_role(url, name, password, "judges", _grant)


def _add_role(url: str, name: str, password: str | None, kind: str, grant) -> None:
    """In one transaction: the group `<database>_<kind>` with its grants and policies, then the
    login role `name` in it. Only the campaign's owner may do this."""
    import psycopg
    from psycopg import sql

    from orchestrator.store.postgres import open_connection, redact

    if not _NAME.match(name):
        raise BadInput(f"name {name!r}: use a letter, then letters, digits, _ . -")
    conn = open_connection(url, directory=None)  # type: ignore[arg-type]
    try:
        database = conn.one_row("SELECT current_database()")[0]
        group = f"{database}_{kind}"
        owner = conn.one_row("SELECT tableowner FROM pg_tables WHERE tablename = 'judgments'"
                             " AND schemaname = current_schema()")[0]
        me = conn.one_row("SELECT current_user")[0]
        if owner != me:
            raise BadInput(f"{redact(url)}: connect as the campaign's owner ({owner}) to add {kind}")
        conn.raw.execute("BEGIN")
        try:
            install_blind_objects(conn)
            if not conn.raw.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (group,)).fetchone():
                conn.raw.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(group)))
            grant(conn, group)
            if conn.raw.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone():
                raise BadInput(f"{redact(url)}: a role named {name!r} already exists on this server")
            create = sql.SQL("CREATE ROLE {} LOGIN IN ROLE {}").format(sql.Identifier(name), sql.Identifier(group))
            if password:
                create = create + sql.SQL(" PASSWORD {}").format(sql.Literal(password))
            conn.raw.execute(create)
            conn.raw.execute("COMMIT")
        except BaseException:
            conn.raw.execute("ROLLBACK")
            raise
    except psycopg.errors.InsufficientPrivilege as exc:
        raise BadInput(f"{redact(url)}: not allowed to create roles ({str(exc).strip()}); "
                       "connect as a role with CREATEROLE that owns the campaign") from None
    finally:
        conn.close()


def add_operator(url: str, name: str, password: str | None = None) -> None:
    """Create the login role `name` for an operator (a station's arm) of the campaign at `url`
    (run as its owner): it runs trials (every table but the owner's objects) and, when the
    protocol pre-registers `judging.hide_labels_from_operator`, reads no human label before
    `judging_complete()`; row-level security filters them out of every query it makes."""
    _add_role(url, name, password, "operators", _grant_operators)


def _grant_operators(conn, group: str) -> None:
    from psycopg import sql

    from orchestrator.store.postgres_stations import install_station_tables

    install_station_tables(conn, in_transaction=True)
    database = conn.raw.execute("SELECT current_database()").fetchone()[0]
    role = sql.Identifier(group)
    for statement in (
            "GRANT CONNECT ON DATABASE {db} TO {role}",
            "GRANT USAGE ON SCHEMA public TO {role}",
            "GRANT SELECT, INSERT, UPDATE, DELETE ON meta, campaign, trials, attempts, episodes, judgments,"
            " events, sessions, blocks, stations TO {role}",
            "GRANT SELECT ON blind_episodes, judging_info TO {role}",
            "GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO {role}",
            "GRANT EXECUTE ON FUNCTION judging_complete(), forget_episode_labels(TEXT) TO {role}",
            "ALTER TABLE judgments ENABLE ROW LEVEL SECURITY"):
        conn.raw.execute(sql.SQL(statement).format(db=sql.Identifier(database), role=role))
    grant_functions(conn, group)
    policies = {
        "operators_read": "FOR SELECT TO {role} USING (judge IN ('physics', 'auto') OR judging_complete())",
        "operators_add": "FOR INSERT TO {role} WITH CHECK (true)",
        "operators_update": "FOR UPDATE TO {role} USING (judge IN ('physics', 'auto') OR judging_complete())",
        "operators_delete": "FOR DELETE TO {role} USING (true)",
    }
    _policies(conn, role, policies)


def _policies(conn, role, policies: dict[str, str]) -> None:
    from psycopg import sql

    for policy, body in policies.items():
        if conn.raw.execute("SELECT 1 FROM pg_policies WHERE tablename = 'judgments' AND policyname = %s",
                            (policy,)).fetchone():
            continue
        conn.raw.execute(sql.SQL("CREATE POLICY {} ON judgments " + body).format(
            sql.Identifier(policy), role=role))


def _grant(conn, group: str) -> None:
    """The judges' group: privileges and row-level security policies (idempotent)."""
    from psycopg import sql

    database = conn.raw.execute("SELECT current_database()").fetchone()[0]
    role = sql.Identifier(group)
    statements = [
        "GRANT CONNECT ON DATABASE {db} TO {role}",
        "GRANT USAGE ON SCHEMA public TO {role}",
        "GRANT SELECT ON meta, blind_episodes, judging_info TO {role}",
        "GRANT SELECT (id, episode_id, judge, label, failure_mode, note, created_at, retracted_at, source, stage,"
        " stage_times), INSERT (episode_id, judge, label, failure_mode, note, created_at, source, stage,"
        " stage_times),"
        " UPDATE (retracted_at) ON judgments TO {role}",
        "GRANT USAGE ON SEQUENCE judgments_id_seq TO {role}",
        "GRANT EXECUTE ON FUNCTION invalid_start(TEXT, TEXT) TO {role}",
        "ALTER TABLE judgments ENABLE ROW LEVEL SECURITY",
    ]
    for statement in statements:
        conn.raw.execute(sql.SQL(statement).format(db=sql.Identifier(database), role=role))
    grant_functions(conn, group)   # a judge's labels extend the evidence chain, which it cannot read
    policies = {
        "judges_read_own": "FOR SELECT TO {role} USING (judge = current_user)",
        "judges_add_own": "FOR INSERT TO {role} WITH CHECK (judge = current_user AND source = 'local')",
        "judges_retract_own": "FOR UPDATE TO {role} USING (judge = current_user) WITH CHECK (judge = current_user)",
    }
    _policies(conn, role, policies)
