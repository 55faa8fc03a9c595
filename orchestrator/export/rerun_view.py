"""A Rerun recording of a campaign's episodes (`orchestrator view`), the way LeRobot's
`lerobot-dataset-viz` shows a dataset: every episode's cameras beside its joints on one timeline.

One recording, one entity tree per episode, `trial_<NN>_<policy>/` (viewing unblinds: the policy
is named), on the timeline `time` (seconds since the episode started, the recorded step and
frame times):

- `cameras/<camera>`: the recorded MP4 as a Rerun video asset with one frame reference per
  frame, at the frame's recorded time, when Rerun can play it (H.264 without B-frames, what the
  recorder writes: `remux.probe`); else the frames as JPEG images;
- `joints/<joint>/state`, `.../action` (the policy's), `.../sent` (what the arm was sent, after
  `max_relative_target` clipping) and `.../clipped` (the sent value, only at the steps where it
  differs from the action);
- `telemetry/<name>/<camera>`: the rig's per-step camera telemetry in the time series (frame
  age in ms, 1 when a frame repeated the previous step's); `telemetry/timing`: the episode's
  recorded loop and servo-read timing (periods, overruns, steps lost, policy latency); the servo
  alarms the rig reported are among the `events`;
- `success/cube_bottom_m` against `success/min_height_m`, `success/hold_s` against
  `success/hold_needed_s`: the `auto` rater's reading of the joints (`rater.trace`: the cube's
  height where the gripper is closed on it, the hold timer); the rig's own physics result is in
  `labels`;
- `labels`: a text document: the `auto` rater's label and its reason (its error band: `unsure`
  when the band straddles the test), physics, every judge's current label, the measured lift;
- `events`: the campaign's events of this trial and the episode's safety events, on the
  timeline `wall_time` (the events' own clock).

The layout (`layout`, sent as the recording's blueprint): one tab per mark; in it the mark's
episodes side by side in trial order (A beside B), each a column of its cameras, one plot per
joint holding its state, action, sent and clipped series together, the success test's traces
and the labels.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from orchestrator.core.errors import BadInput
from orchestrator.design.schedule import Trial
from orchestrator.export.remux import probe
from orchestrator.judging.auto import rater
from orchestrator.rigs.profile import STATE_KEYS
from orchestrator.run.recording import video_rate
from orchestrator.store.episode_files import EpisodeFiles, read_series
from orchestrator.store.sqlite import AUTO_JUDGE, CampaignStore

TIMELINE = "time"


@dataclass
class EpisodeView:
    """What is logged of one episode (read from the store before Rerun is touched)."""

    trial: Trial
    record: dict[str, Any]
    files: EpisodeFiles
    labels: dict[str, Any]             # judge -> Judgment
    events: list[dict[str, Any]]

    @property
    def prefix(self) -> str:
        policy = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in self.trial.policy)
        return f"trial_{self.trial.slot + 1:02d}_{policy}"


def select_episodes(store: CampaignStore, trial: int | None, mark: str | None) -> list[EpisodeView]:
    """The done trials asked for (`trial`: its number, 1-based as in the report; `mark`: every
    trial on that mark; neither: all), in run order; BadInput when none matches."""
    records = {e["id"]: e for e in store.episodes()}
    done = [t for t in store.trials() if t.state == "done" and t.episode_id in records]
    chosen = [t for t in done if (trial is None or t.slot + 1 == trial) and (mark is None or t.mark_id == mark)]
    if not chosen:
        what = (f"trial {trial}" if trial is not None else "") + (f" on mark {mark}" if mark else "")
        raise BadInput(f"{store.directory}: no recorded episode for {what.strip() or 'this campaign'} "
                       f"({len(done)} episodes recorded)")
    judges = store.judges()
    latest = {j: store.latest_labels(j) for j in judges}
    events = store.events()
    return [EpisodeView(t, records[t.episode_id], EpisodeFiles.from_dict(records[t.episode_id]["files"]),
                        {j: latest[j][t.episode_id] for j in judges if t.episode_id in latest[j]},
                        [e for e in events if e.get("slot") == t.slot]) for t in chosen]


def layout(rrb: Any, views: list[EpisodeView]) -> Any:
    """The viewer's blueprint for `views` (see the module docstring)."""
    by_mark: dict[str, list[EpisodeView]] = {}
    for view in views:
        by_mark.setdefault(view.trial.mark_id, []).append(view)
    tabs = []
    for mark, group in by_mark.items():
        columns = []
        for view in sorted(group, key=lambda v: v.trial.slot):
            prefix = view.prefix
            cameras = [rrb.Spatial2DView(origin=f"/{prefix}/cameras/{camera}", name=camera)
                       for camera in view.files.videos]
            joints = [rrb.TimeSeriesView(origin=f"/{prefix}/joints/{key.removesuffix('.pos')}",
                                         name=key.removesuffix(".pos")) for key in STATE_KEYS]
            columns.append(rrb.Vertical(
                rrb.Horizontal(*cameras, name="cameras"), rrb.Grid(*joints, name="joints"),
                rrb.TimeSeriesView(origin=f"/{prefix}/success", name="success test"),
                rrb.TextDocumentView(origin=f"/{prefix}/labels", name="labels"),
                name=f"trial {view.trial.slot + 1}: {view.trial.policy}"))
        tabs.append(rrb.Horizontal(*columns, name=f"mark {mark}"))
    return rrb.Blueprint(rrb.Tabs(*tabs), collapse_panels=True)


