"""The rules about an episode's files that several stages share, each written once: the
time-series reader (`store/episode_files.py`), the disk rule (`run/recording.py`), the frame
shown at time t (`core/timeline.py`)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from orchestrator.core.disk import required_free_bytes
from orchestrator.core.errors import RuntimeFailure
from orchestrator.core.timeline import frame_shown_at
from orchestrator.rigs.profile import STATE_KEYS
from orchestrator.run import preflight, recording
from orchestrator.store.episode_files import read_series


def test_read_series_puts_the_columns_in_joint_order_whatever_the_file_says(tmp_path):
    shuffled = list(reversed(STATE_KEYS))
    state = np.array([[float(i) for i in range(6)]] * 3)       # column j holds joint shuffled[j]
    np.savez(tmp_path / "s.npz", t=np.arange(3) / 10, state=state, action=state + 10,
             keys=np.asarray(shuffled), **{"frame_t.front": np.array([0.0, 0.2])})
    data = read_series(tmp_path / "s.npz")
    for j, key in enumerate(STATE_KEYS):
        assert data["state"][0, j] == shuffled.index(key)
        assert data["action"][0, j] == shuffled.index(key) + 10
    assert list(data["keys"]) == list(STATE_KEYS)
    assert list(data["frame_t.front"]) == [0.0, 0.2]


def test_read_series_fills_a_missing_joint_with_nan_and_keeps_files_without_keys(tmp_path):
    np.savez(tmp_path / "five.npz", t=np.arange(2.0), state=np.ones((2, 5)), keys=np.asarray(STATE_KEYS[:5]))
    assert np.isnan(read_series(tmp_path / "five.npz")["state"][:, 5]).all()
    np.savez(tmp_path / "old.npz", t=np.arange(2.0), state=np.arange(12.0).reshape(2, 6))
    assert read_series(tmp_path / "old.npz")["state"].tolist() == np.arange(12.0).reshape(2, 6).tolist()


def test_read_series_never_unpickles_and_names_the_file(tmp_path):
    np.savez(tmp_path / "p.npz", t=np.arange(2.0), state=np.array([{"a": 1}, {"b": 2}], dtype=object))
    with pytest.raises(RuntimeFailure, match="p.npz: cannot read the time series"):
        read_series(tmp_path / "p.npz")
    with pytest.raises(RuntimeFailure, match="missing.npz: cannot read"):
        read_series(tmp_path / "missing.npz")


def test_the_frame_shown_at_t_is_the_last_taken_at_or_before_t():
    times = [0.0, 0.2, 0.4]
    assert [frame_shown_at(times, t) for t in (-1.0, 0.0, 0.19, 0.2, 0.39, 0.4, 9.0)] == [0, 0, 0, 1, 1, 2, 2]
    # A frame stamped 0.3 (ms-rounded PTS, or float error) is shown at a step computed as 0.1 * 3.
    assert frame_shown_at([0.0, 0.3], 0.1 * 3) == 1 and frame_shown_at([0.0, 0.30000000000000004], 0.3) == 1
    steps = np.arange(6) / 10
    assert frame_shown_at(times, steps).tolist() == [frame_shown_at(times, float(t)) for t in steps]


def test_doctor_and_run_apply_the_same_disk_rule(tmp_path, monkeypatch):
    """Both read free space through `core.disk` alone (patched there, both see it) and apply its
    rule, with its unit."""
    from orchestrator.core import disk

    need = 10_000_000
    for free, ok in ((required_free_bytes(need) - 1, False), (required_free_bytes(need), True)):
        monkeypatch.setattr(disk, "free_bytes", lambda directory, free=free: free)
        check = preflight.check_disk(tmp_path, need)
        assert check.ok is ok and "52 MB free at" in check.detail
        if ok:
            recording.check_disk(tmp_path, need, "the next episode")
        else:
            with pytest.raises(RuntimeFailure, match="not enough disk space for the next episode"):
                recording.check_disk(tmp_path, need, "the next episode")


def test_episode_files_written_by_the_recorder_read_back_by_name(tmp_path):
    from orchestrator.rigs.profile import CameraSpec
    from orchestrator.run.recording import EpisodeRecorder
    from orchestrator.store.episode_files import EpisodeFiles

    cameras = {"front": CameraSpec(type="sim", width=32, height=24, fps=10),
               "wrist": CameraSpec(type="sim", width=32, height=24, fps=5)}
    recorder = EpisodeRecorder(tmp_path, "ep_test", cameras, control_fps=10, steps=4,
                               camera_poses={"front": {"position": [0.5, 0, 0.2]}})
    image = np.zeros((24, 32, 3), np.uint8)
    recorder.still({"front": image, "wrist": image})
    for step in range(4):
        recorder.frame(step, step / 10, {**dict.fromkeys(STATE_KEYS, 0.0), "front": image, "wrist": image},
                       dict.fromkeys(STATE_KEYS, 1.0))
    stored = recorder.finish().files
    files = EpisodeFiles.from_dict(stored)
    assert files.videos == {"front": "videos/ep_test/front.mp4", "wrist": "videos/ep_test/wrist.mp4"}
    assert files.stills == {"front": "videos/ep_test/front.start.jpg", "wrist": "videos/ep_test/wrist.start.jpg"}
    assert files.timeseries == "episodes/ep_test/timeseries.npz"
    assert files.camera_poses == "videos/ep_test/cameras.json"
    assert files.to_dict() == stored and EpisodeFiles.from_dict(json.dumps(stored)) == files
    assert all((tmp_path / rel).is_file() for rel in stored.values())
    assert read_series(tmp_path / files.timeseries)["action"].tolist() == [[1.0] * 6] * 4


def test_videos_are_constant_rate_from_an_idr_frame_whatever_the_frame_times(tmp_path):
    """The recorder's videos are what a stream-copy join needs (recording.video_encoding): frame n
    at n / fps whatever time it was taken (a frame late in its slot, 366.657 ms, and the held frame
    of the next slot, 366.667 ms, once rounded to the same millisecond and the muxer refused the
    repeat), PTS == DTS (no B-frames), an IDR frame first and every 2 s, each frame lasting 1/fps."""
    import av

    from orchestrator.rigs.profile import CameraSpec

    writer = recording._VideoWriter(tmp_path / "v.mp4", CameraSpec(type="opencv", width=64, height=48, fps=30),
                                    "ultrafast", fps=10)
    writer.start()
    period = 1 / 30
    times = [k * period + 0.002 for k in range(10)] + [11 * period - 1e-5, 11 * period] + \
            [k * period + 0.002 for k in range(12, 30)]
    for k, t in enumerate(times):
        writer.frames.put((t, np.full((48, 64, 3), 8 * k, np.uint8)))
    writer.frames.put(None)
    writer.join()
    assert writer.error is None and writer.count == len(times) == 30
    with av.open(str(tmp_path / "v.mp4")) as container:
        stream = container.streams.video[0]
        tick = 1 / (10 * stream.time_base)          # stream ticks per frame at 10 fps
        packets = [p for p in container.demux(stream) if p.dts is not None]
        assert float(stream.duration * stream.time_base) == 3.0
    assert tick == int(tick) and len(packets) == 30
    assert [p.pts for p in packets] == [p.dts for p in packets] == [round(k * tick) for k in range(30)]
    assert [k for k, p in enumerate(packets) if p.is_keyframe] == [0, 20]
    assert {p.duration for p in packets} == {tick}


def test_the_export_applies_the_same_disk_rule_to_what_it_may_write(tmp_path, monkeypatch):
    """`export` asks the rule of `core.disk` for EXPORT_BYTES_PER_SOURCE_BYTE times the campaign's
    files (its re-encoding worst case), and says so in the same unit."""
    from types import SimpleNamespace

    from orchestrator.core import disk
    from orchestrator.export.checks import EXPORT_BYTES_PER_SOURCE_BYTE, check_export_space

    (tmp_path / "front.mp4").write_bytes(b"\0" * 1_000_000)
    episode = SimpleNamespace(files=SimpleNamespace(paths=lambda: ["front.mp4", "missing.npz"]))
    plan = SimpleNamespace(episodes=[episode], campaign_dir=tmp_path, root=tmp_path / "out" / "dataset")
    need = required_free_bytes(EXPORT_BYTES_PER_SOURCE_BYTE * 1_000_000)
    monkeypatch.setattr(disk, "free_bytes", lambda directory: need)
    check_export_space(plan)                                          # exactly enough: goes ahead
    monkeypatch.setattr(disk, "free_bytes", lambda directory: need - 1)
    with pytest.raises(RuntimeFailure, match=r"not enough disk space for the export: \d+ MB free, need about "
                                             r"\d+ MB; free some space or choose another --root"):
        check_export_space(plan)
