"""The `auto` rater's CPU per episode, and its labels now against the ones stored when the
campaign ran.

Rates every episode of each campaign with `rater.rate_file` (the joints and the front camera, as
the runner does on the commit path), timed by the process's CPU clock, and compares each label
and reason line with the campaign's stored `auto` label (written by the code that recorded it):
a change to the rater's speed must leave them as they were. With `--wrist` the episodes are rated
as the runner rates a simulated campaign's (`simulated`: the wrist video is read for the episodes
the front camera and the joints leave unsure).

    uv run python bench/rater_cpu.py [--wrist] CAMPAIGN [CAMPAIGN ...]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def campaign_cpu(campaign: Path, wrist: bool = False) -> None:
    """Print the differing labels, then one line: CPU per episode, labels against physics."""
    from orchestrator.judging.auto.labels import campaign_test, verdict_label
    from orchestrator.judging.auto.rater import rate_file
    from orchestrator.store.episode_files import EpisodeFiles
    from orchestrator.store.sqlite import AUTO_JUDGE, CampaignStore

    with CampaignStore.open_readonly(campaign) as store:
        cube, height, hold = campaign_test(store)
        stored = store.latest_labels(AUTO_JUDGE)
        episodes = sorted((e["id"], e["physics_success"], EpisodeFiles.from_dict(e["files"]).timeseries or "")
                          for e in store.episodes())
    if missing := [episode_id for episode_id, _, series in episodes if not series]:
        raise SystemExit(f"{campaign}: episodes {missing} list no time series")
    cpu, same_label, same_reason, tally = [], 0, 0, {"unsure": 0, "right": 0, "wrong": 0}
    for episode_id, physics, series in episodes:
        started = time.process_time()
        label, reason = verdict_label(rate_file(campaign / series, cube, height, hold, simulated=wrist))
        cpu.append(time.process_time() - started)
        tally["unsure" if label == "unsure" else ("right" if (label == "success") == bool(physics) else "wrong")] += 1
        old = stored.get(episode_id)
        same_label += old is not None and old.label == label
        same_reason += old is not None and old.note == reason
        if old is not None and old.label != label:
            print(f"{episode_id}: stored {old.label} ({old.note}); now {label} ({reason})", flush=True)
    cpu.sort()
    print(f"{campaign.name}: {len(episodes)} episodes; rate_file CPU mean {sum(cpu) / len(cpu):.2f} s, "
          f"max {cpu[-1]:.2f} s per episode; {same_label} labels and {same_reason} reason lines as stored; "
          f"against physics: {tally['unsure']} unsure, {tally['right']} right, {tally['wrong']} wrong", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("campaign", type=Path, nargs="+")
    parser.add_argument("--wrist", action="store_true", help="read the wrist video as on a simulated campaign")
    args = parser.parse_args()
    for campaign in args.campaign:
        campaign_cpu(campaign, args.wrist)


if __name__ == "__main__":
    main()
