"""For test set-ups that write a campaign store by hand (sqlite3) and then want the tool to read
it as if the tool had written it: `accept_edits` chains every row whose content is not the one
its evidence chain records (store/chain.py), as the store's own writes would have. A test of the
chain itself never calls it: its point is that such an edit is refused."""

from __future__ import annotations

from pathlib import Path


def accept_edits(directory: Path) -> int:
    """Chain the hand-made changes of the SQLite store in `directory`; how many rows changed."""
    from orchestrator.store import chain
    from orchestrator.store.sqlite import CampaignStore

    with CampaignStore.open_for_run(Path(directory)) as store:
        before = len(chain.entries_of(store.conn))
        with store.transaction() as c:
            chained = {(tbl, key) for _, tbl, key, *_ in chain.entries_of(c) if tbl in chain.CHAINED}
            for table, column in chain.CHAINED.items():
                keys = {str(r[column]) for r in chain.rows_of(c, table)} | {k for t, k in chained if t == table}
                for key in sorted(keys):
                    chain.append(c, table, key)
        return len(chain.entries_of(store.conn)) - before
