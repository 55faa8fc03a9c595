"""Writing the dataset with LeRobot's own writer: `LeRobotDataset.create`, `add_frame` per
control step, `save_episode`, `finalize`. LeRobot (and torch) are imported only when a dataset
is written, never at module import."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, redirect_stderr
from pathlib import Path
from typing import Any

from orchestrator.core.errors import OrchestratorError, RuntimeFailure
from orchestrator.core.progress import ProgressBar
from orchestrator.export import frames
from orchestrator.export.names import F_ACTION, F_IMAGE, F_STATE
from orchestrator.export.plan import EpisodePlan, ExportPlan


@contextmanager
def _native_stderr_captured() -> Iterator[None]:
    """Keep the writer's chatter off the terminal: what native code prints on fd 2 (the SVT-AV1
    encoder's banner per video, FFmpeg's muxer notes) and what Python code writes to
    `sys.stderr` (the `datasets` progress bars) go to temporary buffers, whose tails are
    replayed only if a library fails in the block."""
    import io
    import sys
    import tempfile

    sys.stderr.flush()
    python_side = io.StringIO()
    with tempfile.TemporaryFile() as log:
        saved = os.dup(2)
        os.dup2(log.fileno(), 2)
        failed = False
        try:
            with redirect_stderr(python_side):
                yield
        except (OrchestratorError, KeyboardInterrupt):
            raise  # our own one-line message says it all
        except BaseException:
            failed = True  # a library failure: its chatter may explain it
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            if failed:
                log.seek(0)
                tail = (log.read()[-3000:].decode("utf-8", "replace").strip() + "\n"
                        + python_side.getvalue()[-3000:].strip()).strip()
                if tail:
                    print(tail, file=sys.stderr)



def rgb_encoder(fps: int) -> Any:
    """The video encoder, through LeRobot's own `rgb_encoder` config: H.264 (libx264, `veryfast`,
    CRF 23: the recorder's own settings) with a keyframe every 2 seconds, instead of LeRobot's
    default AV1 with a keyframe every 2 frames, which measured 12x the recorded bytes and 2x
    the encoding time (bench/export_speed.py). On the demo's frames a keyframe every second
    measured 1.56x the recorded video bytes, every 2 s 1.2x; random access stays cheap: a
    training loader decodes at most `2 fps - 1` frames to reach any frame."""
    from lerobot.configs.video import RGBEncoderConfig

    return RGBEncoderConfig(vcodec="h264", pix_fmt="yuv420p", g=max(2 * int(fps), 1), crf=23, preset="veryfast")


def write_dataset(plan: ExportPlan, out: Path, say: Callable[[str], None], console: Any = None,
                  recordings: Any = None) -> dict[str, Any]:
    """The dataset at `out`, through LeRobot's own writer; LeRobot's `info.json` back.

    The recorded videos are joined by stream copy when they can be (`remux.plan_segments`,
    `remux_writer`); otherwise, or when the joined files fail the check, every frame is
    re-encoded (create, add_frame per dataset frame, save_episode, finalize), and `say` tells why.
    Either way every frame time of every episode is then decoded with LeRobot's own decoder
    (`video_check`) before the caller publishes the dataset. Progress: a bar with ETA on
    `console` (a terminal), else one line per episode through `say`.

    `recordings`: the plan's `recorded.Recordings`, read on the export's helpers since before
    LeRobot and torch are imported here (seconds: docs/benchmarks.md, Export); None: read here,
    on two threads."""
    from orchestrator.export.recorded import Recordings

    pool = None
    if recordings is None:
        pool = ThreadPoolExecutor(2)
        recordings = Recordings(pool, plan)
    try:
        with _native_stderr_captured():
            from orchestrator.export.lerobot_import import import_lerobot_datasets

            import_lerobot_datasets()   # without transformers and diffusers, which export never uses
            from orchestrator.export import video_check
            from orchestrator.export.remux import by_episode, plan_segments

            decoder = video_check.backend()
            segments, reasons = plan_segments(plan, recordings.segment, recordings.rows)
            if not reasons:
                info = _joined(plan, out, by_episode(plan, segments), recordings, decoder, say, console, reasons)
                if info is not None:
                    return info
            recordings.close()
            say("re-encoding the videos, as they cannot be joined by stream copy: " + "; ".join(reasons))
            return _re_encoded(plan, out, decoder, say, console)
    finally:
        recordings.close()
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def _joined(plan: ExportPlan, out: Path, episode_segments: list[dict[str, Any]], recordings: Any, decoder: str,
            say: Callable[[str], None], console: Any, reasons: list[str]) -> dict[str, Any] | None:
    """The dataset joined by stream copy and checked; None (and `reasons` says why, `out` removed)
    when the joined videos fail the check."""
    import time

    from orchestrator.export import video_check
    from orchestrator.export.remux_writer import write_remuxed

    write_remuxed(plan, out, episode_segments, recordings, say, console)
    joined = {(index, key): segment.path for index, recorded in enumerate(episode_segments)
              for key, segment in recorded.items()}
    started = time.monotonic()
    try:
        checked, read = video_check.check_joined(out, plan.repo_id, joined, decoder, recordings.pool)
    except video_check.VideoCheckFailed as exc:
        reasons.append(f"the joined videos failed the check: {exc}")
        shutil.rmtree(out, ignore_errors=True)
        return None
    say(f"videos joined by stream copy (nothing re-encoded); checked {checked} frame times, each the recorded "
        f"frame's bytes within LeRobot's tolerance ({video_check.TOLERANCE_S:g} s), and {read} rows read by "
        f"LeRobotDataset ({decoder}) equal to the recorded frames, in {time.monotonic() - started:.1f} s")
    return info_of(out)


def _re_encoded(plan: ExportPlan, out: Path, decoder: str, say: Callable[[str], None], console: Any) -> dict[str, Any]:
    import time

    from orchestrator.export import video_check

    info = _write_episodes(plan, out, say, console)
    started = time.monotonic()
    try:
        checked = video_check.check_dataset(out, decoder)
    except video_check.VideoCheckFailed as exc:
        raise RuntimeFailure(f"{plan.root}: the exported videos fail LeRobot's decoder: {exc}; "
                             "nothing was published") from None
    say(f"checked {checked} frame times with LeRobot's {decoder} decoder in {time.monotonic() - started:.1f} s")
    return info


def _add_episode(dataset: Any, plan: ExportPlan, ep: EpisodePlan) -> int:
    """Add one episode's frames to the dataset (every `plan.stride`-th control step) and save it;
    returns its number of dataset frames."""
    series = frames.episode_series(plan, ep)
    rows = range(0, len(series["t"]), plan.stride)
    step_t = series["t"][::plan.stride]
    streams = {}
    for camera in plan.cameras:
        path = plan.campaign_dir / ep.files.videos[camera]
        n_video = (ep.record.get("timing") or {}).get("video_frames", {}).get(camera)
        if series.get(f"frame_t.{camera}") is None and n_video:   # spread over every step, then take ours
            indices = frames.frame_indices(series["t"], None, n_video)[::plan.stride]
        else:
            indices = frames.frame_indices(step_t, series.get(f"frame_t.{camera}"), n_video)
        streams[camera] = frames.held_frames(path, indices, plan.camera_shapes[camera], str(path))
    columns = frames.episode_columns(plan, ep)
    task = plan.task_of(ep.trial.policy)
    try:
        for step in rows:
            frame: dict[str, Any] = {
                F_STATE: series["state"][step], F_ACTION: series["action"][step],
                "task": task, **{k: v.copy() for k, v in columns.items()}}
            for camera, stream in streams.items():
                frame[F_IMAGE.format(camera=camera)] = next(stream)
            dataset.add_frame(frame)
    finally:
        for stream in streams.values():
            stream.close()
    dataset.save_episode()
    return len(rows)


def _write_episodes(plan: ExportPlan, out: Path, say: Callable[[str], None], console: Any) -> dict[str, Any]:
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    # streaming encoding: LeRobot encodes each camera on its own thread as frames arrive,
    # instead of staging every frame as a PNG and encoding afterwards (measured 2x faster on
    # 320x240 x 360-frame episodes with two cameras)
    dataset = LeRobotDataset.create(plan.repo_id, fps=plan.fps, features=plan.features(), root=out,
                                    robot_type=plan.robot_type, use_videos=True, video_backend="pyav",
                                    streaming_encoding=True, rgb_encoder=rgb_encoder(plan.fps))
    progress = ProgressBar(len(plan.episodes), 0, "episode", say, console)
    try:
        for ep in plan.episodes:
            steps = _add_episode(dataset, plan, ep)
            progress.step(f"trial {ep.trial.slot + 1}, mark {ep.trial.mark_id}, {steps} frames")
    except BaseException:
        if dataset.has_pending_frames():  # stop the streaming encoders of the unfinished episode
            try:
                dataset.clear_episode_buffer()
            except Exception:
                pass
        raise
    finally:
        progress.close()
        dataset.finalize()
    images = out / "images"  # LeRobot's per-frame staging folders, empty once encoded
    if images.is_dir() and not any(p.is_file() for p in images.rglob("*")):
        shutil.rmtree(images)
    return info_of(out)


def info_of(dataset_root: Path) -> dict[str, Any]:
    return json.loads((dataset_root / "meta" / "info.json").read_text())

