"""A dataset's evidence: `meta/ab_evidence.json`, the campaign's evidence chain (store/chain.py)
as the export read it, and its check (`orchestrator verify DATASET_DIR`).

The file holds every entry of the chain (seq, table, key, row digest, time, digest) and the
chained rows the dataset's outcomes come from: the campaign record (with the frozen protocol),
the trials, the attempts, the episodes and the labels, each as stored, except the campaign's
local file paths and the judges' notes, carried as their digests (`REDACTED`), which still
check. Events and run sessions are in the chain as digests only. A dataset is verified on its own, without the campaign:

1. every entry's digest follows from the one before, and the last is the head the file, the
   evaluation summary and the card name;
2. every carried row has the digest its latest entry records, and no live row is left out;
3. the carried rows, read by the report's own code (`outcomes_from_store` on a store rebuilt in
   memory), give exactly the rows of `meta/ab_trials.parquet`: which trials, their policy and
   place, the outcome and failure mode under the exported label source, and every judge's label
   (with its stage of the progress ladder).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from orchestrator.core.errors import BadInput
from orchestrator.store import chain
from orchestrator.store.replica import replica_store
from orchestrator.store.sqlite import SETTLES_EXCLUDED, SETTLES_FAILURE, CampaignStore

EVIDENCE_FILE = "meta/ab_evidence.json"
EVIDENCE_SCHEMA = "orchestrator.evidence/1"
CARRIED = ("campaign", "trials", "attempts", "episodes", "judgments")
# Left out of the published rows, as their digests (chain.redacted): where the campaign's files
# sat on this machine, and the judges' free-text notes.
REDACTED = {"campaign": ("protocol_path", "rig_path"), "judgments": ("note",)}
SETTLED = {SETTLES_FAILURE: "scored_failure", SETTLES_EXCLUDED: "excluded"}


def evidence_document(store: CampaignStore) -> dict[str, Any]:
    """`meta/ab_evidence.json` of a store whose chain the opener verified (`store.evidence`)."""
    return {"schema": EVIDENCE_SCHEMA, "chain": store.chain_status().to_dict(),
            "entries": [list(e) for e in store.chain_entries()],
            "rows": {table: [_published(table, row) for row in store.chained_rows(table)]
                     for table in CARRIED}}


def _published(table: str, row: dict[str, Any]) -> dict[str, Any]:
    return {k: chain.redacted(v) if k in REDACTED.get(table, ()) else v for k, v in row.items()}


def evidence_summary(document: dict[str, Any]) -> dict[str, Any]:
    """What `meta/ab_evaluation.json` and the card say of the chain."""
    c = document["chain"]
    return {"head": c["head"], "entries": c["entries"], "origin": c["origin"], "origin_at": c["origin_at"],
            "file": EVIDENCE_FILE}


# ------------------------------------------------------------------ verifying a dataset

def _load(root: Path, name: str) -> Any:
    path = root / name
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BadInput(f"{path}: missing; {root} is not a dataset exported with its evidence") from None
    except (OSError, ValueError) as exc:
        raise BadInput(f"{path}: unreadable ({exc})") from None


def _check_chain(root: Path, document: dict[str, Any]) -> chain.ChainStatus:
    where = root / EVIDENCE_FILE
    if document.get("schema") != EVIDENCE_SCHEMA:
        raise BadInput(f"{where}: schema {document.get('schema')!r}, expected {EVIDENCE_SCHEMA}")
    entries = [tuple(e) for e in document.get("entries") or []]
    broken = chain.walk(entries)
    if broken is not None or not entries:
        raise BadInput(f"{where}: the evidence chain breaks at chain seq {broken or 1} (its digest does not "
                       "follow from the entry before)")
    head = entries[-1][5]
    summary = _load(root, "meta/ab_evaluation.json").get("evidence") or {}
    card = (root / "README.md").read_text(encoding="utf-8") if (root / "README.md").is_file() else ""
    for what, stated in ((EVIDENCE_FILE, (document.get("chain") or {}).get("head")),
                         ("meta/ab_evaluation.json", summary.get("head")), ("README.md", head if head in card else None)):
        if stated != head:
            raise BadInput(f"{root / what}: does not name the chain head {head} that {EVIDENCE_FILE}'s entries give")
    rows = document.get("rows") or {}
    digests = {t: [(str(r[chain.CHAINED[t]]), chain.row_sha256(r)) for r in rows.get(t) or []] for t in CARRIED}
    unverified = chain.compare(entries, digests, tables=CARRIED)
    if unverified:
        raise BadInput(f"{where}: {unverified[0]} does not match its chained digest"
                       + (f" ({len(unverified) - 1} more)" if len(unverified) > 1 else ""))
    return chain.status_of(entries, ())


def _plain(value: Any) -> Any:
    """A parquet cell as a Python value (None for a missing one)."""
    if value is None:
        return None
    try:
        import pandas as pd

        if pd.isna(value):
            return None
    except (TypeError, ValueError):
        pass
    if hasattr(value, "item"):
        value = value.item()
    return None if isinstance(value, float) and math.isnan(value) else value


def _expected(store: CampaignStore, judge: str | None) -> tuple[dict[int, dict[str, Any]], set[str]]:
    """Per trial slot, the values `meta/ab_trials.parquet` must hold, and the judges' names."""
    from orchestrator.analysis.outcomes import outcomes_from_store

    data = outcomes_from_store(store, judge)
    trials = {t.slot: t for t in store.trials()}
    judges = store.judges()
    latest = {j: store.latest_labels(j) for j in judges}
    episodes = {e["id"]: e for e in store.episodes()}
    out: dict[int, dict[str, Any]] = {}
    for o in data.outcomes:
        assert o.slot is not None   # a store's outcomes carry their slot (a CSV's may not)
        t = trials[o.slot]
        row = {"policy": t.policy, "mark_id": t.mark_id, "repeat": t.repeat, "position": t.position,
               "unit": t.unit, "seed": t.seed, "attempts": t.attempts, "success": o.success,
               "failure_mode": o.failure_mode}
        if o.state == "done" and o.episode_id is not None and o.episode_id in episodes:
            physics = episodes[o.episode_id].get("physics_success")
            row.update({"status": "done", "episode_id": o.episode_id,
                        "physics_success": None if physics is None else bool(physics)})
            for j in judges:
                lab = latest[j].get(o.episode_id)
                row[f"label.{j}"] = lab.label if lab else None
                row[f"failure_mode.{j}"] = lab.failure_mode if lab else None
                row[f"stage.{j}"] = lab.stage if lab else None
        elif o.settled in SETTLED:
            row["status"] = SETTLED[o.settled]
        else:
            continue
        out[o.slot] = row
    return out, set(judges)


