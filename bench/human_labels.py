"""People's labels per episode when the `auto` rater counts and a random audit checks it.

Runs a protocol with `judging: {auto: counted, audit: 0.2}` (the demo's, protocols/sim_demo.yaml,
and the near-threshold one, protocols/sim_near.yaml, with only their `judging` block changed) for
real through `orchestrator run` on the simulated rig, then reads the store: the judges' queue
(`store.blind_view.blind_episode_rows`, what `orchestrator judge` offers: every episode `auto` is
unsure of or could not rate, plus the audited trials) against the episodes recorded. With one
judge per episode (`judges: 1`) the queue's length per episode is the people's labels per
episode (the goal: at most 0.25; 1.0 without the rater). Printed per campaign: the queue, how
many of it are unsure and how many audited (and both), and the rater's labels against physics on
the episodes it labelled (wrong labels and Cohen's kappa).

    uv run python bench/human_labels.py [--rig hardware/sim.yaml] [--workers 2] [--keep DIR] [--audit 0.2]
    uv run python bench/human_labels.py --campaign DIR [DIR ...]      # count existing campaigns
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PROTOCOLS = ("sim_demo.yaml", "sim_near.yaml")


def audited_protocol(name: str, audit: float, folder: Path) -> Path:
    """The shipped protocol `name` with `judging.auto: counted` and `judging.audit: audit`."""
    spec = yaml.safe_load((ROOT / "protocols" / name).read_text())
    spec["layout"] = str((ROOT / "protocols" / spec["layout"]).resolve())
    spec["judging"] = {**spec.get("judging", {}), "auto": "counted", "audit": audit}
    out = folder / f"{Path(name).stem}_audit.yaml"
    out.write_text(yaml.safe_dump(spec, sort_keys=False))
    return out


def count(campaign: Path) -> dict:
    """The queue and its parts (module docstring), read from the store."""
    from orchestrator.analysis.stats.agreement import cohen_kappa
    from orchestrator.store.blind_view import blind_episode_rows
    from orchestrator.store.records import AUTO_JUDGE
    from orchestrator.store.sqlite import CampaignStore

    with CampaignStore.open_readonly(campaign) as store:
        queue = {row[0] for row in blind_episode_rows(store)}
        episodes = store.episodes()
        auto = {e: j.label for e, j in store.latest_labels(AUTO_JUDGE).items()}
        sample = store.audit_sample()
        audited_slots = set(sample.trial_ids) if sample is not None else set()
    audited = {e["id"] for e in episodes if str(e["slot"]) in audited_slots}
    unsure = {e["id"] for e in episodes if auto.get(e["id"], "unsure") == "unsure"}
    pairs = [(auto[e["id"]], "success" if e["physics_success"] else "failure") for e in episodes
             if auto.get(e["id"], "unsure") != "unsure" and e["physics_success"] is not None]
    classes = {a for a, _ in pairs} | {b for _, b in pairs}
    return {"episodes": len(episodes), "queue": len(queue), "unsure": len(unsure), "audited": len(audited),
            "both": len(unsure & audited), "queue_is_union": queue == {e["id"] for e in episodes} & (unsure | audited),
            "rated": len(pairs), "wrong": sum(a != b for a, b in pairs),
            "kappa": cohen_kappa(*zip(*pairs, strict=True)) if len(classes) > 1 else None}


def show(campaign: Path) -> None:
    c = count(campaign)
    kappa = "undefined (one class)" if c["kappa"] is None else f"{c['kappa']:.3f}"
    print(f"{campaign.name}: people label {c['queue']} of {c['episodes']} episodes "
          f"({c['queue'] / max(c['episodes'], 1):.3f} per episode): {c['unsure']} unsure, {c['audited']} audited, "
          f"{c['both']} both; the queue is exactly unsure | audited: {c['queue_is_union']}", flush=True)
    print(f"{campaign.name}: auto labelled {c['rated']} episodes: {c['wrong']} wrong against physics, kappa {kappa}",
          flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rig", default="hardware/sim.yaml")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--audit", type=float, default=0.2)
    parser.add_argument("--keep", type=Path, help="write the campaigns here (default: a temporary folder)")
    parser.add_argument("--campaign", type=Path, nargs="*", help="count existing campaigns instead")
    args = parser.parse_args()
    if args.campaign:
        for campaign in args.campaign:
            show(campaign)
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        for name in PROTOCOLS:
            protocol, out = audited_protocol(name, args.audit, root), root / Path(name).stem
            started = time.perf_counter()
            subprocess.run([sys.executable, "-m", "orchestrator", "run", str(protocol), "--rig", args.rig, "--out",
                            str(out), "--workers", str(args.workers)], cwd=ROOT, check=True, capture_output=True)
            print(f"{name}: ran in {time.perf_counter() - started:.0f} s", flush=True)
            show(out)


if __name__ == "__main__":
    main()
