"""The audit sample in a campaign store (table `audit`, schema 7; `design.audit` defines the draw).

Written once, in the transaction that freezes the campaign (`new_campaign.py`, given the frozen
protocol's `judging.audit` by its caller, `run.campaign`): when it is above 0, the sample is drawn from the scheduled trials with a fresh
random seed and stored one row per audited trial (slot, rank in draw order, seed, fraction,
population), each row chained (`chain.py`). Nothing else writes the table; every read checks the
rows against the protocol's fraction and against what their seed draws.

Who may read it: the report's side (`CampaignStore.audit_sample`). A judge's SQLite connection is
sealed against it (`blind_view.SEALED`); on a server neither the judges' nor the operators' roles
are granted it (`postgres_roles.py`): the judge queue reads it only inside the blinded view
(`blind_view.py`), which returns episode ids and nothing that says why an episode is there.
"""

from __future__ import annotations

from typing import Any

from orchestrator.core.errors import BadInput
from orchestrator.design.audit import AuditSample, draw_audit, new_audit_seed
from orchestrator.store import chain

AUDIT_SQL = "SELECT slot, draw_rank, seed, fraction, population FROM audit ORDER BY draw_rank"


def write_audit(conn: Any, fraction: float, population: int, seed: int | None = None) -> AuditSample | None:
    """Inside the caller's transaction: draw the audit of `population` scheduled trials at
    `fraction` (None and nothing written at 0) and store it, each row chained."""
    if fraction <= 0:
        return None
    sample = draw_audit(fraction, population, new_audit_seed() if seed is None else seed)
    for rank, slot in enumerate(sample.slots):
        conn.execute("INSERT INTO audit (slot, draw_rank, seed, fraction, population) VALUES (?,?,?,?,?)",
                     (slot, rank, str(sample.seed), sample.fraction, sample.population))
        chain.append(conn, "audit", slot)
    return sample


def read_audit(conn: Any, fraction: float, where: str) -> AuditSample | None:
    """The stored audit sample (None when `fraction`, the frozen protocol's `judging.audit`, is 0),
    checked against its seed: BadInput (one line) when the rows are missing, disagree with each
    other or with the protocol, or are not what their seed draws (the store was altered)."""
    rows = [tuple(r) for r in conn.execute(AUDIT_SQL).fetchall()]
    if fraction <= 0:
        if rows:
            raise BadInput(f"{where}: the store holds an audit sample but its protocol has none; the store was altered")
        return None
    if not rows:
        raise BadInput(f"{where}: the protocol pre-registers an audit of {fraction:g} but the store holds no "
                       "audit sample; the store was altered")
    seeds, fractions, populations = ({r[i] for r in rows} for i in (2, 3, 4))
    if len(seeds) != 1 or len(populations) != 1 or fractions != {fraction}:
        raise BadInput(f"{where}: the audit sample's rows disagree with each other or with the protocol's "
                       f"audit {fraction:g}; the store was altered")
    try:
        drawn = draw_audit(fraction, int(populations.pop()), int(seeds.pop()))
    except ValueError:
        raise BadInput(f"{where}: the audit sample's seed or population is not a number; the store was altered") from None
    if drawn.slots != tuple(int(r[0]) for r in rows):
        raise BadInput(f"{where}: the audit sample is not the one its seed draws; the store was altered")
    return drawn


class AuditRows:
    """`audit_sample()` of a store whose `conn` reads (SQLite and PostgreSQL alike)."""

    conn: Any

    @property
    def where(self) -> str:
        raise NotImplementedError

    def frozen_protocol(self) -> Any:
        raise NotImplementedError

    def audit_sample(self) -> AuditSample | None:
        """The campaign's audit sample (`design.audit.AuditSample`), None when its protocol has
        no audit (`judging.audit` 0). For the report's side only: it says which trials are audited."""
        return read_audit(self.conn, float(self.frozen_protocol().protocol.judging.audit), self.where)
