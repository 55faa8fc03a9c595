"""`orchestrator export` by stream copy: the recorded videos joined into LeRobot v3's files, read
back through LeRobot's own decoder frame by frame, and the fallback to re-encoding with its reason.

The campaign is the small one of `tests/support/export_campaign.py` (3 marks x 2 policies, 10 fps x
1 s), with both cameras at the control rate (joined by stream copy) or the wrist at 5 fps (every
second row holds its previous frame: re-encoded). Its images encode their control step, so a
frame out of place shows.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import numpy as np
import pytest

from support.evidence import accept_edits
from support.export_campaign import FPS, STEPS, level, make_campaign

REPO_ID = "tester/so101-ab-remux"


def export(campaign: Path, root: Path) -> str:
    from orchestrator.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["export", str(campaign), "--repo-id", REPO_ID, "--root", str(root)])
    assert code == 0, out.getvalue()
    return out.getvalue()


@pytest.fixture(scope="module")
def joined(tmp_path_factory, hf_env):
    """A campaign whose cameras both run at the control rate, exported with LeRobot's file size
    limit at 5 KB (two or three episodes a file), so the layout has several files per camera."""
    from lerobot.datasets.dataset_metadata import LeRobotDatasetMetadata

    campaign = make_campaign(tmp_path_factory.mktemp("sim"), wrist_fps=10)
    root = tmp_path_factory.mktemp("out") / "dataset"
    create = LeRobotDatasetMetadata.create.__func__

    def small_files(cls, *args, **kwargs):
        return create(cls, *args, **{**kwargs, "video_files_size_in_mb": 0.005})

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(LeRobotDatasetMetadata, "create", classmethod(small_files))
        output = export(campaign, root)
    return campaign, root, output


def recorded_frames(path: Path) -> list[np.ndarray]:
    import av

    with av.open(str(path)) as container:
        return [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]


def test_every_frame_time_decodes_through_lerobot_to_the_recorded_frame(joined):
    from lerobot.datasets.lerobot_dataset import LeRobotDataset
    from lerobot.datasets.video_utils import decode_video_frames
    from lerobot.utils.import_utils import get_safe_default_video_backend

    campaign, root, output = joined
    assert "videos joined by stream copy (nothing re-encoded)" in output, output
    assert "re-encoding" not in output
    recordings = recordings_of(campaign)
    dataset = LeRobotDataset(REPO_ID, root=root)
    meta = dataset.meta
    backend = get_safe_default_video_backend()
    assert meta.total_episodes == len(recordings) // 2 == 6 and meta.fps == FPS
    layout = {(ep, key): str(meta.get_video_file_path(ep, key)) for ep in range(6) for key in meta.video_keys}
    assert len({f for (_, key), f in layout.items() if key.endswith("front")}) >= 2   # the size limit split
    compared = 0
    for ep in range(6):
        row = meta.episodes[ep]
        for camera in ("front", "wrist"):
            key = f"observation.images.{camera}"
            start = float(row[f"videos/{key}/from_timestamp"])
            assert float(row[f"videos/{key}/to_timestamp"]) - start == pytest.approx(STEPS / FPS, abs=1e-9)
            times = [start + k / FPS for k in range(STEPS)]
            decoded = decode_video_frames(root / layout[(ep, key)], times, dataset.tolerance_s, backend=backend,
                                          return_uint8=True)
            recorded = recorded_frames(recordings[(ep, key)])
            assert len(recorded) == len(decoded) == STEPS
            for k, frame in enumerate(decoded):
                assert np.array_equal(frame.permute(1, 2, 0).numpy(), recorded[k]), (ep, camera, k)
                assert abs(int(recorded[k][0, 0, 0]) - level(k)) <= 3    # frame k is step k's image
                compared += 1
    assert compared == 6 * 2 * STEPS
    for index in range(len(dataset)):                                    # LeRobot's own loader
        item = dataset[index]
        assert item["observation.images.front"].shape == (3, 48, 64)


def packet_bytes(paths: list[Path]) -> int:
    import av

    total = 0
    for path in paths:
        with av.open(str(path)) as container:
            total += sum(p.size for p in container.demux(video=0) if p.dts is not None)
    return total


def test_the_dataset_is_the_recorded_video_bytes(joined):
    """The same coded frames, byte for byte; the files no larger (fewer MP4 headers)."""
    campaign, root, _ = joined
    recorded, exported = sorted(campaign.glob("videos/*/*.mp4")), sorted((root / "videos").rglob("*.mp4"))
    assert len(recorded) == 12 and 4 <= len(exported) < 12
    assert packet_bytes(exported) == packet_bytes(recorded) > 0
    assert sum(p.stat().st_size for p in exported) <= 1.05 * sum(p.stat().st_size for p in recorded)
    info = json.loads((root / "meta" / "info.json").read_text())
    front = info["features"]["observation.images.front"]["info"]
    assert front["video.codec"] == "h264" and front["video.fps"] == FPS and front["video.g"] == 2 * FPS


def test_statistics_are_lerobots_of_the_recorded_frames(joined):
    """The per-channel statistics in meta/stats.json: LeRobot's sampling of every episode's flat
    grey frames (levels 20 + 20 k): min 20, max 200, in LeRobot's 0-1 scale."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    _, root, _ = joined
    stats = LeRobotDataset(REPO_ID, root=root).meta.stats["observation.images.wrist"]
    assert np.asarray(stats["min"]).shape == (3, 1, 1)
    assert np.allclose(np.asarray(stats["min"]).ravel(), 20 / 255, atol=3 / 255)
    assert np.allclose(np.asarray(stats["max"]).ravel(), 200 / 255, atol=3 / 255)
    assert np.allclose(np.asarray(stats["mean"]).ravel(), 110 / 255, atol=4 / 255)


