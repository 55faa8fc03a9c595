"""A small store and the rows a test writes into it: an alternating two-policy schedule of
`n_units` units, the store created on it, an episode record."""

from __future__ import annotations

from pathlib import Path

from orchestrator.design.schedule import Trial
from orchestrator.store.sqlite import CampaignStore, EpisodeRecord


def schedule(n_units: int, labels=("A", "B")) -> list[Trial]:
    out = []
    for unit in range(n_units):
        for position, label in enumerate(labels if unit % 2 == 0 else labels[::-1]):
            out.append(Trial(slot=len(out), unit=unit, mark_id=f"M{unit:03d}", repeat=0,
                                      position=position, policy=label, seed=len(out)))
    return out


def create(directory: Path, n_units: int = 3) -> CampaignStore:
    return CampaignStore.create(
        directory, name="test", protocol_path="p.yaml", protocol_text="name: test\n",
        protocol_sha256="0" * 64, layout_text="marks: []\n", layout_sha256="1" * 64,
        rig_path="rig.yaml", rig_text="robot: {type: sim_so101}\n", simulated=True,
        schedule=schedule(n_units))


def record(episode_id: str, success: bool | None = True) -> EpisodeRecord:
    return EpisodeRecord(episode_id=episode_id, frames=30, duration_s=1.0, cameras=["front"],
                         files={"front": f"videos/{episode_id}/front.mp4"}, physics_success=success)
