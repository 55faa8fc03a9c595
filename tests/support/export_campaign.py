"""A tiny recorded campaign for the export tests, written the way the runner writes one.

`make_campaign` copies the first marks of `layouts/grid20.yaml` into a temporary layout,
freezes a small protocol (2 scripted policies, fps 10, 1 s episodes) into a new campaign
store, and "runs" every trial through the real `EpisodeRecorder` (H.264 videos + the
`timeseries.npz`) with synthetic camera images and joint values, committing each episode
with `finish_attempt`. One trial gets an aborted attempt first (discarded, then re-run), as
an e-stop would leave it.

The synthetic data is chosen so the export can be checked exactly:
- joint values: `state[step, j] = 10 * slot + j + step / 100`, `action = state + 0.5`;
- every camera image is a flat grey whose level encodes the control step it was taken at:
  `level(step) = 20 + 20 * step` (steps 0..9 -> 20..200), so a decoded frame tells which step
  it came from even after two lossy encodes. `front` runs at the control fps (10),
  `wrist` at 5 fps, so every second control step must hold the previous wrist frame;
- physics: policy A succeeds on every mark, B only on the first mark of the layout.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import yaml

from orchestrator.design.protocol import load_protocol
from orchestrator.design.schedule import draw_schedule
from orchestrator.rigs.profile import STATE_KEYS, parse_rig_text
from orchestrator.run.recording import EpisodeRecorder
from orchestrator.store.sqlite import CampaignStore, EpisodeRecord, new_episode_id

REPO = Path(__file__).resolve().parents[2]
FPS = 10
DURATION_S = 1.0
STEPS = round(FPS * DURATION_S)
SIZE = (64, 48)  # width, height

PROTOCOL = """\
name: export-test
task: "Pick up the cube and hold it above the table"
layout: layout.yaml
policies:
  A: {{type: scripted, aim_noise_mm: 3}}
  B: {{type: scripted, aim_noise_mm: 12}}
trials_per_layout: 1
order: balanced
seed: 20261129
episode: {{fps: {fps}, duration_s: {duration}}}
success: {{kind: lift_and_hold, min_height_m: 0.04, hold_s: 1.0}}
judging: {{judges: {judges}, failure_modes: [missed, pushed, dropped, collision, other]}}
analysis: {{primary: mcnemar_midp, alpha: 0.05, stopping: none}}
"""

SIM_RIG = """\
robot: {{type: sim_so101}}
cameras:
  front: {{type: sim, width: {w}, height: {h}, fps: 10}}
  wrist: {{type: sim, width: {w}, height: {h}, fps: {wrist_fps}}}
"""

REAL_RIG = """\
robot: {{type: so101_follower, port: /dev/ttyACM0, id: lab_arm}}
cameras:
  front: {{type: opencv, index_or_path: 0, width: {w}, height: {h}, fps: 10}}
  wrist: {{type: opencv, index_or_path: 2, width: {w}, height: {h}, fps: 5}}