def test_a_recording_that_cannot_be_joined_is_re_encoded_and_the_export_says_why(tmp_path, hf_env):
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    campaign = make_campaign(tmp_path / "sim")          # wrist at 5 fps in a 10 fps dataset
    root = tmp_path / "dataset"
    output = export(campaign, root)
    assert "re-encoding the videos, as they cannot be joined by stream copy: camera wrist: 6 of 6 episodes" in output
    reason = output.split("re-encoding")[1].split("\n")[0]
    assert "the video runs at 5 fps, the dataset at 10 fps" in reason and "camera front" not in reason
    assert "checked 120 frame times with LeRobot's" in output, output
    dataset = LeRobotDataset(REPO_ID, root=root)
    assert dataset.meta.total_episodes == 6 and len(dataset) == 6 * STEPS


def recordings_of(campaign: Path) -> dict[tuple[int, str], Path]:
    """(dataset episode, video key) -> the recorded video joined there: the done trials in run order."""
    from orchestrator.store.sqlite import CampaignStore

    store = CampaignStore.open_readonly(campaign)
    try:
        done = [t for t in store.trials() if t.state == "done"]
        files = {e["id"]: json.loads(e["files"]) if isinstance(e["files"], str) else e["files"]
                 for e in store.episodes()}
    finally:
        store.close()
    return {(ep, f"observation.images.{camera}"): campaign / files[trial.episode_id][camera]
            for ep, trial in enumerate(done) for camera in ("front", "wrist")}


def write_grey_video(path: Path, level_: int) -> Path:
    """A recording-like H.264 file of STEPS flat frames at `level_`, 64x48 at FPS."""
    import av

    with av.open(str(path), mode="w") as container:
        stream = container.add_stream("libx264", rate=FPS)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        for k in range(STEPS):
            frame = av.VideoFrame.from_ndarray(np.full((48, 64, 3), level_, np.uint8), format="rgb24")
            frame.pts = k
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    return path


