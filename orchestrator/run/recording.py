"""Episode recording: one H.264 MP4 per camera plus the joint/action time series.

Encoding runs on a background thread per episode, fed through a bounded queue, so the
control loop only copies a frame reference and never waits on the encoder. Every file is
written under a temporary name, fsynced, then renamed into place and the directory
fsynced: a file a judge can see is always complete, also after a power loss (docs/design.md
section 9).

Layout inside the campaign directory:
    videos/<episode id>/<camera>.mp4        what judges watch (no policy anywhere)
    episodes/<episode id>/timeseries.npz    t, state, action, sent_action, frame times

Time series (one row per control step): `t` the step's clock time since the episode started
(measured on a real rig, simulated time in simulation), `state` the observed joints, `action` the
policy's action as `lerobot-record`/`lerobot-rollout` store it, `sent_action` what was actually
sent to the arm after `max_relative_target` clipping; `frame_t.<camera>` the `t` of each video
frame; `keys` the joint order of the columns; `frame_age_ms.<camera>` / `frame_repeat.<camera>`
per step, the camera frame's age when observed and 1 when it repeated the previous step's
(`rigs/frame_age.py`; NaN when the rig's camera does not report it). The one reader of this
file, and the names of an episode's files, are the store's (`store/episode_files.py`).

The frame shown at time t is `core.timeline.frame_shown_at` (the judge's player and the export).

Disk space: the rule of `core.disk`, checked before every episode (`check_disk`).
"""

from __future__ import annotations

import queue
import shutil
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from orchestrator.core.disk import space_problem
from orchestrator.core.durable import publish
from orchestrator.core.errors import RuntimeFailure
from orchestrator.rigs.base import Action, Observation
from orchestrator.rigs.profile import STATE_KEYS, CameraSpec
from orchestrator.store.episode_files import EpisodeFiles, file_digest

PARTIAL = ".partial"
# The encode, the same for every episode of every policy (`video_encoding`), so the export can join
# the episodes by stream copy, as LeRobot's own `concatenate_video_files` does (docs/design.md,
# "Remux-ready recording"): H.264 yuv420p, constant frame rate with time base 1/fps and PTS = the
# frame's index from 0 (a slot lost to an overrun holds the last image, `EpisodeRecorder._hold`, so
# every due slot has its frame), an IDR frame every GOP_S seconds from the first frame, no B-frames
# (PTS == DTS: the packets say each frame's time in decode order, so the export checks a recording
# by demuxing it, and a joined file needs no edit list), no scene-cut keyframes (the GOP does not
# depend on what the camera saw). The measured time of each frame stays in the time series
# (`frame_t.<camera>`); a judge sees nominal frame times.
CRF = 23
GOP_S = 2


def video_rate(camera_fps: int, control_fps: int) -> int:
    """Frames per second of a camera's video: its own rate, at most one frame per control step."""
    return min(int(camera_fps), int(control_fps))


def video_encoding(fps: int, preset: str) -> dict[str, str]:
    """libx264's options for a video at `fps` (one function, so every episode's are equal)."""
    gop = max(1, GOP_S * int(fps))
    return {"preset": preset, "crf": str(CRF), "threads": "1",
            "x264-params": f"keyint={gop}:min-keyint={gop}:scenecut=0:bframes=0:open-gop=0"}


# Bytes per pixel per frame of H.264 at CRF 23 on table-top scenes, measured on simulated
# episodes (0.02-0.05); 0.08 leaves margin for noisy real cameras.
H264_BYTES_PER_PIXEL = 0.08


def episode_bytes_estimate(cameras: dict[str, CameraSpec], duration_s: float) -> int:
    """Disk use of one episode's videos (+ time series), from resolution, fps and duration."""
    video = sum(c.width * c.height * c.fps * duration_s * H264_BYTES_PER_PIXEL for c in cameras.values())
    return int(video + 64 * 1024)


def check_disk(directory: Path, needed_bytes: int, what: str) -> None:
    """Refuse to start (or continue) when the disk rule (`core.disk`) does not hold.

    Called before every episode, so a campaign stops cleanly, between trials, before the
    disk is full; `orchestrator run` resumes it once there is space again.
    """
    problem = space_problem(directory, needed_bytes, what)
    if problem:
        raise RuntimeFailure(f"{problem}; free some space and run again to resume")


