"""A simulated campaign written straight into a store (no episodes run): the 20-mark layout,
physics labels for all, two human judges (one of them wrong twice), one aborted attempt, one
safety event. For the report's and the statistics' tests."""

from __future__ import annotations

import random
from pathlib import Path

from orchestrator.design.protocol import load_protocol
from orchestrator.design.schedule import draw_schedule
from orchestrator.store.sqlite import CampaignStore, EpisodeRecord, new_episode_id
from support.repo import REPO


def make_store_campaign(tmp_path: Path, judged: bool = True, protocol: Path | None = None,
                        success=None, upto: int | None = None) -> Path:
    """A simulated campaign on the 20-mark layout: physics labels for all, two human judges
    (one of them wrong twice), one aborted attempt, one safety event."""
    loaded = load_protocol(protocol or REPO / "protocols" / "sim_demo.yaml")
    schedule = draw_schedule(loaded.protocol, loaded.layout)
    directory = tmp_path / "camp"
    store = CampaignStore.create(
        directory, name="camp", protocol_path=str(loaded.path), protocol_text=loaded.text,
        protocol_sha256=loaded.sha256, layout_text=loaded.layout_text, layout_sha256=loaded.layout_sha256,
        rig_path="hardware/sim.yaml", rig_text="robot: {type: sim_so101}\n", simulated=True, schedule=schedule)
    rng = random.Random(7)
    try:
        for i, t in enumerate(schedule):
            if upto is not None and i >= upto:
                break
            if i == 3:
                att = store.begin_attempt(t.slot, new_episode_id())
                store.abort_attempt(att, "emergency stop")
            ep = new_episode_id()
            att = store.begin_attempt(t.slot, ep)
            ok = rng.random() < (0.9 if t.policy == "A" else 0.5)
            if success is not None:
                ok = success(t)
            store.finish_attempt(att, EpisodeRecord(
                episode_id=ep, frames=360, duration_s=12.0, cameras=["front"], files={},
                physics_success=ok, max_lift_m=0.05 if ok else 0.0, time_to_success_s=4.0 + i % 5 if ok else None,
                safety_events=("joint_limit",) if i == 5 else ()))
            if judged:
                store.add_judgment(ep, "ann", "success" if ok else "failure", None if ok else "missed")
                wrong = i in (2, 9)
                lab = ("failure" if ok else "success") if wrong else ("success" if ok else "failure")
                store.add_judgment(ep, "bob", "unsure" if i == 11 else lab)
    finally:
        store.close()
    return directory
