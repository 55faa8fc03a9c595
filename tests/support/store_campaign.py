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


def make_audited_campaign(tmp_path: Path, audit: float = 0.2, repeats: int = 2, wrong_every: int = 0) -> Path:
    """A simulated campaign with `judging: {auto: counted, audit: F}` on the 20-mark layout
    (`repeats` per mark): A succeeds on most marks, B on few; the `auto` rater labels every
    episode (unsure on every fifth; given `wrong_every`, wrong on every `wrong_every`-th episode
    and on every `wrong_every`-th audited one it rates, so that the audit, a fresh random sample,
    always sees the rater's errors: counted by position alone, an audit of 16 held at most one of
    them about 4 % of the time), and judge `ann` labels, rightly, the unsure episodes and the
    store's audit sample only."""
    import shutil

    from support.repo import GRID20, sim_protocol_text

    folder = tmp_path / "protocol"
    folder.mkdir()
    shutil.copy(GRID20, folder / "layout.yaml")
    text = sim_protocol_text().replace("trials_per_layout: 1", f"trials_per_layout: {repeats}").replace(
        "judging: {judges: 1,", f"judging: {{judges: 1, auto: counted, audit: {audit},")
    (folder / "p.yaml").write_text(text)
    loaded = load_protocol(folder / "p.yaml")
    assert loaded.protocol.judging.audit == audit and loaded.protocol.trials_per_layout == repeats
    schedule = draw_schedule(loaded.protocol, loaded.layout)
    directory = tmp_path / "camp"
    store = CampaignStore.create(
        directory, name="camp", protocol_path=str(loaded.path), protocol_text=loaded.text,
        protocol_sha256=loaded.sha256, layout_text=loaded.layout_text, layout_sha256=loaded.layout_sha256,
        rig_path="hardware/sim.yaml", rig_text="robot: {type: sim_so101}\n", simulated=True, schedule=schedule,
        audit=audit)
    try:
        sample = store.audit_sample()
        assert sample is not None
        audited_rated = 0
        for i, t in enumerate(schedule):
            ep = new_episode_id()
            att = store.begin_attempt(t.slot, ep)
            mark = int(t.mark_id.lstrip("M"))
            ok = (mark + t.repeat) % 7 != 0 if t.policy == "A" else (mark + t.repeat) % 3 == 0
            store.finish_attempt(att, EpisodeRecord(episode_id=ep, frames=360, duration_s=12.0, cameras=["front"],
                                                    files={}, physics_success=ok, max_lift_m=0.05 if ok else 0.0))
            unsure = i % 5 == 4
            audited = sample.includes(t.slot)
            if wrong_every and audited and not unsure:
                wrong = audited_rated % wrong_every == 0
                audited_rated += 1
            else:
                wrong = wrong_every > 0 and i % wrong_every == 0
            said = ok != wrong
            store.add_judgment(ep, "auto", "unsure" if unsure else ("success" if said else "failure"))
            if unsure or audited:
                store.add_judgment(ep, "ann", "success" if ok else "failure", None if ok else "missed")
    finally:
        store.close()
    return directory