class _VideoWriter(threading.Thread):
    """Encodes RGB frames of one camera to H.264 on its own thread, at a constant `fps`
    (default the camera's): the n-th frame is shown at n / fps (see `video_encoding`)."""

    def __init__(self, path: Path, spec: CameraSpec, preset: str, fps: int | None = None):
        super().__init__(daemon=True, name=f"video-{path.stem}")
        self.path = path
        self.spec = spec
        self.fps = int(fps or spec.fps)
        self.preset = preset
        self.frames: queue.Queue = queue.Queue(maxsize=max(8, spec.fps * 4))
        self.error: BaseException | None = None
        self.count = 0

    def run(self) -> None:
        import av  # PyAV: libx264 through FFmpeg

        container = None
        try:
            container = av.open(str(self.path), mode="w", format="mp4")
            stream = container.add_stream("libx264", rate=self.fps)
            time_base = Fraction(1, self.fps)
            stream.time_base = time_base
            stream.codec_context.time_base = time_base
            stream.width, stream.height = self.spec.width, self.spec.height
            stream.pix_fmt = "yuv420p"
            options: dict[str, object] = dict(video_encoding(self.fps, self.preset))
            stream.options = options
            while True:
                item = self.frames.get()
                if item is None:
                    break
                if self.error is None:
                    _t, image = item   # the frame's measured time is in the time series
                    frame = av.VideoFrame.from_ndarray(image, format="rgb24")
                    frame.pts = self.count
                    frame.time_base = time_base
                    self._mux(container, stream.encode(frame))
                    self.count += 1
            self._mux(container, stream.encode())
            container.close()
            container = None
        except BaseException as exc:  # reported to the control thread at finish()
            self.error = exc
            # keep draining so the producer never blocks
            while True:
                try:
                    if self.frames.get(timeout=0.5) is None:
                        break
                except queue.Empty:
                    break
        finally:
            if container is not None:
                try:
                    container.close()
                except Exception:
                    pass

    @staticmethod
    def _mux(container, packets) -> None:
        """Each packet lasts one frame (so the last frame counts in the video's duration)."""
        for packet in packets:
            packet.duration = 1
            container.mux(packet)


@dataclass
class RecordedEpisode:
    files: dict[str, str]                       # `EpisodeFiles.to_dict()`: name -> path relative to campaign dir
    video_frames: dict[str, int] = field(default_factory=dict)
    digests: dict[str, tuple[int, str]] = field(default_factory=dict)  # rel path -> (bytes, sha256)
    root: Path | None = None                    # the campaign directory the paths are relative to


