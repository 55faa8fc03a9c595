"""The dataset written by stream copy: LeRobot's own writer (`LeRobotDatasetMetadata.create` and a
`DatasetWriter`) writes the frames' table, the episodes' metadata, the tasks, the statistics and
`info.json`; only where LeRobot would encode an episode's video and join it to the camera's file
(`DatasetWriter._save_episode_video`) the recorded video is joined by stream copy
(`remux.LayoutMuxer`) and its from/to timestamps are handed to LeRobot.

`recorded.RecordedVideos` stands where LeRobot's `StreamingVideoEncoder` stands in its writer (the
same methods): it encodes nothing, and hands LeRobot each camera's recorded video with its frame
statistics at the end of each episode. The statistics are the ones LeRobot computes for stored
video frames (`compute_episode_stats`: `sample_indices` frames, `auto_downsample_height_width`,
`get_feature_stats` per channel), on the recorded frames decoded. `video_check.check_joined` then
tells the dataset gives back exactly the recorded frames.

Imported only when a dataset is written (it imports LeRobot and torch)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from datasets import arrow_dataset
from datasets.fingerprint import generate_random_fingerprint
from lerobot.configs.video import RGBEncoderConfig
from lerobot.datasets import dataset_metadata, dataset_writer
from lerobot.datasets.dataset_metadata import LeRobotDatasetMetadata
from lerobot.datasets.dataset_writer import DatasetWriter
from lerobot.datasets.io_utils import write_info, write_stats
from lerobot.datasets.utils import update_chunk_file_indices

from orchestrator.core.progress import ProgressBar
from orchestrator.export import frames
from orchestrator.export.names import F_ACTION, F_IMAGE, F_STATE
from orchestrator.export.plan import EpisodePlan, ExportPlan
from orchestrator.export.recorded import RecordedVideos, Recordings
from orchestrator.export.remux import LayoutMuxer, Segment
from orchestrator.run.recording import CRF, GOP_S


class RemuxWriter(DatasetWriter):
    """LeRobot's `DatasetWriter`, joining the recorded videos instead of encoding frames."""

    def __init__(self, meta: LeRobotDatasetMetadata, videos: RecordedVideos, muxers: dict[str, LayoutMuxer]):
        super().__init__(meta=meta, root=meta.root, rgb_encoder=None, depth_encoder=None, encoder_threads=None,
                         batch_encoding_size=1, streaming_encoder=videos)
        self._videos = videos
        self._muxers = muxers

    def _save_episode_video(self, video_key: str, episode_index: int, temp_path: Path | None = None) -> dict:
        # LeRobot's own moves (and deletes) its temporary file: here the recording stays untouched
        return {"episode_index": episode_index, **self._muxers[video_key].add(self._videos.current[video_key])}

    def save_episode(self, episode_data: dict | None = None, parallel_encoding: bool = True) -> None:
        # LeRobot's own, with its task lookup remembered for the episode: it looks every frame's
        # task up in its pandas table (0.25 ms a frame, 1 s of CPU for the demo's 7,200 frames);
        # the tasks are saved before the lookups, and a task's index never changes. And without
        # rewriting `info.json` and `stats.json` after every episode (the whole statistics as
        # indented JSON each time): `write_remuxed` writes both once, after the last episode,
        # with what the last episode's save would have written
        lookup, known = self._meta.get_task_index, {}

        def task_index(task: str) -> int | None:
            if task not in known:
                index = lookup(task)
                if index is None:
                    return None
                known[task] = index
            return known[task]

        self._meta.get_task_index = task_index
        info, stats = dataset_metadata.write_info, dataset_metadata.write_stats
        dataset_metadata.write_info = dataset_metadata.write_stats = lambda *args, **kwargs: None
        try:
            super().save_episode(episode_data, parallel_encoding)
        finally:
            del self._meta.get_task_index
            dataset_metadata.write_info, dataset_metadata.write_stats = info, stats

    def _save_episode_data(self, episode_buffer: dict) -> dict:
        # LeRobot's own, without `embed_images`: a row-by-row `datasets.map` that embeds image
        # files, a no-op on a table that has no image column (videos are not in the table), and
        # 40% of the demo's export time; and with a random fingerprint for the episode's
        # `datasets.Dataset`, which LeRobot turns into an Arrow table and writes at once: its
        # fingerprint names cache files only, and `datasets` computes it by pickling every row
        # (2 s of CPU for the demo's 40 episodes, docs/benchmarks.md)
        embed, dataset_writer.embed_images = dataset_writer.embed_images, lambda dataset: dataset
        fingerprint, arrow_dataset.generate_fingerprint = (arrow_dataset.generate_fingerprint,
                                                           lambda dataset: generate_random_fingerprint())
        try:
            return super()._save_episode_data(episode_buffer)
        finally:
            dataset_writer.embed_images = embed
            arrow_dataset.generate_fingerprint = fingerprint

    def flush_pending_videos(self) -> None:
        for muxer in self._muxers.values():
            muxer.close()
        super().flush_pending_videos()


