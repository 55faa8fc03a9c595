"""The canary check of a column a judge must never read: the judge's sealed connection refuses
it, the blinded episodes and a bundle do not carry the canary, and (the positive control) the
same column read unsealed does."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest


def assert_judges_never_read(campaign: Path, column: str, canary: str, bundle_dir: Path,
                             episodes: int | None = None, table: str = "attempts") -> list[str]:
    """Check the above for `<table>.<column>` (default `attempts`) holding `canary`; returns the
    column's values as read unsealed (the caller asserts what it expects of them)."""
    from orchestrator.judging.blinding import CampaignSource
    from orchestrator.judging.bundle import write_bundle
    from orchestrator.store.sqlite import CampaignStore

    source = CampaignSource(campaign, "ann")
    try:
        shown = source.episodes()
        assert shown and (episodes is None or len(shown) == episodes)
        assert canary not in repr(shown) and canary not in repr(source.info)
        for query in (f"SELECT {column} FROM {table}", f"SELECT * FROM {table}"):
            with pytest.raises(sqlite3.DatabaseError):
                source.store.conn.execute(query).fetchall()
    finally:
        source.close()
    bundle = write_bundle(campaign, bundle_dir).path
    files = [p for p in bundle.rglob("*") if p.is_file()]
    assert len(files) > 4 and not [p for p in files if canary.encode() in p.read_bytes()]
    with CampaignStore.open_readonly(campaign) as store:   # the positive control
        return [r[0] for r in store.conn.execute(f"SELECT {column} FROM {table}")]
