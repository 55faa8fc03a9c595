"""Small recorded campaigns for the judge, blinding and bundle tests (before the runner exists).

`make_campaign` writes a protocol whose policies have distinctive names and checkpoint paths
(`SECRET_TERMS`), creates the campaign store from it, and "runs" every trial by committing an
episode with small real H.264 MP4 files (synthetic frames, written with PyAV) at
`videos/<episode id>/<camera>.mp4`, the layout the recorder uses.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import av
import numpy as np

from orchestrator.design.protocol import load_protocol
from orchestrator.design.schedule import draw_schedule
from orchestrator.store.sqlite import CampaignStore, EpisodeRecord, new_episode_id

# Strings that must never reach a judge: policy labels, checkpoint paths, revisions, names.
SECRET_TERMS = ("SECRETPOLICYALPHA", "SECRETPOLICYBRAVO", "SECRETPATHALPHA", "SECRETPATHBRAVO",
                "SECRETREVISION", "SECRETPROTOCOLNAME", "SECRETCAMPAIGN")

LAYOUT = """\
name: tiny
table: {x_min: -0.05, x_max: 0.40, y_min: -0.25, y_max: 0.25}
cube: {size_m: 0.03, mass_kg: 0.03}
marks:
"""

PROTOCOL = """\
name: SECRETPROTOCOLNAME-ab
task: "Pick up the cube and hold it above the table"
layout: layout.yaml
policies:
  SECRETPOLICYALPHA: {{type: lerobot, path: secretlab/act_SECRETPATHALPHA, revision: SECRETREVISION}}
  SECRETPOLICYBRAVO: {{type: lerobot, path: secretlab/diffusion_SECRETPATHBRAVO}}
trials_per_layout: 1
order: balanced
seed: {seed}
episode: {{fps: {fps}, duration_s: {seconds}}}
success: {{kind: lift_and_hold, min_height_m: 0.04, hold_s: 1.0}}
judging: {{judges: 2, failure_modes: [missed, pushed, dropped, collision, other]}}
analysis: {{primary: mcnemar_midp, alpha: 0.05, stopping: none}}
"""


def write_video(path: Path, *, frames: int, fps: int, size: tuple[int, int], seed: int) -> None:
    """A small H.264 MP4 with a moving block (so frames differ and the player can be checked)."""
    width, height = size
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    base = rng.integers(30, 200, size=3, dtype=np.uint8)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = {"preset": "ultrafast", "g": str(fps)}
        for index in range(frames):
            image = np.empty((height, width, 3), dtype=np.uint8)
            image[:] = base
            x = int((width - 8) * index / max(frames - 1, 1))
            image[height // 3: height // 3 + 8, x: x + 8] = (250, 250, 250)
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def make_campaign(root: Path, *, marks: int = 4, cameras: tuple[str, ...] = ("front", "wrist"),
                  fps: int = 15, seconds: float = 2.0, size: tuple[int, int] = (64, 48),
                  seed: int = 20261129, run: int | None = None, name: str = "SECRETCAMPAIGN") -> Path:
    """Create `root/<name>/` with a campaign whose first `run` trials (default all) are done."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    marks_yaml = "".join(
        f"  - {{id: M{i + 1:02d}, x: {0.16 + 0.03 * (i // 4):.3f}, y: {-0.075 + 0.05 * (i % 4):.3f},"
        f" stratum: {'edge' if i % 2 else 'centre'}}}\n" for i in range(marks))
    (root / "layout.yaml").write_text(LAYOUT + marks_yaml)
    (root / "protocol.yaml").write_text(PROTOCOL.format(seed=seed, fps=fps, seconds=seconds))
    loaded = load_protocol(root / "protocol.yaml")
    schedule = draw_schedule(loaded.protocol, loaded.layout)
    directory = root / name
    store = CampaignStore.create(
        directory, name=name, protocol_path=str(loaded.path), protocol_text=loaded.text,
        protocol_sha256=loaded.sha256, layout_text=loaded.layout_text,
        layout_sha256=loaded.layout_sha256, rig_path="hardware/sim.yaml",
        rig_text="robot: {type: sim_so101}\n", simulated=True, schedule=schedule)
    frames = round(fps * seconds)
    try:
        for trial in schedule[: len(schedule) if run is None else run]:
            episode_id = new_episode_id()
            attempt = store.begin_attempt(trial.slot, episode_id)
            files = {}
            for camera in cameras:
                relative = f"videos/{episode_id}/{camera}.mp4"
                vseed = int(hashlib.sha256(f"{episode_id}{camera}".encode()).hexdigest()[:8], 16)
                write_video(directory / relative, frames=frames, fps=fps, size=size, seed=vseed)
                files[camera] = relative
            store.finish_attempt(attempt, EpisodeRecord(
                episode_id=episode_id, frames=frames, duration_s=float(seconds),
                cameras=list(cameras), files=files,
                physics_success=bool(vseed % 2), max_lift_m=0.05))
    finally:
        store.close()
    return directory


def policy_of(directory: Path) -> dict[str, str]:
    """The key (episode id -> policy label), read the way only `report` may read it."""
    store = CampaignStore.open_readonly(directory)
    try:
        return {t.episode_id: t.policy for t in store.trials() if t.episode_id}
    finally:
        store.close()



def campaign_rows(directory: Path, sql: str, args: tuple = ()) -> list[tuple]:
    """The rows of `sql` on the campaign's store, read by another connection than the judge's."""
    conn = sqlite3.connect(directory / "campaign.db")
    try:
        return [tuple(r) for r in conn.execute(sql, args)]
    finally:
        conn.close()


def live_judgments(directory: Path, judge: str | None = None,
                   columns: str = "episode_id, label, failure_mode, note") -> list[tuple]:
    """The live (not retracted) labels of `judge` (None: of every judge but `physics`) in the
    order they were made, read straight from campaign.db: what a judge's session made durable."""
    who, args = ("judge = ?", (judge,)) if judge is not None else ("judge != 'physics'", ())
    return campaign_rows(directory, f"SELECT {columns} FROM judgments WHERE {who} AND retracted_at IS NULL"
                                    " ORDER BY id", args)