"""


def level(step: int) -> int:
    """Grey level of every image taken at control step `step`."""
    return 20 + 20 * step


def state_value(slot: int, step: int) -> np.ndarray:
    return np.array([10.0 * slot + j + step / 100 for j in range(len(STATE_KEYS))])


def make_campaign(root: Path, *, marks: int = 3, simulated: bool = True, judges: int = 1,
                  run: int | None = None, abort_slot: int | None = 1, scored_slot: int | None = None,
                  finished: bool = True, wrist_fps: int = 5,
                  name: str = "campaign") -> Path:
    """Create `root/<name>/` with a recorded campaign; the first `run` trials (default all) done.
    `wrist_fps` 10 records both cameras at the control rate (a campaign the export can join by
    stream copy; at 5 every second dataset row holds the wrist's previous frame)."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    grid = yaml.safe_load((REPO / "layouts" / "grid20.yaml").read_text())
    layout = {k: grid[k] for k in ("name", "table", "cube")}
    layout["marks"] = grid["marks"][:marks]
    (root / "layout.yaml").write_text(yaml.safe_dump(layout, sort_keys=False))
    (root / "protocol.yaml").write_text(PROTOCOL.format(fps=FPS, duration=DURATION_S, judges=judges))
    loaded = load_protocol(root / "protocol.yaml")
    rig_text = (SIM_RIG if simulated else REAL_RIG).format(w=SIZE[0], h=SIZE[1], wrist_fps=wrist_fps)
    cameras = parse_rig_text(rig_text).cameras
    schedule = draw_schedule(loaded.protocol, loaded.layout)
    first_mark = loaded.layout.marks[0].id
    directory = root / name
    store = CampaignStore.create(
        directory, name=loaded.protocol.name, protocol_path=str(loaded.path),
        protocol_text=loaded.text, protocol_sha256=loaded.sha256, layout_text=loaded.layout_text,
        layout_sha256=loaded.layout_sha256, rig_path="rig.yaml", rig_text=rig_text,
        simulated=simulated, schedule=schedule)
    try:
        todo = schedule[: len(schedule) if run is None else run]
        for trial in todo:
            if trial.slot == abort_slot:  # an e-stopped attempt: discarded, re-run
                episode_id = new_episode_id()
                attempt = store.begin_attempt(trial.slot, episode_id)
                recorder = EpisodeRecorder(directory, episode_id, cameras, FPS, STEPS)
                _record(recorder, trial.slot, steps=3)
                recorder.discard()
                store.abort_attempt(attempt, "emergency stop (test)")
            if trial.slot == scored_slot:  # the policy raised: the aborts rule scores its failure
                attempt = store.begin_attempt(trial.slot, new_episode_id())
                store.abort_attempt(attempt, "policy: RuntimeError: boom (test)", "policy", "failure")
                continue
            episode_id = new_episode_id()
            attempt = store.begin_attempt(trial.slot, episode_id)
            recorder = EpisodeRecorder(directory, episode_id, cameras, FPS, STEPS)
            _record(recorder, trial.slot, steps=STEPS)
            recorded = recorder.finish()
            success = trial.policy == "A" or trial.mark_id == first_mark
            store.finish_attempt(attempt, EpisodeRecord(
                episode_id=episode_id, frames=STEPS, duration_s=DURATION_S, cameras=list(cameras),
                files=recorded.files, digests=recorded.digests,
                physics_success=success if simulated else None,
                max_lift_m=0.06 if success else 0.0,
                time_to_success_s=0.5 if success else None,
                safety_events=("joint_limit",) if trial.slot == 0 else (),
                timing={"period_p50_ms": 100.0, "period_p99_ms": 101.5, "overruns": 0,
                        "policy_p50_ms": 1.0 + trial.slot, "steps": STEPS,
                        "video_frames": recorded.video_frames}))
        if finished and (run is None or run >= len(schedule)):
            store.mark_finished("complete")
    finally:
        store.close()
    return directory


def _record(recorder: EpisodeRecorder, slot: int, steps: int) -> None:
    width, height = SIZE
    for step in range(steps):
        values = state_value(slot, step)
        observation: dict = {key: float(v) for key, v in zip(STATE_KEYS, values, strict=True)}
        if recorder.wants_images(step):
            image = np.full((height, width, 3), level(step), dtype=np.uint8)
            observation["front"] = image
            observation["wrist"] = image
        action = {key: float(v) + 0.5 for key, v in zip(STATE_KEYS, values, strict=True)}
        recorder.frame(step, step / FPS, observation, action)


def label_all(directory: Path, judge: str, rule=None, failure_mode: str = "missed") -> None:
    """Give every episode a label from `judge`; `rule(trial) -> label` (default: = physics)."""
    store = CampaignStore.open_for_labels(directory)
    try:
        first_mark = _first_mark(store)
        for trial in store.trials():
            if trial.episode_id is None:
                continue
            if rule is None:
                label = "success" if (trial.policy == "A" or trial.mark_id == first_mark) else "failure"
            else:
                label = rule(trial)
            store.add_judgment(trial.episode_id, judge, label,
                               failure_mode=failure_mode if label == "failure" else None)
    finally:
        store.close()


def _first_mark(store: CampaignStore) -> str:
    layout = yaml.safe_load(store.campaign()["layout_text"])
    return layout["marks"][0]["id"]


def tree_digest(directory: Path) -> str:
    """SHA-256 over every file path and content under `directory` (to prove nothing changed)."""
    digest = hashlib.sha256()
    for path in sorted(Path(directory).rglob("*")):
        if path.is_file():
            digest.update(str(path.relative_to(directory)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()