class EpisodeRecorder:
    """Records one episode. Call `frame()` per control step, then `finish()` or `discard()`.

    Camera frames are taken at each camera's own fps (a camera at 15 fps under a 30 Hz loop
    takes every second step); `wants_images(step)` tells the loop when a frame is due, so a
    simulator renders only what is recorded.
    """

    def __init__(self, campaign_dir: Path, episode_id: str, cameras: dict[str, CameraSpec],
                 control_fps: int, steps: int, realtime: bool = False,
                 camera_poses: dict[str, dict] | None = None):
        self.campaign_dir = Path(campaign_dir)
        self.episode_id = episode_id
        self.cameras = cameras
        self.control_fps = control_fps
        self.steps = steps
        self.video_dir = self.campaign_dir / "videos" / episode_id
        self.series_dir = self.campaign_dir / "episodes" / episode_id
        self.video_dir.mkdir(parents=True, exist_ok=True)
        self.series_dir.mkdir(parents=True, exist_ok=True)
        self._due = {name: self._frame_steps(spec.fps) for name, spec in cameras.items()}
        # Live cameras: the cheapest H.264 preset, so encoding leaves CPU to the control loop
        # and the policy; simulation has time to spare and gets smaller files.
        preset = "ultrafast" if realtime else "veryfast"
        self._writers = {name: _VideoWriter(self.video_dir / f"{name}.mp4{PARTIAL}", spec, preset,
                                            video_rate(spec.fps, control_fps))
                         for name, spec in cameras.items()}
        for writer in self._writers.values():
            writer.start()
        self._t: list[float] = []
        self._state: list[list[float]] = []
        self._action: list[list[float]] = []
        self._sent: list[list[float]] = []
        self._frame_t: dict[str, list[float]] = {name: [] for name in cameras}
        self._frame_age: dict[str, list[float]] = {name: [] for name in cameras}
        self._frame_repeat: dict[str, list[float]] = {name: [] for name in cameras}
        self._last_image: dict[str, np.ndarray] = {}
        self._next_slot: dict[str, int] = {name: 0 for name in cameras}   # the next step index expected
        self.enqueue_wait_s = 0.0
        self._stills: dict[str, str] = {}     # camera -> relative path of its start still
        self.camera_poses = camera_poses or {}   # fixed cameras' poses (judge zoom and guide)

    def _frame_steps(self, camera_fps: int) -> set[int]:
        """Control steps at which a camera at `camera_fps` takes a frame."""
        if camera_fps >= self.control_fps:
            return set(range(self.steps))
        n_frames = round(self.steps * camera_fps / self.control_fps)
        return {int(i * self.control_fps / camera_fps) for i in range(n_frames)}

    def wants_images(self, step: int) -> bool:
        return any(step in due for due in self._due.values())

    def frame(self, step: int, t: float, observation: Observation, action: Action,
              sent: Action | None = None, frames: Mapping[str, tuple[float, bool]] | None = None) -> None:
        """One control step: `action` the policy's, `sent` what the arm was sent (default: the same),
        `frames` each camera's (frame age ms, repeated) when the rig reports them."""
        self._t.append(t)
        for name in self.cameras:
            age, repeated = (frames or {}).get(name, (np.nan, np.nan))
            self._frame_age[name].append(float(age))
            self._frame_repeat[name].append(float(repeated))
        self._state.append([float(observation.get(k, np.nan)) for k in STATE_KEYS])
        self._action.append([float(action.get(k, np.nan)) for k in STATE_KEYS])
        sent = action if sent is None else sent
        self._sent.append([float(sent.get(k, np.nan)) for k in STATE_KEYS])
        for name, writer in self._writers.items():
            if step > self._next_slot[name]:
                self._hold(name, step)      # slots lost to an overrun: the last image held
            self._next_slot[name] = step + 1
            if step in self._due[name]:
                image = observation.get(name)
                if image is None:
                    raise RuntimeFailure(f"camera {name!r} delivered no frame at step {step}")
                if writer.error is not None:
                    raise RuntimeFailure(f"video writer for camera {name!r} failed: {writer.error}")
                started = time.perf_counter()
                image = np.ascontiguousarray(image)
                writer.frames.put((t, image))
                self._last_image[name] = image
                self.enqueue_wait_s += time.perf_counter() - started
                self._frame_t[name].append(t)

    def _hold(self, name: str, until_step: int) -> None:
        """Hold camera `name`'s last image over its due slots before `until_step` that no step
        recorded (a real rig's step lost to an overrun), at each slot's nominal time."""
        image = self._last_image.get(name)
        if image is None:
            return
        period = 1.0 / self.control_fps
        for slot in sorted(s for s in self._due[name] if self._next_slot[name] <= s < until_step):
            self._writers[name].frames.put((slot * period, image))
            self._frame_t[name].append(slot * period)
        self._next_slot[name] = max(self._next_slot[name], until_step)

    def pad_videos(self) -> None:
        """At the end of an episode: hold each camera's last image over the due slots after the
        last step that ran. With the slots lost mid-episode (held in `frame`) every episode's
        videos have the planned frame count and length whatever the policy's speed (a shorter
        video would tell a judge which policy ran). The time series keeps only the steps that ran."""
        for name in self._writers:
            self._hold(name, self.steps)

    def still(self, observation: Observation) -> None:
        """Keep each camera's image of the start state (before the episode's first step) as
        `videos/<episode id>/<camera>.start.jpg`: on a real arm, what the operator set up."""
        import cv2

        for name in self.cameras:
            image = observation.get(name)
            if image is None:
                continue
            ok, jpeg = cv2.imencode(".jpg", cv2.cvtColor(np.asarray(image), cv2.COLOR_RGB2BGR),
                                    [cv2.IMWRITE_JPEG_QUALITY, 92])
            if not ok:
                raise RuntimeFailure(f"camera {name!r}: the start still could not be encoded")
            partial = self.video_dir / f"{name}.start{PARTIAL}.jpg"
            partial.write_bytes(jpeg.tobytes())
            final = self.video_dir / f"{name}.start.jpg"
            publish(partial, final)
            self._stills[name] = str(final.relative_to(self.campaign_dir))

    def finish(self) -> RecordedEpisode:
        """Flush encoders, publish every file atomically, return their relative paths."""
        for writer in self._writers.values():
            writer.frames.put(None)
        for writer in self._writers.values():
            writer.join()
        videos: dict[str, str] = {}
        counts: dict[str, int] = {}
        for name, writer in self._writers.items():
            if writer.error is not None:
                raise RuntimeFailure(f"video for camera {name!r} could not be written: {writer.error}")
            final = self.video_dir / f"{name}.mp4"
            publish(writer.path, final)
            videos[name] = str(final.relative_to(self.campaign_dir))
            counts[name] = writer.count
        series = self.series_dir / "timeseries.npz"
        partial = self.series_dir / ("timeseries" + PARTIAL + ".npz")
        # Any: the arrays go in by keyword, beside np.savez's own `allow_pickle: bool`
        per_camera: dict[str, Any] = {
            **{f"frame_t.{k}": np.asarray(v) for k, v in self._frame_t.items()},
            **{f"frame_age_ms.{k}": np.asarray(v) for k, v in self._frame_age.items()},
            **{f"frame_repeat.{k}": np.asarray(v) for k, v in self._frame_repeat.items()}}
        with open(partial, "wb") as handle:
            np.savez(handle, t=np.asarray(self._t), state=np.asarray(self._state),
                     action=np.asarray(self._action), sent_action=np.asarray(self._sent),
                     keys=np.asarray(STATE_KEYS), **per_camera)
        publish(partial, series)
        poses_file = None
        if self.camera_poses:
            import json

            poses = self.video_dir / "cameras.json"
            partial = self.video_dir / ("cameras" + PARTIAL + ".json")
            partial.write_text(json.dumps(self.camera_poses, indent=1) + "\n")
            publish(partial, poses)
            poses_file = str(poses.relative_to(self.campaign_dir))
        files = EpisodeFiles(videos, str(series.relative_to(self.campaign_dir)), dict(self._stills),
                             poses_file).to_dict()
        digests = {rel: file_digest(self.campaign_dir / rel) for rel in files.values()}
        return RecordedEpisode(files=files, video_frames=counts, digests=digests, root=self.campaign_dir)

    def discard(self) -> None:
        """Stop the writers and delete everything of this episode (aborted attempt)."""
        for writer in self._writers.values():
            writer.error = writer.error or RuntimeFailure("discarded")
            try:
                writer.frames.put_nowait(None)
            except queue.Full:
                pass
        for writer in self._writers.values():
            writer.join(timeout=10)
        remove_episode_files(self.campaign_dir, self.episode_id)


def remove_episode_files(campaign_dir: Path, episode_id: str) -> None:
    """Delete the videos and time series of an episode that did not complete."""
    for sub in ("videos", "episodes"):
        shutil.rmtree(Path(campaign_dir) / sub / episode_id, ignore_errors=True)


def remove_orphans(campaign_dir: Path, keep: set[str]) -> list[str]:
    """Delete episode folders not backed by a committed episode (left by a crash)."""
    removed = []
    for sub in ("videos", "episodes"):
        root = Path(campaign_dir) / sub
        if not root.is_dir():
            continue
        for child in root.iterdir():
            if child.name not in keep:
                shutil.rmtree(child, ignore_errors=True)
                removed.append(child.name)
    return sorted(set(removed))
