"""The evidence chain on a PostgreSQL store (chain.py defines it): the server computes both
digests itself, in security-definer functions, so that every role's writes extend the chain
while no judge and no operator reads a row of `chain` (a row digest of a trial could be matched
against guesses of its policy) or any row it has no right to:

- `chain_append(table, key)`: after a write, chain the row's content as the server sees it
  (under a transaction-level advisory lock, so that stations writing at once append in turn);
- `chain_guard(table, key)`: before a write, raise unless the row is as its latest entry;
- `chain_verify()`: the whole check of chain.py, returning only the head, the entry count,
  the origin and the names of the rows that do not match.

`chain_row_sha(table, key)`, `chain_row_expr(table)` (the canonical encoding in SQL) and
`chain_last_sha(table, key)` (a row's latest entry) are
executable by the owner only. `forget_episode_labels` and `invalid_start` (postgres_blind.py)
chain what they change by calling `chain_append`.
"""

from __future__ import annotations

from orchestrator.store.chain import DELETED, GENESIS, ORIGIN_TABLE, ChainStatus, origin_sha256
from orchestrator.store.tables import CHAINED

CHAIN_LOCK = 0x50414234
_TABLES = ", ".join(f"'{t}'" for t in CHAINED)

_FUNCTIONS = (
    f"""
CREATE OR REPLACE FUNCTION chain_key_column(t TEXT) RETURNS TEXT
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE t {" ".join(f"WHEN '{t}' THEN '{k}'" for t, k in CHAINED.items())} END
$$""",
    # the canonical encoding of chain.py, as one SQL expression over a table's columns
    f"""
CREATE OR REPLACE FUNCTION chain_row_expr(p_tbl TEXT) RETURNS TEXT
LANGUAGE plpgsql STABLE SET search_path = public AS $$
DECLARE expr TEXT;
BEGIN
  IF p_tbl NOT IN ({_TABLES}) THEN RAISE EXCEPTION 'chain: % is not a chained table', p_tbl; END IF;
  SELECT 'sha256(' || string_agg(format(
           'coalesce(%L::bytea || sha256(%s), ''\\x''::bytea)',
           '\\x' || encode(convert_to(a.attname, 'UTF8') || '\\x00'::bytea || convert_to(t.tag, 'UTF8'), 'hex'),
           t.val), ' || ' ORDER BY a.attname COLLATE "C") || ')'
    INTO expr
    FROM pg_attribute a,
         LATERAL (SELECT CASE WHEN a.atttypid IN ('int2'::regtype, 'int4'::regtype, 'int8'::regtype) THEN 'i'
                              WHEN a.atttypid IN ('float4'::regtype, 'float8'::regtype) THEN 'f'
                              WHEN a.atttypid = 'bytea'::regtype THEN 'b' ELSE 's' END AS tag,
                         CASE WHEN a.atttypid IN ('int2'::regtype, 'int4'::regtype, 'int8'::regtype)
                                THEN format('convert_to(%I::text, ''UTF8'')', a.attname)
                              WHEN a.atttypid IN ('float4'::regtype, 'float8'::regtype)
                                THEN format('float8send(%I::float8)', a.attname)
                              WHEN a.atttypid = 'bytea'::regtype THEN format('%I', a.attname)
                              ELSE format('convert_to(%I::text, ''UTF8'')', a.attname) END AS val) t
   WHERE a.attrelid = p_tbl::regclass AND a.attnum > 0 AND NOT a.attisdropped;
  RETURN expr;
END $$""",
    f"""
CREATE OR REPLACE FUNCTION chain_row_sha(p_tbl TEXT, p_key TEXT) RETURNS TEXT
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = public AS $$
DECLARE result TEXT;
BEGIN
  EXECUTE format('SELECT encode(%s, ''hex'') FROM %I WHERE %I::text = $1', chain_row_expr(p_tbl), p_tbl,
                 chain_key_column(p_tbl)) INTO result USING p_key;
  RETURN coalesce(result, '{DELETED}');
END $$""",
    """
CREATE OR REPLACE FUNCTION chain_entry_digest(prev TEXT, seq BIGINT, tbl TEXT, k TEXT, sha TEXT,
                                              at DOUBLE PRECISION) RETURNS TEXT
LANGUAGE sql IMMUTABLE AS $$
  SELECT encode(sha256(convert_to(concat_ws(chr(31), prev, seq::text, tbl, k, sha,
                                            encode(float8send(at), 'hex')), 'UTF8')), 'hex')
$$""",
    """
CREATE OR REPLACE FUNCTION chain_last_sha(p_tbl TEXT, p_key TEXT) RETURNS TEXT
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public AS $$
  SELECT c.row_sha256 FROM chain c WHERE c.tbl = p_tbl AND c.row_key = p_key ORDER BY c.seq DESC LIMIT 1
$$""",
    f"""
CREATE OR REPLACE FUNCTION chain_append(p_tbl TEXT, p_key TEXT) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = public AS $$
DECLARE sha TEXT; last_sha TEXT; head_seq BIGINT; head_digest TEXT;
        now_at DOUBLE PRECISION := extract(epoch FROM clock_timestamp());
BEGIN
  PERFORM pg_advisory_xact_lock({CHAIN_LOCK});
  sha := chain_row_sha(p_tbl, p_key);
  last_sha := chain_last_sha(p_tbl, p_key);
  IF last_sha = sha OR (last_sha IS NULL AND sha = '{DELETED}') THEN RETURN; END IF;
  SELECT c.seq, c.digest INTO head_seq, head_digest FROM chain c ORDER BY c.seq DESC LIMIT 1;
  head_seq := coalesce(head_seq, 0) + 1;
  INSERT INTO chain (seq, tbl, row_key, row_sha256, at, digest)
    VALUES (head_seq, p_tbl, p_key, sha, now_at,
            chain_entry_digest(coalesce(head_digest, '{GENESIS}'), head_seq, p_tbl, p_key, sha, now_at));
END $$""",
    f"""
CREATE OR REPLACE FUNCTION chain_guard(p_tbl TEXT, p_key TEXT) RETURNS void
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = public AS $$
DECLARE last_sha TEXT;
BEGIN
  last_sha := chain_last_sha(p_tbl, p_key);
  IF chain_row_sha(p_tbl, p_key) <> coalesce(last_sha, '{DELETED}') THEN
    RAISE EXCEPTION 'chain: % % does not match its chained digest', p_tbl, p_key;
  END IF;
END $$""",
    # chain.compare in SQL: the broken entry first, then rows by their latest entry's seq, then
    # rows never chained (table order, key order)
    f"""
CREATE OR REPLACE FUNCTION chain_verify(OUT unverified TEXT[], OUT head TEXT, OUT entries BIGINT,
                                        OUT origin TEXT, OUT origin_at DOUBLE PRECISION)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = public AS $$
DECLARE r RECORD; prev TEXT := '{GENESIS}'; broken BIGINT; cur TEXT := ''; t TEXT; i INT := 0;
BEGIN
  unverified := '{{}}'; entries := 0; head := '{GENESIS}';
  FOR r IN SELECT * FROM chain ORDER BY seq LOOP
    entries := entries + 1;
    IF r.seq = 1 AND r.tbl = '{ORIGIN_TABLE}' THEN origin := r.row_key; origin_at := r.at; END IF;
    IF broken IS NULL AND (r.seq <> entries
        OR r.digest <> chain_entry_digest(prev, r.seq, r.tbl, r.row_key, r.row_sha256, r.at)
        OR (r.seq = 1 AND (r.tbl <> '{ORIGIN_TABLE}' OR r.row_sha256 <> '{origin_sha256()}'))) THEN
      broken := entries;   -- the position, as chain.walk names it
    END IF;
    prev := r.digest; head := r.digest;
  END LOOP;
  IF broken IS NOT NULL THEN unverified := ARRAY['chain seq ' || broken]; END IF;
  FOREACH t IN ARRAY ARRAY[{_TABLES}] LOOP
    cur := cur || CASE WHEN i = 0 THEN '' ELSE ' UNION ALL ' END || format(
      'SELECT %L AS tbl, %s AS ti, %I::text AS k, encode(%s, ''hex'') AS sha,'
      ' row_number() OVER (ORDER BY %I) AS ord FROM %I',
      t, i, chain_key_column(t), chain_row_expr(t), chain_key_column(t), t);
    i := i + 1;
  END LOOP;
  FOR r IN EXECUTE format(
      'WITH latest AS (SELECT DISTINCT ON (tbl, row_key) tbl, row_key, row_sha256, seq FROM chain'
      '                 WHERE tbl <> %L ORDER BY tbl, row_key, seq DESC), cur AS (%s)'
      ' SELECT coalesce(cur.tbl, latest.tbl) AS tbl, coalesce(cur.k, latest.row_key) AS k'
      '   FROM cur FULL JOIN latest ON latest.tbl = cur.tbl AND latest.row_key = cur.k'
      '  WHERE latest.row_sha256 IS DISTINCT FROM coalesce(cur.sha, %L) OR latest.seq >= %s'
      '  ORDER BY latest.seq NULLS LAST, cur.ti, cur.ord',
      '{ORIGIN_TABLE}', cur, '{DELETED}', coalesce(broken::text, 'NULL')) LOOP
    unverified := unverified || (r.tbl || ' ' || chain_key_column(r.tbl) || ' ' || r.k);
  END LOOP;
END $$""",
)
_OWNER_ONLY = "chain_row_expr(TEXT), chain_row_sha(TEXT, TEXT), chain_last_sha(TEXT, TEXT), chain_key_column(TEXT), chain_entry_digest(TEXT, BIGINT, TEXT, TEXT, TEXT, DOUBLE PRECISION)"
GRANTED = "chain_append(TEXT, TEXT), chain_guard(TEXT, TEXT), chain_verify()"