def test_the_check_catches_a_frame_time_off_by_half_a_frame_a_changed_byte_and_another_frame(joined, tmp_path):
    """`video_check.check_joined` on the joined export passes; with one episode's from_timestamp
    moved by half a frame (LeRobot's decoder would find no frame within its tolerance), one byte
    of one coded frame changed, or a recording whose frames differ from what LeRobotDataset reads,
    it fails, naming the episode (and the frame)."""
    import shutil

    import av
    import pandas as pd

    from orchestrator.export import video_check

    campaign, root, _ = joined
    copy = tmp_path / "dataset"
    shutil.copytree(root, copy)
    recordings = recordings_of(campaign)
    decoder = video_check.backend()
    checked, read = video_check.check_joined(copy, REPO_ID, recordings, decoder)
    assert checked == 6 * 2 * STEPS and read >= 4                                        # positive control
    meta_file = next((copy / "meta" / "episodes").rglob("*.parquet"))
    episodes = pd.read_parquet(meta_file)
    original = episodes.copy()
    column = "videos/observation.images.front/from_timestamp"
    episodes.loc[episodes["episode_index"] == 3, column] += 0.5 / FPS
    episodes.to_parquet(meta_file)
    with pytest.raises(video_check.VideoCheckFailed, match=r"episode 3, observation.images.front: row 0 is at"):
        video_check.check_joined(copy, REPO_ID, recordings, decoder)
    original.to_parquet(meta_file)

    row = original[original["episode_index"] == 4].iloc[0]
    key = "observation.images.wrist"
    path = copy / "videos" / key / f"chunk-{int(row[f'videos/{key}/chunk_index']):03d}" / \
        f"file-{int(row[f'videos/{key}/file_index']):03d}.mp4"
    at = float(row[f"videos/{key}/from_timestamp"]) + 7 / FPS
    with av.open(str(path)) as container:
        packet = next(p for p in container.demux(video=0)
                      if p.dts is not None and abs(float(p.pts * p.time_base) - at) < 1e-6)
        offset = packet.pos + packet.size - 1                  # the last byte of its coded slice
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x55
    path.write_bytes(bytes(data))
    with pytest.raises(video_check.VideoCheckFailed, match=r"episode 4, observation.images.wrist: frame 7 .*bytes"):
        video_check.check_joined(copy, REPO_ID, recordings, decoder)
    shutil.rmtree(copy)
    shutil.copytree(root, copy)

    fps, videos = video_check.episode_videos(copy)
    other = {**recordings, (0, "observation.images.front"): write_grey_video(tmp_path / "other.mp4", 250)}
    assert video_check.check_lerobot_load(copy, REPO_ID, fps, videos, recordings, decoder) == read   # control
    with pytest.raises(video_check.VideoCheckFailed,
                       match=r"episode 0, observation.images.front: LeRobotDataset's frame 0 is not the recorded"):
        video_check.check_lerobot_load(copy, REPO_ID, fps, videos, other, decoder)

    # the recorded frames decoded by PyAV on a helper (`packets.recorded_frames`), as check_joined
    # hands them over with LeRobot's PyAV decoder: equal to LeRobotDataset's rows; one grey level
    # off in one pixel of one of them fails, naming the episode and frame
    from concurrent.futures import Future, ThreadPoolExecutor

    from orchestrator.export.packets import recorded_frames

    front = "observation.images.front"
    with ThreadPoolExecutor(1) as pool:
        ends = {(v.episode, v.key): pool.submit(recorded_frames, recordings[(v.episode, v.key)], [0, len(v.times) - 1])
                for v in videos}
        assert video_check.check_lerobot_load(copy, REPO_ID, fps, videos, recordings, "pyav", ends) == read
    off = {k: frame.copy() for k, frame in ends[(0, front)].result().items()}
    assert sorted(off) == [0, STEPS - 1]
    off[STEPS - 1][5, 7, 1] ^= 1
    changed: Future = Future()
    changed.set_result(off)
    with pytest.raises(video_check.VideoCheckFailed,
                       match=rf"episode 0, {front}: LeRobotDataset's frame {STEPS - 1} is not the recorded"):
        video_check.check_lerobot_load(copy, REPO_ID, fps, videos, recordings, "pyav", {**ends, (0, front): changed})


