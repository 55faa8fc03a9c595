"""The evaluation files beside LeRobot's: `meta/ab_trials.parquet` (one row per episode),
`meta/ab_evaluation.json` (identity, label source, encodings), `meta/report.json` and the
dataset card `README.md`."""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

from orchestrator.analysis.outcomes import ABORT_RULE, OutcomeSet, outcomes_from_store
from orchestrator.design.schedule import Trial
from orchestrator.export.names import (
    CARD_FILE,
    CARD_TAGS,
    EXPORT_SCHEMA,
    F_FAILURE,
    F_MARK,
    F_POLICY,
    F_SUCCESS,
    LAYOUT_FILE,
    LICENSE,
    PROTOCOL_FILE,
    REPORT_FILE,
    RIG_FILE,
    TRIALS_FILE,
)
from orchestrator.export.plan import EpisodePlan, ExportPlan
from orchestrator.rigs.profile import campaign_rig_kind
from orchestrator.store.sqlite import SETTLES_EXCLUDED, SETTLES_FAILURE, CampaignStore

SETTLED_STATUS = {SETTLES_FAILURE: "scored_failure", SETTLES_EXCLUDED: "excluded"}


def _trial_cells(plan: ExportPlan, t: Trial, aborted: int) -> dict[str, Any]:
    """The columns every row has: which trial, where, which policy."""
    mark = next((m for m in plan.protocol.layout.marks if m.id == t.mark_id), None)
    return {"slot": t.slot, "trial": t.slot + 1, "unit": t.unit, "mark_id": t.mark_id,
            "stratum": mark.stratum if mark else None, "mark_x_m": mark.x if mark else None,
            "mark_y_m": mark.y if mark else None, "repeat": t.repeat, "position": t.position,
            "policy": t.policy, "policy_index": plan.policies.index(t.policy), "seed": t.seed,
            "attempts": t.attempts, "aborted_attempts": aborted}