def _log_video(rr: Any, rec: Any, entity: str, path: Path, frame_t: np.ndarray | None, fps: int) -> str:
    """The camera as a video asset (frame k at its recorded time), else as JPEG frames."""
    segment = probe(path, fps)
    if segment.problem is None:
        asset = rr.AssetVideo(path=str(path))
        rec.log(entity, asset, static=True)
        video_ns = asset.read_frame_timestamps_nanos()
        times = frame_t if frame_t is not None and len(frame_t) == len(video_ns) else video_ns / 1e9
        rec.send_columns(entity, indexes=[rr.TimeColumn(TIMELINE, duration=np.asarray(times, dtype=float))],
                         columns=rr.VideoFrameReference.columns_nanos(video_ns))
        return "video"
    import av
    import cv2

    with av.open(str(path)) as container:
        for k, frame in enumerate(container.decode(video=0)):
            t = frame_t[k] if frame_t is not None and k < len(frame_t) else float(frame.time or k / fps)
            ok, jpeg = cv2.imencode(".jpg", cv2.cvtColor(frame.to_ndarray(format="rgb24"), cv2.COLOR_RGB2BGR))
            rec.set_time(TIMELINE, duration=float(t))
            rec.log(entity, rr.EncodedImage(contents=jpeg.tobytes(), media_type="image/jpeg"))
    rec.reset_time()
    return "frames"


def _scalars(rr: Any, rec: Any, entity: str, t: np.ndarray, values: np.ndarray) -> None:
    keep = np.isfinite(values)
    if keep.any():
        rec.send_columns(entity, indexes=[rr.TimeColumn(TIMELINE, duration=t[keep])],
                         columns=rr.Scalars.columns(scalars=values[keep]))


def _log_series(rr: Any, rec: Any, prefix: str, data: dict[str, np.ndarray], cameras: list[str]) -> None:
    t = np.asarray(data["t"], dtype=float)
    for j, joint in enumerate(STATE_KEYS):
        name = joint.removesuffix(".pos")
        for column in ("state", "action", "sent_action"):
            if column in data:
                _scalars(rr, rec, f"{prefix}/joints/{name}/{column.replace('_action', '')}", t, data[column][:, j])
        if "sent_action" in data:
            clipped = np.abs(data["sent_action"][:, j] - data["action"][:, j]) > 1e-9
            rec.log(f"{prefix}/joints/{name}/clipped", rr.SeriesPoints(markers="cross"), static=True)
            _scalars(rr, rec, f"{prefix}/joints/{name}/clipped", t[clipped], data["sent_action"][clipped, j])
    for name in ("frame_age_ms", "frame_repeat"):
        for camera in cameras:
            if f"{name}.{camera}" in data:
                _scalars(rr, rec, f"{prefix}/telemetry/{name}/{camera}", t, np.asarray(data[f"{name}.{camera}"], float))


