"""Blinding (docs/design.md section 10): the only view of a campaign a judge gets.

The key -- which policy ran which episode -- lives only in the campaign store's `trials`
table (`policy`, and `seed`/`position`/`slot`, from which the schedule and so the policy
could be reconstructed). The blinded view is read through the store's blinded reads
(`store/blind_view.py`), which select none of those columns: per episode the opaque random id
(`store.new_episode_id`), the video files, the layout mark, the duration and the frame count.
From the frozen protocol text only the success test and the failure-mode list are taken; the
protocol text itself (which names policies and checkpoint paths) and the campaign name (chosen
by the researcher, may name them too) are never passed on.

Which episodes: the judges' queue (`blind_view.VIEW_SQL`): every recorded episode, or, with an
audit (`judging.audit`, docs/judging.md "The audit"), the audited ones and those `auto` was
unsure of, through the same statement and with the same fields, so nothing here can tell them apart.

Each judge sees the episodes in their own random order: episodes are sorted by
SHA-256(salt | judge | episode id), the salt being the random campaign id (or a bundle's
random id). The order is stable across sessions (resume continues in the same order),
differs between judges, and, because episode ids are random and the hash is keyed by the
judge, is independent of the schedule and hence of the policy sequence.

`forbidden_terms` and `scan_for_terms` are a safety net for anything written for judges
(bundles): the policy names, checkpoint paths and revisions of the protocol must not occur
in any byte of it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from orchestrator.core.errors import BadInput
from orchestrator.design.judge_facts import judge_facts
from orchestrator.judging.source import BlindEpisode, JudgingInfo, LabelRecord, Mark
from orchestrator.store.blind_view import blind_episode_rows, campaign_texts, has_audit, seal, server_judging_info
from orchestrator.store.episode_files import EpisodeFiles
from orchestrator.store.sqlite import CampaignStore


def judge_order(episode_ids: Iterable[str], judge: str, salt: str) -> list[str]:
    """`episode_ids` in `judge`'s own order: sorted by SHA-256(salt | judge | id)."""
    def key(episode_id: str) -> bytes:
        return hashlib.sha256(f"{salt}|{judge}|{episode_id}".encode()).digest()

    return sorted(episode_ids, key=key)



def judging_info(store: CampaignStore) -> tuple[JudgingInfo, dict[str, Mark]]:
    """What the judge is told (success test, failure modes) and the marks, from the frozen texts."""
    if store.on_server:
        ref, text, modes, marks, min_height_m = server_judging_info(store)
        return (JudgingInfo(ref=ref, success_test=text, failure_modes=tuple(json.loads(modes)),
                            min_height_m=float(min_height_m), kind="campaign"),
                {k: Mark(k, x, y) for k, (x, y) in json.loads(marks).items()})
    campaign_id, protocol_text, layout_text = campaign_texts(store)
    facts = judge_facts(protocol_text, layout_text)
    return (JudgingInfo(ref=str(campaign_id), success_test=facts.success_test, failure_modes=facts.failure_modes,
                        min_height_m=facts.min_height_m, kind="campaign"),
            {k: Mark(k, x, y) for k, (x, y) in facts.marks.items()})


def _read_poses(path: Path) -> dict[str, dict]:
    """The fixed cameras' poses recorded with an episode ({} if the file is unreadable)."""
    try:
        poses = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}
    return poses if isinstance(poses, dict) else {}


def blinded_episodes(store: CampaignStore, marks: dict[str, Mark]) -> list[BlindEpisode]:
    """Every recorded episode (sorted by id, not by run order), through the store's blinded view
    only (`blind_view.blind_episode_rows`)."""
    from orchestrator.judging.auto.labels import series_arm_moved

    episodes = []
    for episode_id, frames, duration_s, files, mark_id in blind_episode_rows(store):
        files = EpisodeFiles.from_dict(files)
        videos = {camera: (store.directory / rel).resolve() for camera, rel in files.videos.items()}
        stills = {camera: (store.directory / rel).resolve() for camera, rel in files.stills.items()}
        series = files.timeseries
        still = bool(series and series_arm_moved(store.directory / series) is False)
        poses = _read_poses(store.directory / files.camera_poses) if files.camera_poses else {}
        episodes.append(BlindEpisode(id=episode_id, videos=videos,
                                     mark=marks.get(mark_id, Mark(mark_id)),
                                     duration_s=float(duration_s), frames=int(frames), arm_still=still,
                                     stills=stills, camera_poses=poses))
    episodes.sort(key=lambda e: e.id)
    return episodes


def blinded_view(store: CampaignStore) -> tuple[JudgingInfo, list[BlindEpisode]]:
    """The judging info and every recorded episode."""
    info, marks = judging_info(store)
    return info, blinded_episodes(store, marks)