def _episode_row(plan: ExportPlan, ep: EpisodePlan, aborted: int,
                 judge_labels: dict[str, dict[str, Any]]) -> dict[str, Any]:
    t, rec = ep.trial, ep.record
    row: dict[str, Any] = {
        "episode_index": ep.index, "exported": True, "status": "done", "episode_id": t.episode_id,
        **_trial_cells(plan, t, aborted),
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
        lab = latest.get(t.episode_id) if t.episode_id is not None else None
        row[f"label.{judge}"] = lab.label if lab else None
        row[f"failure_mode.{judge}"] = lab.failure_mode if lab else None
        row[f"stage.{judge}"] = lab.stage if lab else None      # the progress ladder's furthest stage
    return row


def _settled_rows(plan: ExportPlan, aborted_by_slot: Counter) -> list[dict[str, Any]]:
    """One row per trial the protocol's `aborts` rules settled without an episode: scored as its
    policy's failure (counted in the report's pairs, so it must be in the table that claims to
    hold the evaluation) or excluded past its re-run limit (listed, not counted)."""
    settling = {a["slot"]: a for a in plan.attempts if a["status"] == "aborted" and a.get("settles")}
    exported = {ep.trial.slot for ep in plan.episodes}
    rows = []
    for t in plan.trials:
        attempt = settling.get(t.slot)
        if attempt is None or t.slot in exported or t.state != "done":
            continue
        scored = attempt["settles"] == SETTLES_FAILURE
        rows.append({
            "episode_index": -1, "exported": False, "status": SETTLED_STATUS[attempt["settles"]],
            "episode_id": attempt["episode_id"], **_trial_cells(plan, t, aborted_by_slot.get(t.slot, 0)),
            "reason": attempt.get("reason"), "abort_class": attempt.get("abort_class"),
            "success": False if scored else None,
            "failure_mode": f"aborted ({attempt.get('abort_class')})" if scored else None,
            "label_source": ABORT_RULE,
        })
    return rows


def trial_rows(plan: ExportPlan, judge_labels: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """`meta/ab_trials.parquet`: one row per exported episode, one per trial the `aborts` rules
    settled without an episode (`status` scored_failure / excluded), and the aborted attempts
    if asked."""
    aborted_by_slot = Counter(a["slot"] for a in plan.attempts if a["status"] == "aborted")
    rows = [_episode_row(plan, ep, aborted_by_slot.get(ep.trial.slot, 0), judge_labels) for ep in plan.episodes]
    rows += _settled_rows(plan, aborted_by_slot)
    if plan.include_aborted:
        trial_by_slot = {t.slot: t for t in plan.trials}
        for attempt in plan.attempts:
            if attempt["status"] != "aborted":
                continue
            t = trial_by_slot[attempt["slot"]]
            rows.append({
                "episode_index": -1, "exported": False, "status": "aborted", "episode_id": attempt["episode_id"],
                **_trial_cells(plan, t, aborted_by_slot.get(t.slot, 0)), "reason": attempt.get("reason"),
                "label_source": plan.labels.source,
                "timing_json": json.dumps({"started_at": attempt.get("started_at"),
                                           "ended_at": attempt.get("ended_at")}),
            })
    return rows


def write_table(rows: list[dict[str, Any]], path: Path) -> None:
    import pandas as pd

    frame = pd.DataFrame(rows)
    for column in ("success", "physics_success", "exported"):
        if column in frame:
            frame[column] = frame[column].astype("boolean")
    frame.to_parquet(path, index=False)



def evaluation_summary(plan: ExportPlan) -> dict[str, Any]:
    """`meta/ab_evaluation.json`: identity, label source, the encodings of the int columns."""
    c = plan.campaign   # its frozen texts were checked against their SHA-256 (CampaignStore.frozen_protocol)
    done = sum(1 for t in plan.trials if t.state == "done")
    return {
        "schema": EXPORT_SCHEMA,
        "tool": "so101-ab-orchestrator",
        "exported_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "repo_id": plan.repo_id,
        "campaign": {
            "id": c["id"], "name": c["name"], "simulated": bool(c["simulated"]), "rig_kind": campaign_rig_kind(c),
            "created_at": c["created_at"], "finished_at": c.get("finished_at"),
            "stop_reason": c.get("stop_reason"), "trials": len(plan.trials), "done": done,
            "aborted_attempts": sum(1 for a in plan.attempts if a["status"] == "aborted"),
            "settled_without_episode": {status: sum(1 for a in plan.attempts if a["status"] == "aborted"
                                                    and a.get("settles") == settles)
                                        for settles, status in SETTLED_STATUS.items()},
            "protocol_sha256": c["protocol_sha256"], "layout_sha256": c["layout_sha256"],
        },
        "episodes": len(plan.episodes),
        "fps": plan.fps,
        "control_fps": plan.control_fps,
        "task": plan.task,
        "cameras": {cam: {"height": h, "width": w,
                          "recorded_fps": (plan.rig.cameras[cam].fps if plan.rig and cam in plan.rig.cameras
                                           else None)}
                    for cam, (h, w) in plan.camera_shapes.items()},
        "labels": {"judge": plan.labels.requested, "source": plan.labels.source, "judges": plan.judges,
                   "unlabelled_episodes": sum(1 for e in plan.episodes if e.success is None)},
        "forced": plan.forced,
        "include_aborted": plan.include_aborted,
        "report_source": "orchestrator.report",
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



def report_json(store: CampaignStore, judge: str | None) -> tuple[dict[str, Any], str]:
    """The campaign's report JSON (`orchestrator.report/1`, the same numbers `orchestrator report
    --format json` prints) and its Markdown, for the card."""
    return report_of(outcomes_from_store(store, judge), store.directory.name)


def report_of(data: OutcomeSet, campaign_name: str) -> tuple[dict[str, Any], str]:
    """`report_json` of the outcomes `data` read from the store of the campaign folder
    `campaign_name` (a published dataset names the campaign, not where it sat on this machine):
    the statistics only, no store, so an export's helper process computes it (`workers`)."""
    from orchestrator.analysis.report import build_report, render_markdown, to_dict

    report = build_report(replace(data, source=campaign_name))
    return json.loads(json.dumps(to_dict(report), allow_nan=False)), render_markdown(report)


def card_arguments(plan: ExportPlan, summary: dict[str, Any], report_md: str) -> dict[str, Any]:
    """Keyword arguments for LeRobot's dataset card (its template + our description)."""
    from orchestrator.export.dataset_card import render_description

    return {"dataset_description": render_description(plan, summary, report_md),
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

