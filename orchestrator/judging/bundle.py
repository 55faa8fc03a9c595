"""Judge bundles: a self-contained, blinded folder for judges who work elsewhere.

A bundle holds exactly what the blinded view (`blinding.py`) gives a judge, and no key:

    manifest.json                 schema, random bundle id, the campaign's opaque id, the
                                  success test, the failure modes, and per episode (sorted by
                                  id, not by run order): opaque id, video files, mark,
                                  duration, frame count (`manifest.py` writes and reads it)
    videos/<episode id>/<camera>.mp4, <camera>.start.jpg
                                  the recorded videos and start stills, cleaned as the
                                  browser judge's are (`clean_media`: videos remuxed without
                                  metadata, stills re-encoded from their pixels)
    labels/<judge>.jsonl          written by `orchestrator judge BUNDLE --judge NAME`: one JSON
                                  line per label or retraction, appended and fsynced per key
    README.txt                    how to judge it and send it back

It is built in a temporary folder beside the target, checked byte by byte for the policy
names, checkpoint paths and revisions of the protocol (`blinding.forbidden_terms`), and
renamed into place only when complete. `import_labels` merges a bundle's labels back into
the campaign store with `source = 'bundle:<bundle id>'`.

Reading a bundle needs only the core install (no torch, no mujoco).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.core.durable import fsync_dir, fsync_file, swap_directory
from orchestrator.core.errors import BadInput, RuntimeFailure
from orchestrator.judging.blinding import blinded_view, forbidden_terms, judge_order, scan_for_terms
from orchestrator.judging.clean_media import clean_copy
from orchestrator.judging.manifest import MANIFEST, Manifest, ManifestEpisode, read_manifest
from orchestrator.judging.source import (
    INVALID_START,
    LADDER_STAGES,
    BlindEpisode,
    JudgingInfo,
    LabelRecord,
    check_judge_name,
    current_labels,
)
from orchestrator.store.sqlite import LABELS, CampaignStore

LABELS_DIR = "labels"

README = """\
Blind judging bundle {bundle_id}

Judge every episode from its video alone:

    orchestrator judge THIS_FOLDER --judge YOUR_NAME

Keys: s success, f failure, u unsure (asked again later), 1-9 failure mode, n note,
z undo, space play/pause, left/right one frame, [ ] slower/faster, e end,
o external player, c camera, a first frame beside last, x then 1-3 invalid start
(cube not on its mark, knocked, arm not at rest), m zoom on the mark, g success-height
guide, q quit. Every label is saved as you make it.

Success test: {success_test}

When done, send back the folder labels/ (or the whole bundle).
"""


@dataclass(frozen=True)
class BundleSummary:
    path: Path
    bundle_id: str
    episodes: int
    files: int
    bytes: int


def write_bundle(campaign: Path, out: Path) -> BundleSummary:
    """Write the judge bundle of `campaign` to `out` (atomically: complete or absent)."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise BadInput(f"{out}: already exists and is not empty; choose a new folder for the bundle")
    store = CampaignStore.open_readonly(Path(campaign))
    try:
        info, episodes = blinded_view(store)
        protocol_text = store.campaign()["protocol_text"]
    finally:
        store.close()
    if not episodes:
        raise BadInput(f"{campaign}: no recorded episodes yet; nothing to bundle")
    missing = [f"{e.id}/{cam}" for e in episodes for cam, p in e.videos.items() if not p.is_file()]
    if missing:
        raise RuntimeFailure(f"{campaign}: {len(missing)} video files are missing "
                             f"(first: videos/{missing[0]}.mp4); bundle not written")
    terms = forbidden_terms(protocol_text)
    named = [t for t in terms if t.lower() in out.name.lower()]
    if named:
        raise BadInput(f"{out}: the bundle folder's name contains {named[0]!r}, which names a policy; "
                       "judges see the folder name: choose a neutral one")
    bundle_id = "bd_" + secrets.token_hex(6)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.partial-{secrets.token_hex(4)}"
    tmp.mkdir()
    try:
        copied = [_copy_episode(episode, tmp) for episode in episodes]
        entries = [entry for entry, _ in copied]
        total = sum(size for _, size in copied)
        Manifest(bundle_id=bundle_id, campaign_id=info.ref, success_test=info.success_test,
                 failure_modes=tuple(info.failure_modes), min_height_m=info.min_height_m,
                 episodes=tuple(entries)).write(tmp)
        (tmp / "README.txt").write_text(README.format(bundle_id=bundle_id,
                                                      success_test=info.success_test))
        (tmp / LABELS_DIR).mkdir()
        for name in (MANIFEST, "README.txt"):
            fsync_file(tmp / name)
        leaks = scan_for_terms(tmp, terms)
        if leaks:
            where, term = leaks[0]
            raise RuntimeFailure(f"blinding check failed: {len(leaks)} bundle files contain a policy "
                                 f"name, checkpoint path or revision (first: {term!r} in {where}); "
                                 "bundle not written")
        swap_directory(tmp, out)   # `out` is absent or empty (checked above)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return BundleSummary(out, bundle_id, len(entries), sum(len(e.videos) for e in entries), total)