def verify_dataset(root: Path) -> str:
    """Check the dataset at `root` (see the module docstring); one line of what was verified,
    or BadInput naming the first thing that does not match."""
    import pandas as pd

    root = Path(root)
    document = _load(root, EVIDENCE_FILE)
    status = _check_chain(root, document)
    summary = _load(root, "meta/ab_evaluation.json")
    store = replica_store(root, {t: document["rows"][t] for t in CARRIED})
    try:
        expected, judges = _expected(store, (summary.get("labels") or {}).get("judge"))
    finally:
        store.close()
    table = root / "meta/ab_trials.parquet"
    try:
        # One thread: pyarrow's reader pool can abort the process at exit ("terminate called
        # without an active exception", apache/arrow#34314), seen once as `verify` exiting -6.
        frame = pd.read_parquet(table, use_threads=False)
    except (OSError, ValueError) as exc:
        raise BadInput(f"{table}: unreadable ({exc})") from None
    checked = 0
    seen: set[int] = set()
    for index, cells in enumerate(frame.to_dict("records")):
        status_cell = _plain(cells.get("status"))
        if status_cell == "aborted":
            continue   # an aborted attempt's row (--include-aborted): no outcome
        slot = _plain(cells.get("slot"))
        want = expected.get(slot) if slot is not None else None
        if want is None or slot in seen:
            raise BadInput(f"{table}: row {index} (slot {slot}) is not a trial with an outcome in the chained rows")
        seen.add(slot)
        columns = [c for c in cells if c in want or c.startswith(("label.", "failure_mode.", "stage."))]
        for column in columns:
            if _plain(cells[column]) != want.get(column):
                raise BadInput(f"{table}: row {index} (trial slot {slot}): {column} is {_plain(cells[column])!r}, "
                               f"the chained rows give {want.get(column)!r}")
            checked += 1
        missing = [f"label.{j}" for j in judges if want.get("status") == "done" and f"label.{j}" not in cells]
        if missing:
            raise BadInput(f"{table}: row {index} (trial slot {slot}) has no column {missing[0]}")
    left_out = sorted(set(expected) - seen)
    if left_out:
        raise BadInput(f"{table}: trial slot {left_out[0]} has an outcome in the chained rows and no row here")
    return (f"{root}: dataset verified: {len(seen)} trial rows ({checked} cells) match the chained rows; "
            f"chain head {status.head}, {status.entries} entries, {status.origin_text()}")
