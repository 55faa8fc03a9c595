"""The export plan: everything an export needs, read from the campaign store with the refusals
applied (incomplete campaign, episodes without a definite label, too few pre-registered judges,
missing or damaged files), before anything is written."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.analysis.outcomes import CONSENSUS, outcomes_from_store
from orchestrator.core.errors import BadInput, RuntimeFailure
from orchestrator.design.schedule import Trial
from orchestrator.export.names import F_ACTION, F_FAILURE, F_IMAGE, F_MARK, F_POLICY, F_STATE, F_SUCCESS
from orchestrator.rigs.profile import STATE_KEYS, RigProfile, parse_rig_text
from orchestrator.store.episode_files import EpisodeFiles, damaged_files
from orchestrator.store.records import AUTO_JUDGE
from orchestrator.store.sqlite import PHYSICS_JUDGE, CampaignStore


@dataclass(frozen=True)
class Labels:
    """The labels that count for the export: episode id -> (success or None, failure mode)."""

    requested: str                     # what the user asked for (a name, physics, consensus)
    source: str                        # human-readable: whose labels these are
    by_episode: dict[str, tuple[bool | None, str | None]]
    outcomes: Any = field(default=None, compare=False, repr=False)   # the `OutcomeSet` they were read from


def campaign_labels(store: CampaignStore, judge: str | None) -> Labels:
    """The chosen labels, the same ones `orchestrator report` counts: read through
    `orchestrator.analysis.outcomes.outcomes_from_store` (the report's own reading of the store), so the
    export and the report can never disagree; `outcomes` keeps that reading for the export's report."""
    data = outcomes_from_store(store, judge)
    by_episode = {o.episode_id: (o.success, o.failure_mode) for o in data.outcomes
                  if o.episode_id and o.state == "done"}
    return Labels(requested=judge or CONSENSUS, source=data.label_source, by_episode=by_episode, outcomes=data)


@dataclass
class EpisodePlan:
    index: int                         # episode_index in the dataset
    trial: Trial
    record: dict[str, Any]             # the store's episode row
    files: EpisodeFiles                # its files (`record["files"]`, decoded by the recorder's type)
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
    trials: list[Trial]
    attempts: list[dict[str, Any]]
    include_aborted: bool
    forced: list[str] = field(default_factory=list)   # refusals overridden by --force
    stride: int = 1                    # control steps per dataset frame (see `export_stride`)

    @property
    def control_fps(self) -> int:
        return int(self.protocol.protocol.episode.fps)

    @property
    def fps(self) -> int:
        """The dataset's frame rate: the control rate, or the cameras' recorded rate."""
        return self.control_fps // self.stride

    @property
    def task(self) -> str:
        return self.protocol.protocol.task or self.protocol.protocol.name

    def task_of(self, policy: str) -> str:
        """The task string `policy` ran with, as lerobot-record stores the task it recorded: the
        policy's own `task` (language-conditioned LeRobot policies), else the protocol's."""
        spec = self.protocol.protocol.policies.get(policy)
        return getattr(spec, "task", None) or self.task

    @property
    def robot_type(self) -> str:
        """The rig's LeRobot robot `name`, as lerobot-record writes it (`so_follower` for an
        SO-101); the simulated rig keeps its own type."""
        if self.rig is None:
            return "so_follower"
        if self.rig.simulated:
            return self.rig.robot.type
        from orchestrator.rigs.so101.config import robot_name

        try:
            return robot_name(self.rig.robot.type)
        except BadInput:  # a plugin robot not installed where the export runs
            return self.rig.robot.type

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



def _refusals(store: CampaignStore, done: list[Trial], trials: list[Trial], labels: Labels,
              judges_wanted: int, force: bool) -> list[str]:
    """The reasons not to export (BadInput), or with --force the list of what was overridden."""
    directory = store.directory
    forced: list[str] = []

    def refuse(why: str, note: str) -> None:
        if not force:
            raise BadInput(why)
        forced.append(note)

    if not (len(done) == len(trials) or bool(store.campaign().get("finished_at"))):
        refuse(f"{directory}: the campaign is incomplete ({len(done)} of {len(trials)} trials done); "
               "resume it with `orchestrator run`, or pass --force to export the done trials",
               f"incomplete campaign: {len(done)} of {len(trials)} trials done")
    humans = [j for j in store.judges() if j != PHYSICS_JUDGE]
    unlabelled = [t for t in done if labels.by_episode.get(episode_of(t), (None, None))[0] is None]
    if unlabelled:
        hint = ("judge them blind first (`orchestrator judge CAMPAIGN --judge NAME`), or "
                if not humans or labels.requested != PHYSICS_JUDGE else "")
        refuse(f"{directory}: {len(unlabelled)} of {len(done)} episodes have no definite label under "
               f"{labels.source} (unjudged, unsure or a tie); exporting reveals which policy ran: "
               f"{hint}{other_labels_hint(store, done, labels.requested)}pass --force to export them with "
               f"{F_SUCCESS} = -1",
               f"{len(unlabelled)} of {len(done)} episodes without a definite label ({F_SUCCESS} = -1)")
    # a consensus of human judges: as many judges as the protocol pre-registered must have
    # labelled every episode before the export unblinds the campaign
    if labels.requested == CONSENSUS and humans and judges_wanted > 1:
        done_ids = {t.episode_id for t in done}
        complete_judges = [h for h in humans if done_ids <= {ep for ep, j in store.latest_labels(h).items()
                                                              if j.label in ("success", "failure", "unsure")}]
        if len(complete_judges) < judges_wanted:
            refuse(f"{directory}: the protocol asks for {judges_wanted} judges per episode; "
                   f"{len(complete_judges)} ({', '.join(complete_judges) or 'none'}) have judged every episode; "
                   "exporting reveals which policy ran, so let the others judge first (`orchestrator judge "
                   "CAMPAIGN --judge NAME`), or pass --force",
                   f"{len(complete_judges)} of the {judges_wanted} pre-registered judges judged every episode")
    return forced


def decided_by(store: CampaignStore, done: list[Trial]) -> list[str]:
    """The human judges, then physics, whose own labels decide every done episode (success or
    failure): those `--judge NAME` can name to count their labels alone (not the advisory `auto`)."""
    wanted = {t.episode_id for t in done}

    def decided(judge: str) -> set[str]:
        return {ep for ep, lab in store.latest_labels(judge).items() if lab.label in ("success", "failure")}

    found = [j for j in store.judges() if j not in (AUTO_JUDGE, PHYSICS_JUDGE) and wanted <= decided(j)]
    physics = decided(PHYSICS_JUDGE) | {e["id"] for e in store.episodes() if e.get("physics_success") is not None}
    return found + ([PHYSICS_JUDGE] if wanted <= physics else [])


def other_labels_hint(store: CampaignStore, done: list[Trial], requested: str) -> str:
    """'or count X's labels (--judge X), ' when other labels than the requested ones decide every
    done episode (the way out a refusal names beside judging and --force); '' otherwise."""
    others = [j for j in decided_by(store, done) if j != requested]
    if not others:
        return ""
    return f"count the labels of one that decides them all (`--judge NAME`: {', '.join(others)}), or "


def _check_files(directory: Path, done: list[Trial], records: dict[str, dict[str, Any]],
                 files: dict[str, EpisodeFiles]) -> list[str]:
    """Every file present and intact (the recorder's digests); the common camera list."""
    cameras: list[str] | None = None
    for t in done:
        record, episode = records[episode_of(t)], files[episode_of(t)]
        if cameras is None:
            cameras = list(record["cameras"])
        elif list(record["cameras"]) != cameras:
            raise RuntimeFailure(f"{directory}: episode {t.episode_id} (trial {t.slot + 1}) has cameras "
                                 f"{record['cameras']}, others {cameras}; cannot export mixed camera sets")
        needed = {camera: episode.videos.get(camera) for camera in cameras} | {"timeseries": episode.timeseries}
        missing = [name for name, relative in needed.items() if relative is None]
        if missing:
            raise RuntimeFailure(f"{directory}: episode {t.episode_id} (trial {t.slot + 1}) lists no file "
                                 f"for {', '.join(missing)}")
        digests = record.get("digests") or {}
        if digests:
            bad = damaged_files(directory, digests)
        else:
            bad = [relative for relative in needed.values() if relative is not None and not (directory / relative).is_file()]
        if bad:
            raise RuntimeFailure(f"{directory}: episode {t.episode_id} (trial {t.slot + 1}): "
                                 f"{', '.join(bad)} missing or damaged; cannot export it")
    assert cameras is not None
    return cameras


def _failure_modes(store: CampaignStore, declared: list[str], labels: Labels) -> list[str]:
    """The protocol's failure modes, then any other mode a judge used, sorted."""
    latest = [store.latest_labels(j) for j in store.judges()]
    extra = sorted({lab.failure_mode for one in latest for lab in one.values()
                    if lab.failure_mode and lab.failure_mode not in declared}
                   | {m for _, m in labels.by_episode.values() if m and m not in declared})
    return declared + extra


FPS_CHOICES = ("recorded", "control")


def export_stride(control_fps: int, rig: RigProfile | None, cameras: list[str], choice: str) -> int:
    """Control steps per dataset frame. `control`: 1 (every step, each camera holding its latest
    frame). `recorded` (the default): when every camera recorded at one rate that divides the
    control rate, the dataset runs at that rate (one row per recorded frame, with the joint state
    and action of the step the frame was taken at), so no frame is stored twice; otherwise 1
    (a LeRobot dataset has one frame rate for all its features)."""
    if choice == "control" or rig is None:
        return 1
    rates = {rig.cameras[c].fps for c in cameras if c in rig.cameras}
    if len(rates) != 1 or len(cameras) != sum(1 for c in cameras if c in rig.cameras):
        return 1
    (rate,) = rates
    return control_fps // rate if rate and rate < control_fps and control_fps % rate == 0 else 1


def plan_export(store: CampaignStore, *, repo_id: str, root: Path, judge: str | None = None,
                include_aborted: bool = False, force: bool = False, fps: str = "recorded") -> ExportPlan:
    """Read everything the export needs and apply the refusals; writes nothing."""

    campaign = store.campaign()
    directory = store.directory
    protocol = store.frozen_protocol()
    try:
        rig = parse_rig_text(campaign["rig_text"])
    except Exception:  # an unreadable rig text only costs the robot type
        rig = None
    trials = store.trials()
    records = {e["id"]: e for e in store.episodes()}
    labels = campaign_labels(store, judge)
    done = [t for t in trials if t.state == "done" and t.episode_id in records]
    if not done:
        raise BadInput(f"{directory}: no completed episode to export yet (run the campaign first)")
    forced = _refusals(store, done, trials, labels, protocol.protocol.judging.judges, force)
    files = {episode_of(t): EpisodeFiles.from_dict(records[episode_of(t)]["files"]) for t in done}
    cameras = _check_files(directory, done, records, files)
    shapes = {camera: video_shape(directory / files[episode_of(done[0])].videos[camera]) for camera in cameras}
    episodes = [EpisodePlan(index=i, trial=t, record=records[episode_of(t)], files=files[episode_of(t)],
                            success=labels.by_episode.get(episode_of(t), (None, None))[0],
                            failure_mode=labels.by_episode.get(episode_of(t), (None, None))[1])
                for i, t in enumerate(done)]
    return ExportPlan(campaign_dir=directory, repo_id=repo_id, root=root, campaign=campaign,
                      protocol=protocol, rig=rig, labels=labels, episodes=episodes, cameras=cameras,
                      camera_shapes=shapes, policies=list(protocol.protocol.policies),
                      marks=[m.id for m in protocol.layout.marks],
                      failure_modes=_failure_modes(store, list(protocol.protocol.judging.failure_modes), labels),
                      judges=store.judges(), trials=trials, attempts=store.attempts(),
                      include_aborted=include_aborted, forced=forced,
                      stride=export_stride(int(protocol.protocol.episode.fps), rig, cameras, fps))


def episode_of(trial: Trial) -> str:
    """A done trial's episode id (a trial is done only with its episode recorded)."""
    assert trial.episode_id is not None, f"trial {trial.slot + 1} is done without an episode"
    return trial.episode_id


def video_shape(path: Path) -> tuple[int, int]:
    import av

    try:
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            shape = int(stream.codec_context.height), int(stream.codec_context.width)
    except (OSError, IndexError, av.error.FFmpegError) as exc:
        raise RuntimeFailure(f"{path}: cannot read the video: {exc}") from None
    return shape



def _done_trials(store: CampaignStore) -> tuple[list[Trial], list[Trial]]:
    """(every trial, the done ones with a recorded episode)."""
    trials = store.trials()
    recorded = {e["id"] for e in store.episodes()}
    return trials, [t for t in trials if t.state == "done" and t.episode_id in recorded]


def viewing_judge(store: CampaignStore, judge: str | None) -> str | None:
    """Whose labels decide whether a campaign is blinded for viewing: `judge` if given; else, on a
    simulated campaign, physics (it decides every episode, so a human judge starting or not
    changes nothing: one rule); else the consensus (None)."""
    if judge is None and store.campaign().get("simulated"):
        return PHYSICS_JUDGE
    return judge


def blinding_reasons(store: CampaignStore, judge: str | None = None) -> list[str]:
    """Why showing which policy ran each episode would unblind the campaign now: the export's own
    refusals (`_refusals`: an incomplete campaign, episodes without a definite label under the
    labels of `viewing_judge`, fewer complete judges than the protocol pre-registered); empty
    when none."""

    protocol = store.frozen_protocol()
    trials, done = _done_trials(store)
    return _refusals(store, done, trials, campaign_labels(store, viewing_judge(store, judge)),
                     protocol.protocol.judging.judges, force=True)


def blinding_way_out(store: CampaignStore, judge: str | None) -> str:
    """The labels that would unblind the campaign for viewing now, as a refusal names them."""
    trials, done = _done_trials(store)
    if len(done) != len(trials) and not store.campaign().get("finished_at"):
        return ""
    return other_labels_hint(store, done, viewing_judge(store, judge) or CONSENSUS)