def _copy_episode(episode, folder: Path) -> tuple[ManifestEpisode, int]:
    """One episode's videos and start stills, cleaned (`clean_copy`), into the bundle folder:
    its manifest entry and the bytes written."""
    total = 0
    files: dict[str, dict[str, str]] = {"videos": {}, "stills": {}}
    for kind, sources, suffix, what in (("videos", episode.videos, "mp4", "video"),
                                        ("stills", episode.stills, "start.jpg", "the start still")):
        for camera, src in sources.items():
            rel = f"videos/{episode.id}/{camera}.{suffix}"
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            try:
                total += clean_copy(src, folder / rel)
            except Exception as exc:
                raise RuntimeFailure(f"{src}: cannot copy {what} into the bundle "
                                     f"({type(exc).__name__}: {exc})") from None
            files[kind][camera] = rel
    return ManifestEpisode(
        id=episode.id, videos=files["videos"], mark={"id": episode.mark.id, "x": episode.mark.x, "y": episode.mark.y},
        duration_s=episode.duration_s, frames=episode.frames, arm_still=episode.arm_still,
        stills=files["stills"], camera_poses=episode.camera_poses), total


# ------------------------------------------------------------ reading a bundle


def _read_label_lines(path: Path) -> list[dict[str, Any]]:
    """The operations of one labels file; a torn last line (crash mid-write) is ignored."""
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    ops = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            op = json.loads(line)
            _check_label_op(op)
        except ValueError:
            if number == len(lines):
                continue
            raise BadInput(f"{path}:{number}: not a label line; the labels file is damaged") from None
        ops.append(op)
    return ops


def _check_label_op(op: Any) -> None:
    """Raise ValueError unless `op` is a well-formed add/retract operation."""
    if not isinstance(op, dict) or op.get("op") not in ("add", "retract") or not isinstance(op.get("id"), str):
        raise ValueError("not a label operation")
    if op["op"] == "add":
        if not isinstance(op.get("episode_id"), str) or op.get("label") not in (*LABELS, INVALID_START):
            raise ValueError("label operation without an episode or a known label")
        for key in ("failure_mode", "note"):
            if op.get(key) is not None and not isinstance(op[key], str):
                raise ValueError(f"{key} is not text")
        if op.get("stage") is not None and op["stage"] not in LADDER_STAGES:
            raise ValueError("stage is not a stage of the progress ladder")
        created = op.get("created_at", 0.0)
        if isinstance(created, bool) or not isinstance(created, (int, float)) or created != created:
            raise ValueError("created_at is not a number")


def _replay(ops: list[dict[str, Any]]) -> list[LabelRecord]:
    """Live labels, oldest first, from add/retract operations."""
    live: dict[str, LabelRecord] = {}
    for op in ops:
        if op["op"] == "add":
            live[op["id"]] = LabelRecord(op["id"], op["episode_id"], op["label"], op.get("failure_mode"),
                                         op.get("note"), float(op.get("created_at", 0.0)), op.get("stage"))
        else:
            live.pop(op["id"], None)
    return list(live.values())


def bundle_labels(bundle: Path) -> dict[str, list[LabelRecord]]:
    """Every judge's live labels in a bundle: {judge: [labels, oldest first]}."""
    out = {}
    directory = Path(bundle) / LABELS_DIR
    for path in sorted(directory.glob("*.jsonl")) if directory.is_dir() else []:
        out[path.stem] = _replay(_read_label_lines(path))
    return out


