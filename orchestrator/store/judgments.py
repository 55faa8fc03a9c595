"""The judges' labels in a campaign store (`judgments`): every label a judge (a person, `auto`,
physics) gave an episode, kept when it is retracted (the audit trail) and chained like every
row the results depend on (`chain.py`). `CampaignStore` has these methods from `JudgmentRows`."""

from __future__ import annotations

import json
import time
from contextlib import AbstractContextManager
from typing import Any

from orchestrator.core.errors import BadInput, RuntimeFailure
from orchestrator.store import chain
from orchestrator.store.records import LABELS, NO_STAGE, STAGES, Judgment, furthest_stage


def insert_row(conn: Any, sql: str, params: tuple) -> int:
    """Run `sql`, an INSERT of one row into a table whose `id` the store assigns
    (`tables.IDENTITY`), and return that id (the backend's `inserted_id`)."""
    new_id = conn.backend.inserted_id(conn, sql, params)
    if new_id is None:
        raise RuntimeFailure("the store returned no id for a new row")
    return int(new_id)


def machine_label(conn: Any, episode_id: str, judge: str, label: str, note: str | None, at: float,
                  ladder: dict[str, float | None] | None) -> None:
    """Inside the caller's transaction: the label of a judge that is not a person (`physics`,
    `auto`; source = the judge's name), with its progress ladder when it has one (stage = the
    furthest stage, stage_times = the ladder as JSON), chained."""
    stage = None if ladder is None else furthest_stage(ladder)
    new_id = insert_row(conn, "INSERT INTO judgments (episode_id, judge, label, note, created_at, source, stage,"
                        " stage_times) VALUES (?,?,?,?,?,?,?,?)",
                        (episode_id, judge, label, note, at, judge, stage,
                         None if ladder is None else json.dumps(ladder)))
    chain.append(conn, "judgments", new_id)


class JudgmentRows:
    """The label methods of a store whose `conn` reads and whose `transaction()` writes."""

    conn: Any

    def transaction(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def judgments(self, judge: str | None = None, include_retracted: bool = False) -> list[Judgment]:
        sql = ("SELECT id, episode_id, judge, label, failure_mode, note, created_at, source, stage, stage_times"
               " FROM judgments WHERE 1=1")
        args: list[Any] = []
        if judge is not None:
            sql += " AND judge = ?"
            args.append(judge)
        if not include_retracted:
            sql += " AND retracted_at IS NULL"
        return [Judgment(row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7], row[8],
                         json.loads(row[9]) if row[9] else None)
                for row in self.conn.execute(sql + " ORDER BY id", args)]

    def latest_labels(self, judge: str) -> dict[str, Judgment]:
        """The current (latest, not retracted) label of `judge` for each episode."""
        out: dict[str, Judgment] = {}
        for j in self.judgments(judge):
            out[j.episode_id] = j
        return out

    def judges(self) -> list[str]:
        rows = self.conn.execute(
            "SELECT DISTINCT judge FROM judgments WHERE retracted_at IS NULL ORDER BY judge")
        return [r[0] for r in rows]

    def add_judgment(self, episode_id: str, judge: str, label: str, failure_mode: str | None = None,
                     note: str | None = None, source: str = "local", created_at: float | None = None,
                     stage: str | None = None, stage_times: dict[str, float | None] | None = None) -> int:
        """Add a label; `stage` is the furthest stage of the progress ladder the judge saw
        (`records.STAGES` or `NO_STAGE`; None: not recorded), `stage_times` a machine judge's time
        of each stage (seconds from the episode's start)."""
        if label not in LABELS:
            raise BadInput(f"label must be one of {', '.join(LABELS)}, not {label!r}")
        if stage is not None and stage not in (*STAGES, NO_STAGE):
            raise BadInput(f"stage must be one of {', '.join((*STAGES, NO_STAGE))}, not {stage!r}")
        with self.transaction() as c:
            table = c.backend.labelled_episodes   # a judge's role on a server reads the blinded view only
            if c.execute(f"SELECT 1 FROM {table} WHERE id=?", (episode_id,)).fetchone() is None:
                raise BadInput(f"episode {episode_id} is not in this campaign")
            label_id = insert_row(
                c, "INSERT INTO judgments (episode_id, judge, label, failure_mode, note, created_at, source, stage,"
                " stage_times) VALUES (?,?,?,?,?,?,?,?,?)",
                (episode_id, judge, label, failure_mode, note, created_at or time.time(), source, stage,
                 None if stage_times is None else json.dumps(stage_times)))
            chain.append(c, "judgments", label_id)
            return label_id

    def retract_judgment(self, judgment_id: int) -> None:
        """Undo a label: kept for the audit trail, no longer counted."""
        with self.transaction() as c, chain.change(c, "judgments", judgment_id):
            c.execute("UPDATE judgments SET retracted_at=? WHERE id=? AND retracted_at IS NULL",
                      (time.time(), judgment_id))