def install_functions(conn) -> None:
    """Create (or refresh) the chain's functions, executable by the owner, and by the judges'
    and operators' groups where they exist (all but the encoding)."""
    for statement in _FUNCTIONS:
        conn.raw.execute(statement)
    conn.raw.execute(f"REVOKE ALL ON FUNCTION {_OWNER_ONLY}, {GRANTED} FROM PUBLIC")
    database = conn.raw.execute("SELECT current_database()").fetchone()[0]
    for kind in ("judges", "operators"):
        group = f"{database}_{kind}"
        if conn.raw.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (group,)).fetchone():
            grant_functions(conn, group)


def grant_functions(conn, group: str) -> None:
    from psycopg import sql

    conn.raw.execute(sql.SQL(f"GRANT EXECUTE ON FUNCTION {GRANTED} TO {{}}").format(sql.Identifier(group)))


def call(conn, function: str, table: str, key: str) -> None:
    """`chain_append` or `chain_guard` on the server; a guard's refusal is chain.ChainBroken."""
    import psycopg

    from orchestrator.store.chain import _refuse

    try:
        conn.raw.execute(f"SELECT {function}(%s, %s)", (table, key))
    except psycopg.errors.RaiseException as exc:
        if "chain:" not in str(exc):
            raise
        raise _refuse(table, key) from None


def verify_on_server(conn) -> ChainStatus:
    row = conn.raw.execute("SELECT unverified, head, entries, origin, origin_at FROM chain_verify()").fetchone()
    return ChainStatus(head=row[1], entries=int(row[2]), origin=row[3] or "none",
                       origin_at=None if row[4] is None else float(row[4]), unverified=tuple(row[0] or ()))