def _labels_text(view: EpisodeView) -> str:
    rec = view.record
    lines = [f"# trial {view.trial.slot + 1}: policy {view.trial.policy}, mark {view.trial.mark_id}", ""]
    auto = view.labels.get(AUTO_JUDGE)
    if auto is not None:
        band = "abstains (its error band straddles the test)" if auto.label == "unsure" else "outside its error band"
        lines.append(f"- auto rater: **{auto.label}**, {band}: {auto.note or ''}")
    if rec.get("physics_success") is not None:
        lines.append(f"- physics: **{'success' if rec['physics_success'] else 'failure'}**"
                     f" (max lift {float(rec.get('max_lift_m') or 0) * 100:.1f} cm)")
    for judge, lab in sorted(view.labels.items()):
        if judge != AUTO_JUDGE:
            lines.append(f"- {judge}: **{lab.label}**" + (f" ({lab.failure_mode})" if lab.failure_mode else "")
                         + (f": {lab.note}" if lab.note else ""))
    if rec.get("safety_events"):
        lines.append(f"- safety events: {', '.join(map(str, rec['safety_events']))}")
    return "\n".join(lines) + "\n"


def log_episode(rr: Any, rec: Any, campaign_dir: Path, view: EpisodeView, test: tuple[float, float, float],
                control_fps: int, camera_fps: dict[str, int]) -> dict[str, str]:
    """Log one episode under its prefix; camera -> how it was logged (video or frames)."""
    prefix = view.prefix
    if view.files.timeseries is None:
        raise BadInput(f"{campaign_dir}: trial {view.trial.slot + 1} lists no time series; nothing to view")
    data = read_series(campaign_dir / view.files.timeseries)
    t = np.asarray(data["t"], dtype=float)
    how = {}
    for camera, relative in view.files.videos.items():
        rate = video_rate(camera_fps.get(camera, control_fps), control_fps)
        how[camera] = _log_video(rr, rec, f"{prefix}/cameras/{camera}", campaign_dir / relative,
                                 data.get(f"frame_t.{camera}"), rate)
    _log_series(rr, rec, prefix, data, list(view.files.videos))
    cube_m, min_height_m, hold_s = test
    trace = rater.trace(t, data["state"], cube_m, min_height_m, data.get("action"))
    _scalars(rr, rec, f"{prefix}/success/cube_bottom_m", t, trace["bottom_m"])
    _scalars(rr, rec, f"{prefix}/success/min_height_m", t, np.full(len(t), min_height_m))
    _scalars(rr, rec, f"{prefix}/success/hold_s", t, trace["hold_s"])
    _scalars(rr, rec, f"{prefix}/success/hold_needed_s", t, np.full(len(t), hold_s))
    rec.log(f"{prefix}/labels", rr.TextDocument(_labels_text(view), media_type="text/markdown"), static=True)
    timing = view.record.get("timing") or {}
    if timing:
        import json

        rec.log(f"{prefix}/telemetry/timing", rr.TextDocument(json.dumps(timing, indent=1, sort_keys=True)),
                static=True)
    for event in view.events:
        rec.reset_time()
        rec.set_time("wall_time", timestamp=float(event["at"]))
        rec.log(f"{prefix}/events", rr.TextLog(f"{event['kind']}: {event.get('message') or ''}"))
    for name in view.record.get("safety_events") or []:
        rec.reset_time()
        rec.set_time(TIMELINE, duration=0.0)
        rec.log(f"{prefix}/events", rr.TextLog(f"safety event: {name}", level="WARN"))
    rec.reset_time()
    return how
