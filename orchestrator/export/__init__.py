"""Export a campaign as a LeRobotDataset (v3) with its evaluation, and push it to the Hub.

One LeRobot episode per completed trial, in run order, written through LeRobot's own
`LeRobotDataset.create` / `add_frame` / `save_episode` / `finalize`:

- `observation.state`, `action`: float32 (6,), named by the SO-101 joint keys, from the
  episode's `timeseries.npz` (one row per control step);
- `observation.images.<camera>`: video features, the recorded H.264 joined by stream copy into
  LeRobot's video files when the recordings allow (`remux`, `remux_writer`; every frame time then
  found as the recorded frame's packet and the dataset loaded by `LeRobotDataset`, `video_check`), else
  decoded from the recorded MP4s (PyAV) and re-encoded, the export saying why. A camera recorded
  at a lower fps than the dataset's contributes, at each row, the latest frame taken at or before
  that step (its recorded frame times say when), so every row has an image and none is taken
  from the future;
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

from orchestrator.export.checks import check_export_space, check_repo_id, check_root, default_root
from orchestrator.export.frames import frame_indices
from orchestrator.export.hub import push_dataset
from orchestrator.export.names import (
    CARD_FILE,
    EVALUATION_FILE,
    EXPORT_SCHEMA,
    F_ACTION,
    F_FAILURE,
    F_IMAGE,
    F_MARK,
    F_POLICY,
    F_STATE,
    F_SUCCESS,
    LAYOUT_FILE,
    PROTOCOL_FILE,
    REPORT_FILE,
    RIG_FILE,
    TRIALS_FILE,
)
from orchestrator.export.plan import EpisodePlan, ExportPlan, Labels, campaign_labels, plan_export
from orchestrator.export.run import ExportResult, export_campaign
from orchestrator.export.tables import evaluation_summary, report_json, trial_rows

__all__ = ["CARD_FILE", "EVALUATION_FILE", "EXPORT_SCHEMA", "F_ACTION", "F_FAILURE", "F_IMAGE", "F_MARK",
           "F_POLICY", "F_STATE", "F_SUCCESS", "LAYOUT_FILE", "PROTOCOL_FILE", "REPORT_FILE", "RIG_FILE",
           "TRIALS_FILE", "EpisodePlan", "ExportPlan", "ExportResult", "Labels", "campaign_labels",
           "check_export_space", "check_repo_id", "check_root", "default_root", "evaluation_summary",
           "export_campaign", "frame_indices", "plan_export", "push_dataset", "report_json", "trial_rows"]