class BundleSource:
    """`JudgeSource` over a bundle folder; labels go to `labels/<judge>.jsonl` (fsync per line)."""

    def __init__(self, bundle: Path, judge: str):
        self.bundle = Path(bundle)
        self.judge = judge
        self.manifest = read_manifest(self.bundle)
        self.info = JudgingInfo(ref=self.manifest.bundle_id, success_test=self.manifest.success_test,
                                failure_modes=self.manifest.failure_modes, kind="bundle",
                                min_height_m=self.manifest.min_height_m)
        self._episodes = [e.blind(self.bundle) for e in self.manifest.episodes]
        self._ids = {e.id for e in self._episodes}
        self.path = self.bundle / LABELS_DIR / f"{judge}.jsonl"
        self._ops = _read_label_lines(self.path)
        self._drop_torn_tail()

    def _drop_torn_tail(self) -> None:
        """Cut an incomplete last line (a crash mid-append; that label was never confirmed)."""
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            with open(self.path, "r+b") as handle:
                handle.truncate(data.rfind(b"\n") + 1)
                handle.flush()
                os.fsync(handle.fileno())

    def episodes(self) -> list[BlindEpisode]:
        by_id = {e.id: e for e in self._episodes}
        return [by_id[i] for i in judge_order(by_id, self.judge, self.info.ref)]

    def history(self) -> list[LabelRecord]:
        return _replay(self._ops)

    def _append(self, op: dict[str, Any]) -> None:
        self.path.parent.mkdir(exist_ok=True)
        new = not self.path.exists()
        with open(self.path, "ab") as handle:
            handle.write(json.dumps(op).encode() + b"\n")
            handle.flush()
            os.fsync(handle.fileno())
        if new:
            fsync_dir(self.path.parent)
        self._ops.append(op)

    def add(self, episode_id: str, label: str, failure_mode: str | None = None,
            note: str | None = None, stage: str | None = None) -> LabelRecord:
        if episode_id not in self._ids:
            raise BadInput(f"episode {episode_id} is not in this bundle")
        if label not in (*LABELS, INVALID_START):
            raise BadInput(f"label must be one of {', '.join(LABELS)}, not {label!r}")
        label_id, created_at = "lb_" + secrets.token_hex(6), time.time()
        op = {"op": "add", "id": label_id, "episode_id": episode_id,
              "judge": self.judge, "label": label, "failure_mode": failure_mode, "note": note,
              "created_at": created_at, **({"stage": stage} if stage is not None else {})}
        self._append(op)
        return LabelRecord(label_id, episode_id, label, failure_mode, note, created_at, stage)

    def retract(self, label_id: str) -> None:
        self._append({"op": "retract", "id": label_id, "at": time.time()})

    def invalidate(self, episode_id: str, reason: str) -> None:
        """Invalid start, recorded as an `invalid_start` label (reason in the note);
        `import-labels` sends the trial back for a re-run."""
        self.add(episode_id, INVALID_START, None, reason)

    def close(self) -> None:
        pass


# ------------------------------------------------------------ merging labels back


@dataclass(frozen=True)
class ImportSummary:
    bundle_id: str
    imported: int
    duplicates: int
    conflicts: int
    judges: list[str]
    invalid_starts: int = 0       # trials sent back for a re-run (invalid start)


def import_labels(campaign: Path, bundle: Path) -> ImportSummary:
    """Merge a bundle's labels into the campaign store (source 'bundle:<bundle id>').

    Refuses (BadInput, nothing written) when the bundle was made from another campaign or
    holds labels for episodes that are not in this campaign. A judge's label for an episode
    that already has a live label from that judge is skipped: counted as a duplicate when it
    came from a bundle (imported before), as a conflict when the judge labelled it locally.
    """
    manifest = read_manifest(Path(bundle))
    labels = bundle_labels(Path(bundle))
    store = CampaignStore.open_for_labels(Path(campaign))
    try:
        info, episodes = blinded_view(store)
        if manifest.campaign_id != info.ref:
            raise BadInput(f"{bundle}: this bundle was made from campaign {manifest.campaign_id}, "
                           f"not from {campaign} (campaign {info.ref}); nothing imported")
        known = {e.id for e in episodes}
        problems = [check_judge_name(judge) for judge in labels]
        problems = [p for p in problems if p]
        if problems:
            raise BadInput(f"{bundle}/{LABELS_DIR}: {problems[0]}; nothing imported")
        invalid = {r.episode_id: (judge, r.note or "no reason given") for judge, records in labels.items()
                   for r in current_labels(records).values() if r.label == INVALID_START}
        sent_back = {a["episode_id"] for a in store.attempts()} - known   # invalidated before
        foreign = sorted({r.episode_id for records in labels.values() for r in records}
                         - known - (sent_back & set(invalid)))
        if foreign:
            raise BadInput(f"{bundle}: labels for {len(foreign)} episodes that are not in this campaign "
                           f"({', '.join(foreign[:3])}{', ...' if len(foreign) > 3 else ''}); nothing imported")
        labels = {judge: [r for r in records if r.episode_id not in invalid]
                  for judge, records in labels.items()}
        bad = [r for records in labels.values() for r in records if r.label not in LABELS]
        if bad:
            raise BadInput(f"{bundle}: label {bad[0].label!r} for {bad[0].episode_id} is not one of "
                           f"{', '.join(LABELS)}; nothing imported")
        existing = {(j.judge, j.episode_id): j for j in store.judgments()}
        source = f"bundle:{manifest.bundle_id}"
        imported = duplicates = conflicts = 0
        for judge, records in labels.items():
            for record in current_labels(records).values():
                prior = existing.get((judge, record.episode_id))
                if prior is not None:
                    if prior.source.startswith("bundle:"):
                        duplicates += 1
                    else:
                        conflicts += 1
                    continue
                store.add_judgment(record.episode_id, judge, record.label, record.failure_mode,
                                   record.note, source=source, created_at=record.created_at or None,
                                   stage=record.stage)
                imported += 1
        invalid = {e: why for e, why in invalid.items() if e in known}
        for episode_id, (judge, reason) in sorted(invalid.items()):
            store.invalidate_episode(episode_id, f"invalid start (judge {judge}, bundle "
                                     f"{manifest.bundle_id}): {reason}", kind="invalid_start")
    finally:
        store.close()
    return ImportSummary(manifest.bundle_id, imported, duplicates, conflicts, sorted(labels),
                         invalid_starts=len(invalid))
