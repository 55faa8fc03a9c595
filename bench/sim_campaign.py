"""Speed of a simulated campaign: the demo protocol end to end, in worker processes.

Prints the ratio of robot time (sum of episode durations) to wall time, CPU seconds per
episode and the per-step timings stored with the episodes. Target: >= 5x real time
for the 20-layout x 2-policy demo on a 2-core machine.

    uv run python bench/sim_campaign.py [--workers N] [--protocol P] [--rig R]
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from orchestrator.commands.referees import campaign_referees  # noqa: E402
from orchestrator.commands.run import default_workers  # noqa: E402
from orchestrator.run.campaign import open_campaign  # noqa: E402
from orchestrator.run.sequential import run_campaign  # noqa: E402
from orchestrator.store.sqlite import CampaignStore  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--protocol", type=Path, default=ROOT / "protocols" / "sim_demo.yaml")
    parser.add_argument("--rig", type=Path, default=ROOT / "hardware" / "sim.yaml")
    parser.add_argument("--workers", type=int, default=default_workers())
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="sim_campaign_"))
    try:
        opened = open_campaign(args.protocol, args.rig, work / "c")
        started = time.perf_counter()
        try:
            summary = run_campaign(opened, workers=args.workers, say=lambda _: None, referees=campaign_referees())
        finally:
            opened.store.close()
        wall = time.perf_counter() - started
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = children.ru_utime + children.ru_stime
        with CampaignStore.open_readonly(work / "c") as store:
            episodes = store.episodes()
        robot_s = sum(e["duration_s"] for e in episodes)
        observe = statistics.median(e["timing"]["observe_p50_ms"] for e in episodes)
        act = statistics.median(e["timing"]["act_p50_ms"] for e in episodes)
        record = statistics.median(e["timing"]["record_p50_ms"] for e in episodes)
        print(f"episodes:               {summary.done_now} ({args.workers} workers)")
        print(f"robot time / wall time: {robot_s:.0f} s / {wall:.1f} s = {robot_s / wall:.2f}x real time")
        print(f"worker CPU per episode: {cpu / max(summary.done_now, 1):.2f} s")
        print(f"per step (median of episode p50s): observe {observe:.2f} ms, act {act:.2f} ms, "
              f"record {record:.2f} ms")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
