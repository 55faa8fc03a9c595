"""Export a campaign as a LeRobotDataset (v3) with its evaluation, and push it to the Hub.

One LeRobot episode per completed trial, in run order, written through LeRobot's own
`LeRobotDataset.create` / `add_frame` / `save_episode` / `finalize`:

- `observation.state`, `action`: float32 (6,), named by the SO-101 joint keys, from the
  episode's `timeseries.npz` (one row per control step);
- `observation.images.<camera>`: video features decoded from the recorded MP4s (PyAV). The
  dataset runs at the protocol's control fps; a camera recorded at a lower fps contributes,
  at each control step, the latest frame taken at or before that step (its recorded frame
  times say when), so every step has an image and none is taken from the future;
- per-frame columns for the trial, shape (1,) int64 (LeRobot features cannot be strings):
  `ab.policy` and `ab.mark` (indices into the lists in `meta/ab_evaluation.json`),
  `ab.success` (1 success, 0 failure, -1 no definite label) and `ab.failure_mode`
  (index into the protocol's failure modes, -1 none);
- the task string of the protocol.

Beside LeRobot's files the export writes the evaluation: `meta/ab_trials.parquet` (one row per
episode: trial slot, layout mark, repeat, policy, order position, every judge's label, physics,
timing), `meta/ab_evaluation.json` (encodings, label source, campaign identity),
`meta/protocol.yaml` + `meta/layout.yaml` (the frozen texts; their SHA-256 in the JSON and the
card), `meta/rig.yaml`, `meta/report.json` (`orchestrator.report/1`) and the dataset card
`README.md` (results, paired 2x2, McNemar, Wilson, protocol, how to load).

Safety rules: nothing is exported while a run holds the campaign lock; an unblinding export
before every episode has a definite label (or of an incomplete campaign) needs `--force`;
the dataset is written into a temporary directory beside the root and swapped in with
renames, so the root always holds a complete export (the previous one or the new one);
an existing root that is not an export of this tool is never replaced. `--push` uses
LeRobot's `push_to_hub`; the token comes from the usual Hugging Face login or `HF_TOKEN`
and is never printed, logged or written.

LeRobot (and torch) are imported only inside `export_campaign`/`push_dataset`, never at
module import: judges' core installs import this module's siblings without torch.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import re
import secrets
import shutil
import time
from collections import Counter
from contextlib import contextmanager, redirect_stderr
from dataclasses import dataclass, field, is_dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from .durable import fsync_dir
from .errors import BadInput, OrchestratorError, RuntimeFailure
from .rigs.profile import STATE_KEYS, RigProfile, parse_rig_text
from .store import LOCK_NAME, PHYSICS_JUDGE, CampaignStore, TrialRow

EXPORT_SCHEMA = "orchestrator.export/1"
CONSENSUS = "consensus"

F_STATE = "observation.state"
F_ACTION = "action"
F_IMAGE = "observation.images.{camera}"
F_POLICY = "ab.policy"
F_MARK = "ab.mark"
F_SUCCESS = "ab.success"
F_FAILURE = "ab.failure_mode"

EVALUATION_FILE = "meta/ab_evaluation.json"
TRIALS_FILE = "meta/ab_trials.parquet"
PROTOCOL_FILE = "meta/protocol.yaml"
LAYOUT_FILE = "meta/layout.yaml"
RIG_FILE = "meta/rig.yaml"
REPORT_FILE = "meta/report.json"
CARD_FILE = "README.md"
LICENSE = "apache-2.0"
CARD_TAGS = ["so101", "ab-test", "policy-evaluation", "so101-ab-orchestrator"]

# Hugging Face repo ids: `namespace/name`, each 1-96 of letters, digits, `-`, `_`, `.`,
# not starting or ending with `-` or `.`, without `--` or `..` (huggingface_hub's rules).
_REPO_PART = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9_])?$")


# ------------------------------------------------------------------ checks


def check_repo_id(repo_id: str) -> str:
    """`USER/NAME` with the characters the Hub accepts; `BadInput` (one line) otherwise."""
    parts = repo_id.split("/")
    bad = None
    if len(parts) != 2:
        bad = "must be USER/NAME (one slash)"
    elif not all(_REPO_PART.match(p) for p in parts):
        bad = ("each part must be 1-96 letters, digits, '-', '_' or '.', not starting or ending "
               "with '-' or '.'")
    elif any("--" in p or ".." in p for p in parts) or parts[1].endswith(".git"):
        bad = "'--', '..' and a trailing '.git' are not allowed"
    if bad:
        raise BadInput(f"--repo-id {repo_id!r}: invalid Hugging Face repo id: {bad}")
    return repo_id


def default_root(repo_id: str) -> Path:
    """Where LeRobot keeps a local dataset: `$HF_LEROBOT_HOME/<repo_id>` (default
    `$HF_HOME/lerobot`, `~/.cache/huggingface/lerobot`), computed without importing LeRobot."""
    home = os.environ.get("HF_LEROBOT_HOME")
    if not home:
        hf_home = os.environ.get("HF_HOME") or os.path.join(
            os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache"), "huggingface")
        home = os.path.join(hf_home, "lerobot")
    return Path(home).expanduser() / repo_id


def check_not_running(campaign_dir: Path) -> None:
    """Refuse a campaign whose run lock is held: try it with timeout 0, release at once."""
    from filelock import FileLock, Timeout

    lock_path = Path(campaign_dir) / LOCK_NAME
    lock = FileLock(str(lock_path), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise BadInput(f"{campaign_dir}: the campaign is still running (lock {LOCK_NAME} is held by "
                       "`orchestrator run`); export it when the run has ended") from None
    except OSError as exc:
        # read-only campaign directory: a lock cannot be taken, so nobody can be running it there
        if not lock_path.exists():
            return
        raise RuntimeFailure(f"{lock_path}: cannot check the run lock: {exc.strerror or exc}") from None
    else:
        lock.release()


def check_root(root: Path) -> Path:
    """Validate the dataset root without writing anything; return it absolute.

    The root may not exist yet (its nearest existing ancestor must be a writable directory);
    if it exists it must be empty or an earlier export of this tool (never replaced otherwise).
    """
    root = Path(os.path.abspath(Path(root).expanduser()))
    if root.parent == root:
        raise BadInput(f"--root {root}: cannot export to a filesystem root")
    if root.exists() or root.is_symlink():
        if root.is_symlink() or not root.is_dir():
            raise BadInput(f"--root {root}: exists and is not a directory")
        if any(root.iterdir()) and not (root / EVALUATION_FILE).is_file():
            what = "a LeRobot dataset not exported by this tool" if (root / "meta" / "info.json").exists() \
                else "files that are not an export of this tool"
            raise BadInput(f"--root {root}: holds {what}; refusing to replace it (choose another --root)")
    ancestor = root.parent
    while not ancestor.exists():
        if ancestor.is_symlink():
            raise BadInput(f"--root {root}: {ancestor} is a broken symlink")
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise BadInput(f"--root {root}: not writable ({ancestor} is not a directory)")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise BadInput(f"--root {root}: not writable (no write permission on {ancestor})")
    return root


def check_lerobot_installed() -> None:
    """The export writes through LeRobot, an optional extra (it brings torch)."""
    import importlib.util

    if importlib.util.find_spec("lerobot") is None:
        raise RuntimeFailure("export needs LeRobot, which is not installed here: install the lerobot "
                             "extra (`uv sync --extra lerobot` or `pip install '.[lerobot]'`)")


def check_hub_token() -> None:
    """Refuse `--push` without a token (login or HF_TOKEN). The token itself is never shown."""
    try:
        from huggingface_hub import get_token
    except ImportError:
        raise BadInput("--push needs huggingface_hub: install the lerobot extra "
                       "(uv sync --extra lerobot)") from None
    if not get_token():
        raise BadInput("--push: no Hugging Face token found; log in with `hf auth login` "
                       "(or set HF_TOKEN) and run the export again")


# ------------------------------------------------------------------ labels


@dataclass(frozen=True)
class Labels:
    """The labels that count for the export: episode id -> (success or None, failure mode)."""

    requested: str                     # what the user asked for (a name, physics, consensus)
    source: str                        # human-readable: whose labels these are
    by_episode: dict[str, tuple[bool | None, str | None]]


def campaign_labels(store: CampaignStore, judge: str | None) -> Labels:
    """The chosen labels, the same ones `orchestrator report` counts.

    Uses `orchestrator.outcomes.outcomes_from_store` (the report's own reading of the store)
    when it is installed, so the export and the report can never disagree; otherwise the
    fallback below: judge NAME -> their latest label (unsure = no label); physics -> the
    physical test; consensus (default) -> majority of the human judges' latest labels (ties
    and unsure -> no label), or physics in a simulated campaign nobody has judged.
    """
    try:
        from .outcomes import outcomes_from_store
    except ImportError:
        return _fallback_labels(store, judge)
    data = outcomes_from_store(store, judge)
    by_episode = {o.episode_id: (o.success, o.failure_mode) for o in data.outcomes
                  if o.episode_id and o.state == "done"}
    return Labels(requested=judge or CONSENSUS, source=data.label_source, by_episode=by_episode)


def _fallback_labels(store: CampaignStore, judge: str | None) -> Labels:
    requested = judge or CONSENSUS
    episodes = [e["id"] for e in store.episodes()]
    judges = store.judges()
    humans = [j for j in judges if j != PHYSICS_JUDGE]
    out: dict[str, tuple[bool | None, str | None]] = {}
    if requested == CONSENSUS and not humans and store.campaign()["simulated"]:
        requested_mode, source = PHYSICS_JUDGE, "physics (simulated campaign, no human judge yet)"
    elif requested == CONSENSUS:
        requested_mode, source = CONSENSUS, f"consensus of human judges ({', '.join(humans) or 'none yet'})"
    else:
        if requested != PHYSICS_JUDGE and requested not in judges:
            raise BadInput(f"{store.directory}: judge {requested!r} has no labels in this campaign "
                           f"(judges with labels: {', '.join(judges) or 'none'}; or use physics / consensus)")
        requested_mode, source = requested, requested
    if requested_mode == CONSENSUS:
        latest = {h: store.latest_labels(h) for h in humans}
        for ep in episodes:
            votes = [latest[h][ep] for h in humans if ep in latest[h]]
            counts = Counter(v.label for v in votes)
            verdict = next((lab for lab in ("success", "failure") if votes and counts[lab] * 2 > len(votes)), None)
            mode = None
            if verdict == "failure":
                modes = Counter(v.failure_mode for v in votes if v.label == "failure" and v.failure_mode)
                mode = sorted(modes.items(), key=lambda kv: (-kv[1], kv[0]))[0][0] if modes else None
            out[ep] = (None if verdict is None else verdict == "success", mode)
    else:
        latest_one = store.latest_labels(requested_mode)
        for ep in episodes:
            j = latest_one.get(ep)
            if j is None or j.label not in ("success", "failure"):
                out[ep] = (None, None)
            else:
                out[ep] = (j.label == "success", j.failure_mode if j.label == "failure" else None)
    return Labels(requested=requested, source=source, by_episode=out)


# ------------------------------------------------------------------ the plan


@dataclass
class EpisodePlan:
    index: int                         # episode_index in the dataset
    trial: TrialRow
    record: dict[str, Any]             # the store's episode row
    success: bool | None
    failure_mode: str | None


@dataclass
class ExportPlan:
    campaign_dir: Path
    repo_id: str
    root: Path
    campaign: dict[str, Any]
    protocol: Any                      # LoadedProtocol
    rig: RigProfile | None
    labels: Labels
    episodes: list[EpisodePlan]
    cameras: list[str]
    camera_shapes: dict[str, tuple[int, int]]    # camera -> (height, width)
    policies: list[str]
    marks: list[str]
    failure_modes: list[str]
    judges: list[str]
    trials: list[TrialRow]
    attempts: list[dict[str, Any]]
    include_aborted: bool
    forced: list[str] = field(default_factory=list)   # refusals overridden by --force

    @property
    def fps(self) -> int:
        return int(self.protocol.protocol.episode.fps)

    @property
    def task(self) -> str:
        return self.protocol.protocol.task or self.protocol.protocol.name

    @property
    def robot_type(self) -> str:
        return self.rig.robot.type if self.rig is not None else "so101_follower"

    def features(self) -> dict[str, dict[str, Any]]:
        joints = list(STATE_KEYS)
        features: dict[str, dict[str, Any]] = {
            F_STATE: {"dtype": "float32", "shape": (len(joints),), "names": joints},
            F_ACTION: {"dtype": "float32", "shape": (len(joints),), "names": joints},
        }
        for camera in self.cameras:
            height, width = self.camera_shapes[camera]
            features[F_IMAGE.format(camera=camera)] = {
                "dtype": "video", "shape": (height, width, 3), "names": ["height", "width", "channels"]}
        for key in (F_POLICY, F_MARK, F_SUCCESS, F_FAILURE):
            features[key] = {"dtype": "int64", "shape": (1,), "names": None}
        return features


def plan_export(store: CampaignStore, *, repo_id: str, root: Path, judge: str | None = None,
                include_aborted: bool = False, force: bool = False) -> ExportPlan:
    """Read everything the export needs and apply the refusals; writes nothing."""
    from .campaign import frozen_protocol

    campaign = store.campaign()
    directory = store.directory
    protocol = frozen_protocol(store)
    try:
        rig = parse_rig_text(campaign["rig_text"])
    except Exception:  # an unreadable rig text only costs the robot type
        rig = None
    trials = store.trials()
    records = {e["id"]: e for e in store.episodes()}
    labels = campaign_labels(store, judge)
    forced: list[str] = []

    done = [t for t in trials if t.state == "done" and t.episode_id in records]
    if not done:
        raise BadInput(f"{directory}: no completed episode to export yet (run the campaign first)")
    complete = len(done) == len(trials) or bool(campaign.get("finished_at"))
    if not complete:
        why = (f"{directory}: the campaign is incomplete ({len(done)} of {len(trials)} trials done); "
               "resume it with `orchestrator run`, or pass --force to export the done trials")
        if not force:
            raise BadInput(why)
        forced.append(f"incomplete campaign: {len(done)} of {len(trials)} trials done")

    unlabelled = [t for t in done if labels.by_episode.get(t.episode_id, (None, None))[0] is None]
    if unlabelled:
        humans = [j for j in store.judges() if j != PHYSICS_JUDGE]
        hint = ("judge them blind first (`orchestrator judge CAMPAIGN --judge NAME`), or "
                if not humans or labels.requested != PHYSICS_JUDGE else "")
        why = (f"{directory}: {len(unlabelled)} of {len(done)} episodes have no definite label under "
               f"{labels.source} (unjudged, unsure or a tie); exporting reveals which policy ran: "
               f"{hint}pass --force to export them with {F_SUCCESS} = -1")
        if not force:
            raise BadInput(why)
        forced.append(f"{len(unlabelled)} of {len(done)} episodes without a definite label "
                      f"({F_SUCCESS} = -1)")

    # a consensus of human judges: as many judges as the protocol pre-registered must have
    # labelled every episode before the export unblinds the campaign
    humans = [j for j in store.judges() if j != PHYSICS_JUDGE]
    wanted = protocol.protocol.judging.judges
    if labels.requested == CONSENSUS and humans and wanted > 1:
        done_ids = {t.episode_id for t in done}
        complete_judges = [h for h in humans if done_ids <= {ep for ep, j in store.latest_labels(h).items()
                                                              if j.label in ("success", "failure", "unsure")}]
        if len(complete_judges) < wanted:
            why = (f"{directory}: the protocol asks for {wanted} judges per episode; "
                   f"{len(complete_judges)} ({', '.join(complete_judges) or 'none'}) have judged every episode; "
                   "exporting reveals which policy ran, so let the others judge first (`orchestrator judge "
                   "CAMPAIGN --judge NAME`), or pass --force")
            if not force:
                raise BadInput(why)
            forced.append(f"{len(complete_judges)} of the {wanted} pre-registered judges judged every episode")

    # every file present and intact (the recorder's digests), before anything is written
    cameras: list[str] | None = None
    for t in done:
        record = records[t.episode_id]
        if cameras is None:
            cameras = list(record["cameras"])
        elif list(record["cameras"]) != cameras:
            raise RuntimeFailure(f"{directory}: episode {t.episode_id} (trial {t.slot + 1}) has cameras "
                                 f"{record['cameras']}, others {cameras}; cannot export mixed camera sets")
        files = record["files"]
        missing = [name for name in [*cameras, "timeseries"] if name not in files]
        if missing:
            raise RuntimeFailure(f"{directory}: episode {t.episode_id} (trial {t.slot + 1}) lists no file "
                                 f"for {', '.join(missing)}")
        digests = record.get("digests") or {}
        if digests:
            from .recording import damaged_files

            bad = damaged_files(directory, digests)
        else:
            bad = [files[name] for name in [*cameras, "timeseries"] if not (directory / files[name]).is_file()]
        if bad:
            raise RuntimeFailure(f"{directory}: episode {t.episode_id} (trial {t.slot + 1}): "
                                 f"{', '.join(bad)} missing or damaged; cannot export it")
    assert cameras is not None
    shapes = {camera: _video_shape(directory / records[done[0].episode_id]["files"][camera])
              for camera in cameras}

    policies = list(protocol.protocol.policies)
    marks = [m.id for m in protocol.layout.marks]
    failure_modes = list(protocol.protocol.judging.failure_modes)
    all_judges = store.judges()
    judge_labels = {j: store.latest_labels(j) for j in all_judges}
    extra_modes = sorted({lab.failure_mode for latest in judge_labels.values() for lab in latest.values()
                          if lab.failure_mode and lab.failure_mode not in failure_modes}
                         | {m for _, m in labels.by_episode.values() if m and m not in failure_modes})
    failure_modes += extra_modes

    episodes = [EpisodePlan(index=i, trial=t, record=records[t.episode_id],
                            success=labels.by_episode.get(t.episode_id, (None, None))[0],
                            failure_mode=labels.by_episode.get(t.episode_id, (None, None))[1])
                for i, t in enumerate(done)]
    return ExportPlan(campaign_dir=directory, repo_id=repo_id, root=root, campaign=campaign,
                      protocol=protocol, rig=rig, labels=labels, episodes=episodes, cameras=cameras,
                      camera_shapes=shapes, policies=policies, marks=marks, failure_modes=failure_modes,
                      judges=all_judges, trials=trials, attempts=store.attempts(),
                      include_aborted=include_aborted, forced=forced)


def _video_shape(path: Path) -> tuple[int, int]:
    import av

    try:
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            return int(stream.codec_context.height), int(stream.codec_context.width)
    except (OSError, IndexError, av.error.FFmpegError) as exc:
        raise RuntimeFailure(f"{path}: cannot read the video: {exc}") from None


# ------------------------------------------------------------------ frames


def _decoded(path: Path) -> Iterator[np.ndarray]:
    """RGB frames of the first video stream, in order."""
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        for frame in container.decode(stream):
            yield frame.to_ndarray(format="rgb24")


def frame_indices(step_t: np.ndarray, frame_t: np.ndarray | None, n_video: int | None) -> np.ndarray:
    """For each control step, the index of the camera frame to show: the latest frame taken at
    or before the step (a slower camera's frame is held until its next one). Without recorded
    frame times the frames are spread uniformly over the steps."""
    steps = len(step_t)
    if frame_t is not None and len(frame_t):
        index = np.searchsorted(np.asarray(frame_t, dtype=float), np.asarray(step_t, dtype=float) + 1e-9,
                                side="right") - 1
        return np.clip(index, 0, None)
    n = n_video or steps
    return np.floor(np.arange(steps) * n / max(steps, 1)).astype(int)


def _held_frames(path: Path, indices: np.ndarray, shape: tuple[int, int], where: str) -> Iterator[np.ndarray]:
    """Yield one image per control step, advancing through the decoded video as `indices` asks
    (holding the last frame if the video is shorter than its recorded frame times say)."""
    frames = _decoded(path)
    current: np.ndarray | None = None
    position = -1
    try:
        for target in indices:
            while position < target:
                nxt = next(frames, None)
                if nxt is None:
                    break
                current, position = nxt, position + 1
            if current is None:
                raise RuntimeFailure(f"{where}: the video has no frame")
            if current.shape[:2] != shape:
                raise RuntimeFailure(f"{where}: frames are {current.shape[1]}x{current.shape[0]}, the "
                                     f"dataset's {shape[1]}x{shape[0]} (camera changed between episodes)")
            yield current
    finally:
        frames.close()


def _series(plan: ExportPlan, ep: EpisodePlan) -> dict[str, np.ndarray]:
    path = plan.campaign_dir / ep.record["files"]["timeseries"]
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
    except (OSError, ValueError) as exc:
        raise RuntimeFailure(f"{path}: cannot read the time series: {exc}") from None
    keys = [str(k) for k in data.get("keys", STATE_KEYS)]
    order = [keys.index(k) if k in keys else None for k in STATE_KEYS]
    for name in ("state", "action"):
        values = np.asarray(data[name], dtype=np.float64).reshape(len(data["t"]), -1)
        data[name] = np.stack([values[:, i] if i is not None else np.full(len(values), np.nan)
                               for i in order], axis=1).astype(np.float32)
    steps = len(data["t"])
    if steps != int(ep.record["frames"]):
        raise RuntimeFailure(f"{path}: {steps} control steps recorded, the store says {ep.record['frames']}")
    return data


# ------------------------------------------------------------------ writing


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


def _write_dataset(plan: ExportPlan, out: Path, say: Callable[[str], None]) -> dict[str, Any]:
    """LeRobot's own writer: create, add_frame per control step, save_episode, finalize."""
    with _native_stderr_captured():
        return _write_episodes(plan, out, say)


def _write_episodes(plan: ExportPlan, out: Path, say: Callable[[str], None]) -> dict[str, Any]:
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    # streaming encoding: LeRobot encodes each camera on its own thread as frames arrive,
    # instead of staging every frame as a PNG and encoding afterwards (measured 2x faster on
    # 320x240 x 360-frame episodes with two cameras)
    dataset = LeRobotDataset.create(plan.repo_id, fps=plan.fps, features=plan.features(), root=out,
                                    robot_type=plan.robot_type, use_videos=True, video_backend="pyav",
                                    streaming_encoding=True)
    policy_index = {p: i for i, p in enumerate(plan.policies)}
    mark_index = {m: i for i, m in enumerate(plan.marks)}
    mode_index = {m: i for i, m in enumerate(plan.failure_modes)}
    started = time.monotonic()
    try:
        for ep in plan.episodes:
            series = _series(plan, ep)
            steps = len(series["t"])
            streams = {}
            for camera in plan.cameras:
                frame_t = series.get(f"frame_t.{camera}")
                n_video = (ep.record.get("timing") or {}).get("video_frames", {}).get(camera)
                indices = frame_indices(series["t"], frame_t, n_video)
                where = f"{plan.campaign_dir / ep.record['files'][camera]}"
                streams[camera] = _held_frames(plan.campaign_dir / ep.record["files"][camera], indices,
                                               plan.camera_shapes[camera], where)
            columns = {
                F_POLICY: np.array([policy_index[ep.trial.policy]], dtype=np.int64),
                F_MARK: np.array([mark_index.get(ep.trial.mark_id, -1)], dtype=np.int64),
                F_SUCCESS: np.array([-1 if ep.success is None else int(ep.success)], dtype=np.int64),
                F_FAILURE: np.array([mode_index.get(ep.failure_mode, -1) if ep.failure_mode else -1],
                                    dtype=np.int64),
            }
            try:
                for step in range(steps):
                    frame: dict[str, Any] = {
                        F_STATE: series["state"][step], F_ACTION: series["action"][step],
                        "task": plan.task, **{k: v.copy() for k, v in columns.items()}}
                    for camera, stream in streams.items():
                        frame[F_IMAGE.format(camera=camera)] = next(stream)
                    dataset.add_frame(frame)
            finally:
                for stream in streams.values():
                    stream.close()
            dataset.save_episode()
            say(f"  episode {ep.index + 1}/{len(plan.episodes)}: trial {ep.trial.slot + 1}, mark "
                f"{ep.trial.mark_id}, {steps} frames ({time.monotonic() - started:.0f} s)")
    except BaseException:
        if dataset.has_pending_frames():  # stop the streaming encoders of the unfinished episode
            try:
                dataset.clear_episode_buffer()
            except Exception:
                pass
        raise
    finally:
        dataset.finalize()
    images = out / "images"  # LeRobot's per-frame staging folders, empty once encoded
    if images.is_dir() and not any(p.is_file() for p in images.rglob("*")):
        shutil.rmtree(images)
    return info_of(out)


def trial_rows(plan: ExportPlan, judge_labels: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """`meta/ab_trials.parquet`: one row per exported episode (+ aborted attempts if asked)."""
    marks = {m.id: m for m in plan.protocol.layout.marks}
    aborted_by_slot = Counter(a["slot"] for a in plan.attempts if a["status"] == "aborted")
    rows = []
    for ep in plan.episodes:
        t, rec = ep.trial, ep.record
        mark = marks.get(t.mark_id)
        row: dict[str, Any] = {
            "episode_index": ep.index, "exported": True, "status": "done", "episode_id": t.episode_id,
            "slot": t.slot, "trial": t.slot + 1, "unit": t.unit, "mark_id": t.mark_id,
            "stratum": mark.stratum if mark else None, "mark_x_m": mark.x if mark else None,
            "mark_y_m": mark.y if mark else None, "repeat": t.repeat, "position": t.position,
            "policy": t.policy, "policy_index": plan.policies.index(t.policy), "seed": t.seed,
            "attempts": t.attempts, "aborted_attempts": aborted_by_slot.get(t.slot, 0),
            "reason": None, "frames": int(rec["frames"]), "duration_s": float(rec["duration_s"]),
            "success": ep.success, "failure_mode": ep.failure_mode, "label_source": plan.labels.source,
            "physics_success": None if rec.get("physics_success") is None else bool(rec["physics_success"]),
            "max_lift_m": rec.get("max_lift_m"), "time_to_success_s": rec.get("time_to_success_s"),
            "safety_events": json.dumps(list(rec.get("safety_events") or [])),
            "timing_json": json.dumps(rec.get("timing") or {}, sort_keys=True),
        }
        for key, value in (rec.get("timing") or {}).items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                row[f"timing.{key}"] = float(value)
            elif isinstance(value, dict):
                for sub, v in value.items():
                    if isinstance(v, (int, float)) and not isinstance(v, bool):
                        row[f"timing.{key}.{sub}"] = float(v)
        for judge, latest in judge_labels.items():
            lab = latest.get(t.episode_id)
            row[f"label.{judge}"] = lab.label if lab else None
            row[f"failure_mode.{judge}"] = lab.failure_mode if lab else None
        rows.append(row)
    if plan.include_aborted:
        trial_by_slot = {t.slot: t for t in plan.trials}
        for attempt in plan.attempts:
            if attempt["status"] != "aborted":
                continue
            t = trial_by_slot[attempt["slot"]]
            mark = marks.get(t.mark_id)
            rows.append({
                "episode_index": -1, "exported": False, "status": "aborted",
                "episode_id": attempt["episode_id"], "slot": t.slot, "trial": t.slot + 1, "unit": t.unit,
                "mark_id": t.mark_id, "stratum": mark.stratum if mark else None,
                "mark_x_m": mark.x if mark else None, "mark_y_m": mark.y if mark else None,
                "repeat": t.repeat, "position": t.position, "policy": t.policy,
                "policy_index": plan.policies.index(t.policy), "seed": t.seed, "attempts": t.attempts,
                "aborted_attempts": aborted_by_slot.get(t.slot, 0), "reason": attempt.get("reason"),
                "label_source": plan.labels.source,
                "timing_json": json.dumps({"started_at": attempt.get("started_at"),
                                           "ended_at": attempt.get("ended_at")}),
            })
    return rows


def _write_table(rows: list[dict[str, Any]], path: Path) -> None:
    import pandas as pd

    frame = pd.DataFrame(rows)
    for column in ("success", "physics_success", "exported"):
        if column in frame:
            frame[column] = frame[column].astype("boolean")
    frame.to_parquet(path, index=False)


def evaluation_summary(plan: ExportPlan, report: dict[str, Any], report_source: str) -> dict[str, Any]:
    """`meta/ab_evaluation.json`: identity, label source, the encodings of the int columns."""
    import hashlib

    c = plan.campaign
    protocol_sha = hashlib.sha256(c["protocol_text"].encode("utf-8")).hexdigest()
    if protocol_sha != c["protocol_sha256"]:
        raise RuntimeFailure(f"{plan.campaign_dir}: the stored protocol text does not match its frozen "
                             f"SHA-256 ({c['protocol_sha256'][:12]}); the campaign store was altered")
    done = sum(1 for t in plan.trials if t.state == "done")
    return {
        "schema": EXPORT_SCHEMA,
        "tool": "so101-ab-orchestrator",
        "exported_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "repo_id": plan.repo_id,
        "campaign": {
            "id": c["id"], "name": c["name"], "simulated": bool(c["simulated"]),
            "created_at": c["created_at"], "finished_at": c.get("finished_at"),
            "stop_reason": c.get("stop_reason"), "trials": len(plan.trials), "done": done,
            "aborted_attempts": sum(1 for a in plan.attempts if a["status"] == "aborted"),
            "protocol_sha256": c["protocol_sha256"], "layout_sha256": c["layout_sha256"],
        },
        "episodes": len(plan.episodes),
        "fps": plan.fps,
        "task": plan.task,
        "cameras": {cam: {"height": h, "width": w,
                          "recorded_fps": (plan.rig.cameras[cam].fps if plan.rig and cam in plan.rig.cameras
                                           else None)}
                    for cam, (h, w) in plan.camera_shapes.items()},
        "labels": {"judge": plan.labels.requested, "source": plan.labels.source, "judges": plan.judges,
                   "unlabelled_episodes": sum(1 for e in plan.episodes if e.success is None)},
        "forced": plan.forced,
        "include_aborted": plan.include_aborted,
        "report_source": report_source,
        "features": {
            F_POLICY: {"meaning": "policy label", "values": plan.policies},
            F_MARK: {"meaning": "layout mark id", "values": plan.marks},
            F_SUCCESS: {"meaning": f"success under {plan.labels.source}",
                        "values": {"1": "success", "0": "failure", "-1": "no definite label"}},
            F_FAILURE: {"meaning": "failure mode under the same labels (-1: none)",
                        "values": plan.failure_modes},
        },
        "files": {"trials": TRIALS_FILE, "protocol": PROTOCOL_FILE, "layout": LAYOUT_FILE,
                  "rig": RIG_FILE, "report": REPORT_FILE, "card": CARD_FILE},
    }


# ------------------------------------------------------------------ the report


def report_json(store: CampaignStore, judge: str | None) -> tuple[dict[str, Any], str, str | None]:
    """The campaign's report JSON (`orchestrator.report/1`), the source, and its Markdown.

    The one place the export gets the results: `orchestrator.report` when installed (the
    same numbers `orchestrator report --format json` prints), else a minimal report computed
    here from `orchestrator.stats` with the same keys.
    """
    try:
        from .outcomes import outcomes_from_store
        from .report import build_report, render_json, render_markdown
    except ImportError:
        return _fallback_report(store, judge), "orchestrator.export (fallback)", None
    data = outcomes_from_store(store, judge)
    # a published dataset names the campaign, not where it sat on this machine
    data = replace(data, source=store.directory.name) if is_dataclass(data) else data
    report = build_report(data)
    try:
        markdown = render_markdown(report)
    except Exception:  # the card's full-report section is optional
        markdown = None
    return json.loads(render_json(report)), "orchestrator.report", markdown


def _fallback_report(store: CampaignStore, judge: str | None) -> dict[str, Any]:
    from itertools import combinations

    from . import stats
    from .campaign import frozen_protocol

    labels = _fallback_labels(store, judge)
    c = store.campaign()
    trials = store.trials()
    policies = list(frozen_protocol(store).protocol.policies)
    attempts = store.attempts()
    outcome: dict[tuple[str, int], dict[str, bool]] = {}
    per_policy = {p: [0, 0] for p in policies}
    for t in trials:
        if t.state != "done" or t.episode_id is None:
            continue
        success = labels.by_episode.get(t.episode_id, (None, None))[0]
        if success is None:
            continue
        outcome.setdefault((t.mark_id, t.repeat), {})[t.policy] = success
        per_policy[t.policy][0] += int(success)
        per_policy[t.policy][1] += 1
    out: dict[str, Any] = {
        "schema": "orchestrator.report/1",
        "campaign": {"id": c["id"], "protocol_sha256": c["protocol_sha256"],
                     "complete": all(t.state == "done" for t in trials) or bool(c.get("finished_at")),
                     "trials": len(trials), "aborted": sum(1 for a in attempts if a["status"] == "aborted")},
        "policies": {}, "comparisons": [], "label_source": labels.source,
    }
    for p, (k, n) in per_policy.items():
        interval = stats.wilson(k, n) if n else None
        out["policies"][p] = {"successes": k, "trials": n, "rate": k / n if n else None,
                              "wilson95": [interval.lo, interval.hi] if interval else None}
    comparisons = []
    for a, b in combinations(policies, 2):
        pairs = [(v[a], v[b]) for v in outcome.values() if a in v and b in v]
        table = stats.paired_table([x for x, _ in pairs], [y for _, y in pairs])
        m = stats.mcnemar(table.a_only, table.b_only)
        diff = stats.paired_difference(table) if table.n else None
        comparisons.append({
            "a": a, "b": b, "pairs": table.n,
            "table": {"both": table.both, "a_only": table.a_only, "b_only": table.b_only,
                      "neither": table.neither},
            "mcnemar": {"exact_p": m.exact_p, "mid_p": m.mid_p, "chi2": m.chi2, "chi2_p": m.chi2_p,
                        "chi2_cc": m.chi2_cc, "chi2_cc_p": m.chi2_cc_p},
            "difference": {"estimate": table.difference, "ci95": [diff.lo, diff.hi] if diff else None,
                           "method": "newcombe"}})
    for comparison, adjusted in zip(comparisons, stats.holm([x["mcnemar"]["mid_p"] for x in comparisons])):
        comparison["holm_mid_p"] = adjusted
    out["comparisons"] = comparisons
    return _finite(out)


def _finite(value: Any) -> Any:
    """JSON-safe: NaN/inf become null."""
    if isinstance(value, float) and not np.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


# ------------------------------------------------------------------ atomic replace


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths (Linux renameat2 RENAME_EXCHANGE); False where unsupported."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    result = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    return result == 0


def _fsync_tree(directory: Path) -> None:
    for path in sorted(directory.rglob("*"), reverse=True):
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.fsync(fd)
        except OSError:
            pass
        finally:
            os.close(fd)
    fsync_dir(directory)


def swap_into_place(new: Path, root: Path) -> None:
    """Make the complete export `new` the dataset at `root`, replacing an earlier export.

    Both sit in the same folder. With an existing root the two are exchanged atomically
    (renameat2) where the kernel allows it, else renamed one after the other (root first
    moved aside, so `root` is at every moment absent, the old export or the new one, never a
    mix). The old export is deleted afterwards."""
    _fsync_tree(new)
    if not root.exists():
        os.rename(new, root)
    elif _exchange(new, root):
        shutil.rmtree(new, ignore_errors=True)  # `new` now holds the previous export
    else:
        aside = root.parent / f".{root.name}.old-{os.getpid()}-{secrets.token_hex(4)}"
        os.rename(root, aside)
        try:
            os.rename(new, root)
        except OSError:
            os.rename(aside, root)  # put the previous export back
            raise
        shutil.rmtree(aside, ignore_errors=True)
    fsync_dir(root.parent)


def _remove_stale_temps(root: Path) -> None:
    """Temp dirs of exports to this root whose process is gone (killed mid-export)."""
    pattern = re.compile(rf"^\.{re.escape(root.name)}\.(?:export|old)-(\d+)-[0-9a-f]+$")
    if not root.parent.is_dir():
        return
    for child in root.parent.iterdir():
        match = pattern.match(child.name)
        if not match:
            continue
        pid = int(match.group(1))
        try:
            os.kill(pid, 0)
            alive = pid != os.getpid()
        except ProcessLookupError:
            alive = False
        except PermissionError:
            alive = True
        if not alive:
            shutil.rmtree(child, ignore_errors=True)


# ------------------------------------------------------------------ the whole export


@dataclass
class ExportResult:
    root: Path
    episodes: int
    frames: int
    cameras: list[str]
    seconds: float
    pushed_to: str | None = None
    forced: list[str] = field(default_factory=list)


def export_campaign(campaign_dir: Path, *, repo_id: str, root: Path | None = None, judge: str | None = None,
                    include_aborted: bool = False, force: bool = False, push: bool = False,
                    private: bool = False, say: Callable[[str], None] = print) -> ExportResult:
    """Export the campaign at `campaign_dir` (see the module docstring). Raises `BadInput` for
    refusals (nothing written) and `RuntimeFailure` for faults (nothing left half-written)."""
    started = time.monotonic()
    check_repo_id(repo_id)
    campaign_dir = Path(campaign_dir)
    if not campaign_dir.is_dir():
        raise BadInput(f"{campaign_dir}: not a campaign directory (no such directory)")
    store = CampaignStore.open_readonly(campaign_dir)
    try:
        check_not_running(campaign_dir)
        root = check_root(root if root is not None else default_root(repo_id))
        if root == campaign_dir.resolve() or campaign_dir.resolve() in root.parents:
            raise BadInput(f"--root {root}: inside the campaign directory; choose a root outside it")
        check_lerobot_installed()
        if push:
            check_hub_token()
        plan = plan_export(store, repo_id=repo_id, root=root, judge=judge,
                           include_aborted=include_aborted, force=force)
        for line in plan.forced:
            say(f"warning (--force): {line}")
        report, report_source, report_md = report_json(store, judge)
        judge_labels = {j: store.latest_labels(j) for j in plan.judges}
    finally:
        store.close()

    summary = evaluation_summary(plan, report, report_source)
    rows = trial_rows(plan, judge_labels)
    check_export_space(plan)
    say(f"exporting {len(plan.episodes)} episodes of {campaign_dir} as {repo_id} to {root} "
        f"(labels: {plan.labels.source})")

    created: list[Path] = []
    parent = root.parent
    while not parent.exists():
        created.append(parent)
        parent = parent.parent
    tmp = root.parent / f".{root.name}.export-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        for directory in reversed(created):
            directory.mkdir()
        _remove_stale_temps(root)
        info = _write_dataset(plan, tmp, say)
        out = tmp
        _write_table(rows, out / TRIALS_FILE)
        (out / PROTOCOL_FILE).write_text(plan.campaign["protocol_text"], encoding="utf-8")
        (out / LAYOUT_FILE).write_text(plan.campaign["layout_text"], encoding="utf-8")
        (out / RIG_FILE).write_text(plan.campaign["rig_text"], encoding="utf-8")
        (out / REPORT_FILE).write_text(json.dumps(report, indent=2, sort_keys=False) + "\n", encoding="utf-8")
        (out / EVALUATION_FILE).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
        card_kwargs = card_arguments(plan, summary, report, report_md)
        (out / CARD_FILE).write_text(render_full_card(info, card_kwargs, plan.repo_id), encoding="utf-8")
        swap_into_place(tmp, root)
    except OrchestratorError:
        _cleanup(tmp, created)
        raise
    except KeyboardInterrupt:
        _cleanup(tmp, created)
        raise
    except OSError as exc:
        _cleanup(tmp, created)
        raise RuntimeFailure(f"{root}: export failed: {exc.strerror or exc}"
                             f"{' (' + str(exc.filename) + ')' if getattr(exc, 'filename', None) else ''}; "
                             "nothing was replaced") from None
    except BaseException:
        _cleanup(tmp, created)
        raise
    frames = int(info.get("total_frames", sum(int(e.record["frames"]) for e in plan.episodes)))
    result = ExportResult(root=root, episodes=len(plan.episodes), frames=frames, cameras=plan.cameras,
                          seconds=time.monotonic() - started, forced=plan.forced)
    if push:
        result.pushed_to = push_dataset(root, repo_id, private=private, card_kwargs=card_kwargs)
    return result


# The export re-encodes the videos the way LeRobot does (AV1, a keyframe every 2 frames), which
# measured 9-12x the bytes of the recorder's H.264 on simulated episodes (demo: 4.6 MB -> 53 MB); 16x leaves margin.
EXPORT_BYTES_PER_SOURCE_BYTE = 16
EXPORT_MARGIN_BYTES = 200 * 1024 * 1024


def check_export_space(plan: ExportPlan) -> None:
    """Refuse to start an export that would not fit beside the root (nothing written yet)."""
    source = 0
    for ep in plan.episodes:
        for name, relative in ep.record["files"].items():
            try:
                source += (plan.campaign_dir / relative).stat().st_size
            except OSError:
                pass
    need = source * EXPORT_BYTES_PER_SOURCE_BYTE + EXPORT_MARGIN_BYTES
    folder = plan.root.parent
    while not folder.exists():
        folder = folder.parent
    free = shutil.disk_usage(folder).free
    if free < need:
        raise RuntimeFailure(f"{folder}: not enough disk space for the export: {free / 1e6:.0f} MB free, "
                             f"need about {need / 1e6:.0f} MB; free some space or choose another --root")


def _cleanup(tmp: Path, created: list[Path]) -> None:
    shutil.rmtree(tmp, ignore_errors=True)
    for directory in created:  # innermost first; only the empty folders this export made
        try:
            directory.rmdir()
        except OSError:
            break


def info_of(dataset_root: Path) -> dict[str, Any]:
    return json.loads((dataset_root / "meta" / "info.json").read_text())


def card_arguments(plan: ExportPlan, summary: dict[str, Any], report: dict[str, Any],
                   report_md: str | None) -> dict[str, Any]:
    """Keyword arguments for LeRobot's dataset card (its template + our description)."""
    from .dataset_card import render_description

    return {"dataset_description": render_description(plan, summary, report, report_md),
            "tags": list(CARD_TAGS), "license": LICENSE}


def render_full_card(info: dict[str, Any], card_kwargs: dict[str, Any], repo_id: str) -> str:
    """The README.md LeRobot's `push_to_hub` writes (same template and arguments), so the local
    card and the Hub's are the same file."""
    from lerobot.datasets.utils import create_lerobot_dataset_card

    kwargs = dict(card_kwargs)
    tags = kwargs.pop("tags", None)

    class _Info:  # create_lerobot_dataset_card only calls .to_dict()
        def __init__(self, data: dict[str, Any]):
            self._data = data

        def to_dict(self) -> dict[str, Any]:
            return self._data

    return str(create_lerobot_dataset_card(tags=tags, dataset_info=_Info(info), repo_id=repo_id, **kwargs))


# ------------------------------------------------------------------ the Hub


def push_dataset(root: Path, repo_id: str, *, private: bool, card_kwargs: dict[str, Any]) -> str:
    """Upload the exported dataset with LeRobot's `push_to_hub` (the token is the Hub client's
    own: login or HF_TOKEN; it is never passed, printed, logged or written here)."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    kwargs = dict(card_kwargs)
    tags = kwargs.pop("tags", None)
    license_id = kwargs.pop("license", LICENSE)
    try:
        dataset = LeRobotDataset(repo_id, root=root, video_backend="pyav")
        # private=None leaves the Hub's default (an organisation's setting) for new repos
        dataset.push_to_hub(tags=tags, license=license_id, private=True if private else None, **kwargs)
    except OrchestratorError:
        raise
    except Exception as exc:
        raise RuntimeFailure(f"push of {root} to https://huggingface.co/datasets/{repo_id} failed: "
                             f"{type(exc).__name__}: {_scrub(str(exc)).splitlines()[0] if str(exc) else ''}; "
                             "the local export is complete; run the export with --push again") from None
    return f"https://huggingface.co/datasets/{repo_id}"


def _scrub(text: str) -> str:
    """Remove the Hub token from a message, should a library ever echo it."""
    try:
        from huggingface_hub import get_token

        token = get_token()
    except Exception:
        token = None
    return text.replace(token, "***") if token else text
