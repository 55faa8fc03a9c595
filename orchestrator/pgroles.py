"""Blinding enforced by the PostgreSQL server: judge roles (`orchestrator store add-judge`).

Every campaign on a server carries two objects made for judges (`install_blind_objects`,
run when the campaign is created or migrated):
- `blind_episodes`, a view of the opaque episode id, frame count, duration, video paths and
  layout mark of every recorded episode. A view reads its tables with its owner's rights, so
  a judge granted the view reads those columns and nothing else of `episodes` or `trials`;
- `judging_info`, one row: the campaign's random id (the judges' ordering salt), the success
  test in words, the failure modes and the marks, taken from the frozen protocol by
  `blinding._protocol_parts` (the protocol text itself names policies and is not granted).

A judge is a login role in the group `<database>_judges`. The group may read `meta`,
`blind_episodes` and `judging_info`; on `judgments` row-level security lets it read, add and
retract (set `retracted_at`) only rows whose `judge` is its own role name, with `source`
'local'. It has no privilege on `trials`, `episodes`, `attempts`, `campaign`, `events` or
`sessions`: the server answers "permission denied" (PostgreSQL documentation, "Row Security
Policies" and "Privileges", sections 5.8 and 5.9 of the PostgreSQL 15 manual). The campaign's
owner (the operator who created it) is not subject to the policies.
"""

from __future__ import annotations

import json
import re

from .errors import BadInput

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,40}$")


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def judges_group(conn) -> str:
    database = conn.raw.execute("SELECT current_database()").fetchone()[0]
    return f"{database}_judges"


def install_blind_objects(conn) -> None:
    """Create (or refresh) `blind_episodes` and `judging_info` on a server store's connection."""
    from .blinding import _protocol_parts

    campaign_id, protocol_text, layout_text = conn.raw.execute(
        "SELECT id, protocol_text, layout_text FROM campaign").fetchone()
    text, modes, marks = _protocol_parts(protocol_text, layout_text)
    conn.raw.execute(
        "CREATE OR REPLACE VIEW blind_episodes WITH (security_barrier) AS"
        " SELECT e.id, e.frames, e.duration_s, e.files, t.mark_id"
        " FROM episodes e JOIN trials t ON t.slot = e.slot")
    conn.raw.execute("CREATE TABLE IF NOT EXISTS judging_info (ref TEXT NOT NULL, success_test TEXT NOT NULL,"
                     " failure_modes TEXT NOT NULL, marks TEXT NOT NULL)")
    conn.raw.execute("DELETE FROM judging_info")
    conn.raw.execute("INSERT INTO judging_info VALUES (%s, %s, %s, %s)",
                     (str(campaign_id), text, json.dumps(list(modes)),
                      json.dumps({k: [m.x, m.y] for k, m in marks.items()})))


def add_judge(url: str, name: str, password: str | None = None) -> None:
    """Create the login role `name` for a judge of the campaign at `url` (run as its owner)."""
    import psycopg
    from psycopg import sql

    from .pgstore import open_connection, redact

    if not _NAME.match(name) or name in ("physics", "consensus", "auto"):
        raise BadInput(f"judge name {name!r}: use a letter, then letters, digits, _ . - "
                       "(not physics, consensus or auto)")
    conn = open_connection(url, directory=None)  # type: ignore[arg-type]
    try:
        group = judges_group(conn)
        owner = conn.raw.execute("SELECT tableowner FROM pg_tables WHERE tablename = 'judgments'"
                                 " AND schemaname = current_schema()").fetchone()[0]
        me = conn.raw.execute("SELECT current_user").fetchone()[0]
        if owner != me:
            raise BadInput(f"{redact(url)}: connect as the campaign's owner ({owner}) to add judges")
        conn.raw.execute("BEGIN")
        try:
            install_blind_objects(conn)
            if not conn.raw.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (group,)).fetchone():
                conn.raw.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(group)))
            _grant(conn, group)
            if conn.raw.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone():
                raise BadInput(f"{redact(url)}: a role named {name!r} already exists on this server")
            create = sql.SQL("CREATE ROLE {} LOGIN IN ROLE {}").format(
                sql.Identifier(name), sql.Identifier(group))
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


def _grant(conn, group: str) -> None:
    """The judges' group: privileges and row-level security policies (idempotent)."""
    from psycopg import sql

    database = conn.raw.execute("SELECT current_database()").fetchone()[0]
    role = sql.Identifier(group)
    statements = [
        "GRANT CONNECT ON DATABASE {db} TO {role}",
        "GRANT USAGE ON SCHEMA public TO {role}",
        "GRANT SELECT ON meta, blind_episodes, judging_info TO {role}",
        "GRANT SELECT (id, episode_id, judge, label, failure_mode, note, created_at, retracted_at, source),"
        " INSERT (episode_id, judge, label, failure_mode, note, created_at, source),"
        " UPDATE (retracted_at) ON judgments TO {role}",
        "GRANT USAGE ON SEQUENCE judgments_id_seq TO {role}",
        "ALTER TABLE judgments ENABLE ROW LEVEL SECURITY",
    ]
    for statement in statements:
        conn.raw.execute(sql.SQL(statement).format(db=sql.Identifier(database), role=role))
    policies = {
        "judges_read_own": "FOR SELECT TO {role} USING (judge = current_user)",
        "judges_add_own": "FOR INSERT TO {role} WITH CHECK (judge = current_user AND source = 'local')",
        "judges_retract_own": "FOR UPDATE TO {role} USING (judge = current_user) WITH CHECK (judge = current_user)",
    }
    for policy, body in policies.items():
        if conn.raw.execute("SELECT 1 FROM pg_policies WHERE tablename = 'judgments' AND policyname = %s",
                            (policy,)).fetchone():
            continue
        conn.raw.execute(sql.SQL("CREATE POLICY {} ON judgments " + body).format(
            sql.Identifier(policy), role=role))