def recorded_encoder(fps: int) -> RGBEncoderConfig:
    """What the recorder's encode is, for `info.json`'s `video.*` fields (the preset depends on the rig:
    `ultrafast` on a live camera, `veryfast` in simulation)."""
    return RGBEncoderConfig(vcodec="h264", pix_fmt="yuv420p", g=GOP_S * int(fps), crf=CRF, preset=None)


def _add_episode(writer: RemuxWriter, videos: RecordedVideos, plan: ExportPlan, ep: EpisodePlan,
                 segments: dict[str, Segment], blank: dict[str, np.ndarray]) -> int:
    series = videos.recordings.rows(ep)
    rows = range(0, len(series["t"]), plan.stride)
    videos.next_episode(ep.index, segments)
    columns = frames.episode_columns(plan, ep)
    task = plan.task_of(ep.trial.policy)
    for step in rows:
        writer.add_frame({F_STATE: series["state"][step], F_ACTION: series["action"][step], "task": task,
                          **{k: v.copy() for k, v in columns.items()}, **blank})
    writer.save_episode()
    return len(rows)


def write_remuxed(plan: ExportPlan, out: Path, episode_segments: list[dict[str, Segment]], recordings: Recordings,
                  say: Callable[[str], None], console: Any) -> None:
    """Write the dataset at `out` with the recordings `episode_segments` (per episode, video key ->
    its recording; `remux.by_episode`), whose frame statistics `recordings` computes."""
    videos = RecordedVideos(recordings)
    meta = LeRobotDatasetMetadata.create(repo_id=plan.repo_id, fps=plan.fps, features=plan.features(),
                                         robot_type=plan.robot_type, root=out, use_videos=True)

    def next_file(chunk: int, file: int) -> tuple[int, int]:
        return update_chunk_file_indices(chunk, file, meta.chunks_size)

    keys = {camera: F_IMAGE.format(camera=camera) for camera in plan.cameras}
    muxers = {key: LayoutMuxer(out, key, meta.video_path, meta.video_files_size_in_mb, next_file)
              for key in keys.values()}
    writer = RemuxWriter(meta, videos, muxers)
    # LeRobot checks each frame's image shape; the video itself comes from the recording
    blank = {key: np.zeros((*plan.camera_shapes[camera], 3), np.uint8) for camera, key in keys.items()}
    progress = ProgressBar(len(plan.episodes), 0, "episode", say, console)
    try:
        for ep in plan.episodes:
            steps = _add_episode(writer, videos, plan, ep, episode_segments[ep.index], blank)
            progress.step(f"trial {ep.trial.slot + 1}, mark {ep.trial.mark_id}, {steps} frames (stream copy)")
    finally:
        progress.close()
        videos.close()
        writer.finalize()
    meta.update_video_info(video_encoder=recorded_encoder(plan.fps))
    write_info(meta.info, meta.root)
    write_stats(meta.stats, meta.root)
