"""The per-episode timing a campaign stored (`episodes.timing`), with each episode's policy."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path


def stored_timing(campaign: Path) -> list[dict]:
    with sqlite3.connect(campaign / "campaign.db") as db:
        rows = db.execute("SELECT t.policy, e.timing FROM episodes e JOIN attempts a ON a.id = e.attempt_id "
                          "JOIN trials t ON t.slot = a.slot").fetchall()
    return [{"policy": policy, **json.loads(timing)} for policy, timing in rows]