def test_lerobot_reads_the_ends_of_each_video_file():
    """The rows `check_joined` reads through LeRobotDataset: the first and last row of the first and
    last episode in each file (here files of episodes {0, 1}, {2}, {3, 4, 5})."""
    from orchestrator.export.video_check import EpisodeVideo, _rows_lerobot_reads

    files = {0: "a", 1: "a", 2: "b", 3: "c", 4: "c", 5: "c"}
    videos = [EpisodeVideo(ep, "k", Path(name), [0.0] * 10) for ep, name in files.items()]
    assert _rows_lerobot_reads(videos) == [(0, 0), (0, 9), (1, 0), (1, 9), (2, 0), (2, 9),
                                           (3, 0), (3, 9), (5, 0), (5, 9)]


def test_mixed_encoder_settings_are_re_encoded(tmp_path, hf_env):
    """One episode's front video encoded with another preset (no CABAC: other SPS/PPS) cannot
    share an MP4 track with the others: the export re-encodes and names it."""
    import sqlite3

    from orchestrator.rigs.profile import CameraSpec
    from orchestrator.run import recording
    from orchestrator.store.episode_files import file_digest

    campaign = make_campaign(tmp_path / "sim", wrist_fps=10)
    db = sqlite3.connect(campaign / "campaign.db")
    episode_id, files, digests = db.execute(
        "SELECT e.id, e.files, e.digests FROM episodes e JOIN trials t ON t.episode_id = e.id "
        "ORDER BY t.slot DESC LIMIT 1").fetchone()
    relative = json.loads(files)["front"]
    frames = recorded_frames(campaign / relative)
    writer = recording._VideoWriter(campaign / relative, CameraSpec(type="sim", width=64, height=48, fps=FPS),
                                    "ultrafast")
    writer.start()
    for k, image in enumerate(frames):
        writer.frames.put((k / FPS, image))
    writer.frames.put(None)
    writer.join()
    digests = json.loads(digests)
    digests[relative] = list(file_digest(campaign / relative))
    db.execute("UPDATE episodes SET digests = ? WHERE id = ?", (json.dumps(digests), episode_id))
    db.commit()
    db.close()
    accept_edits(campaign)   # the re-encoded file's digest, chained as the tool would have
    output = export(campaign, tmp_path / "dataset")
    assert ("re-encoding the videos, as they cannot be joined by stream copy: camera front: 1 of 6 episodes, "
            "e.g. episode 5 (trial 6): the video is encoded differently from the first episode's (mixed settings)"
            in output), output


def test_the_statistics_sample_is_lerobots():
    """`recorded.sample_indices` and `recorded.downsampled` restate LeRobot's `sample_indices` and
    `auto_downsample_height_width` (so the recordings are decoded before LeRobot is imported):
    the same frames for every episode length up to 3,000 frames and the same pixels at 320x240,
    240x320, 640x480 and 64x48."""
    from lerobot.datasets.compute_stats import auto_downsample_height_width
    from lerobot.datasets.compute_stats import sample_indices as lerobots

    from orchestrator.export.recorded import downsampled, sample_indices

    lengths = range(1, 3001)
    assert [sample_indices(n) for n in lengths] == [lerobots(n) for n in lengths]
    compared = 0
    for height, width in ((240, 320), (320, 240), (480, 640), (48, 64)):
        image = np.random.default_rng(height).integers(0, 256, (3, height, width), dtype=np.uint8)
        assert np.array_equal(downsampled(image), auto_downsample_height_width(image))
        compared += 1
    assert compared == 4


def test_the_check_decodes_each_frame_about_once():
    """`video_check.batches`: every frame time in exactly one decoder call, and every call after the
    first starts one frame after a keyframe (LeRobot's PyAV decoder then decodes one frame it does
    not return, not a whole keyframe interval)."""
    from orchestrator.export.video_check import BATCH, batches

    for count, gop in ((180, 30), (181, 30), (1, 30), (900, 60), (95, 7), (10, 1)):
        calls = list(batches(count, gop))
        assert [i for start, end in calls for i in range(start, end)] == list(range(count))
        assert all(start % gop == 1 or gop == 1 for start, _ in calls[1:]), calls
        assert all(end - start <= max(BATCH, gop) + 1 for start, end in calls)
