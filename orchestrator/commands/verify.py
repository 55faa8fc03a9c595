"""`orchestrator verify (CAMPAIGN | DATASET_DIR)`: recompute the evidence chain.

For a campaign (its directory, or `--store URL` with its videos' directory): the chain of its
store (store/chain.py), exit 0 with the head, or exit 2 with one line naming the first row that
does not match. For an exported dataset (a folder with `meta/ab_evidence.json`): the chain the
export carried, and that the outcomes and labels of `meta/ab_trials.parquet` are the ones the
chained rows give (export/evidence.py), without the campaign.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from orchestrator.core.errors import BadInput

HELP = "recompute the evidence chain of a campaign, or check an exported dataset against its chain"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="CAMPAIGN|DATASET_DIR",
                        help="a campaign directory, or a dataset exported by `orchestrator export`")


def run(args: argparse.Namespace) -> int:
    from orchestrator.export.evidence import EVIDENCE_FILE, verify_dataset
    from orchestrator.store.postgres import server_url
    from orchestrator.store.sqlite import DB_NAME, CampaignStore

    target = Path(args.target)
    if server_url() is None and not (target / DB_NAME).exists() and (target / "meta").is_dir():
        print(verify_dataset(target))
        return 0
    if server_url() is None and not (target / DB_NAME).exists():
        raise BadInput(f"{target}: neither a campaign ({DB_NAME}) nor an exported dataset ({EVIDENCE_FILE})")
    store = CampaignStore.open_readonly(target)   # refuses a broken chain, naming the first row
    try:
        status = store.evidence
        assert status is not None   # open_readonly verified the chain
        where = store.where
    finally:
        store.close()
    print(f"{where}: evidence chain intact: {status.entries} entries, head {status.head}, {status.origin_text()}")
    return 0