class CampaignSource:
    """`JudgeSource` over a campaign store: blinded view in, labels via the store's API.

    After the success test and failure modes are read from the frozen protocol, the store
    connection is sealed: SQLite itself refuses any read of the key columns, the protocol
    text, the campaign name, the event log, abort reasons, timings or the physics outcome
    through it.
    """

    def __init__(self, directory: Path, judge: str, contested_first: bool = False):
        self.store = CampaignStore.open_for_labels(Path(directory))
        self.judge = judge
        self.contested_first = contested_first
        self.info, self._marks = judging_info(self.store)
        if contested_first and not self.store.on_server and has_audit(self.store):
            self.store.close()
            raise BadInput(f"{directory}: --contested-first would put the episodes the rater was unsure of "
                           "before the audit's and so tell them apart; this campaign has an audit (judging.audit)")
        seal(self.store)

    def episodes(self) -> list[BlindEpisode]:
        by_id = {e.id: e for e in blinded_episodes(self.store, self._marks)}
        order = judge_order(by_id, self.judge, self.info.ref)
        if self.contested_first:
            first = contested(self.store, self.judge)
            order = [i for i in order if i in first] + [i for i in order if i not in first]
        return [by_id[i] for i in order]

    def history(self) -> list[LabelRecord]:
        return [LabelRecord(str(j.id), j.episode_id, j.label, j.failure_mode, j.note, j.created_at, j.stage)
                for j in self.store.judgments(self.judge)]

    def add(self, episode_id: str, label: str, failure_mode: str | None = None,
            note: str | None = None, stage: str | None = None) -> LabelRecord:
        label_id = self.store.add_judgment(episode_id, self.judge, label, failure_mode, note,
                                           source="local", stage=stage)
        j = [x for x in self.store.judgments(self.judge) if x.id == label_id][0]
        return LabelRecord(str(j.id), j.episode_id, j.label, j.failure_mode, j.note, j.created_at, j.stage)

    def retract(self, label_id: str) -> None:
        self.store.retract_judgment(int(label_id))

    def invalidate(self, episode_id: str, reason: str) -> None:
        """Invalid start: the trial goes back to the queue (through the sealed connection)."""
        self.store.invalidate_episode(episode_id, f"invalid start (judge {self.judge}): {reason}",
                                      kind="invalid_start")

    def close(self) -> None:
        self.store.close()


def contested(store: CampaignStore, judge: str) -> set[str]:
    """Episodes where the `auto` rater and an earlier human judge (not `judge`) disagree
    (success against failure; unsure disagrees with nobody), and those `auto` was unsure of
    (they need a human most). Only which episodes, never
    whose label: the judge app does not show `auto`'s label."""
    labels: dict[str, dict[str, str]] = {}
    for j in store.judgments():
        labels.setdefault(j.judge, {})[j.episode_id] = j.label
    auto = labels.pop("auto", {})
    out: set[str] = set()
    for name, theirs in labels.items():
        if name in ("physics", judge):
            continue
        out.update(e for e, label in theirs.items()
                   if {label, auto.get(e)} == {"success", "failure"})
    # the episodes `auto` abstained on (its error band straddles the success test) come first too
    out.update(e for e, label in auto.items() if label == "unsure")
    return out


# ------------------------------------------------------------ safety net for judge files

_MIN_TERM = 5  # shorter fragments (e.g. labels "A", "B") would match random bytes


def forbidden_terms(protocol_text: str, extra: Iterable[str] = ()) -> list[str]:
    """Strings that identify a policy: labels, checkpoint paths and their parts, revisions.

    Labels and path parts shorter than 5 characters are left out (they would match random
    video bytes); a label that short ("A", "B") carries no identity anyway.
    """
    try:
        protocol: dict[str, Any] = yaml.safe_load(protocol_text) or {}
    except yaml.YAMLError:
        protocol = {}
    terms: set[str] = set(t for t in extra if t and len(t) >= _MIN_TERM)
    for label, spec in (protocol.get("policies") or {}).items():
        terms.add(str(label))
        if isinstance(spec, dict):
            for key in ("path", "revision"):
                value = spec.get(key)
                if value:
                    terms.add(str(value))
                    terms.update(p for p in re.split(r"[/\\]", str(value)) if p not in (".", ".."))
    generic = {"checkpoints", "checkpoint", "pretrained_model", "models", "outputs", "train",
               "main", "master", "latest", "last", "model"}
    return sorted(t for t in terms if len(t) >= _MIN_TERM and t.lower() not in generic)


def scan_for_terms(root: Path, terms: list[str]) -> list[tuple[str, str]]:
    """(file, term) for each file under `root` whose path or bytes contain a term (any case)."""
    needles = [(t, t.lower().encode()) for t in terms]
    hits: list[tuple[str, str]] = []
    if not needles:
        return hits
    for path in sorted(Path(root).rglob("*")):
        rel = str(path.relative_to(root))
        data = rel.lower().encode() + b"\0" + (path.read_bytes().lower() if path.is_file() else b"")
        for term, needle in needles:
            if needle in data:
                hits.append((rel, term))
                break
    return hits
