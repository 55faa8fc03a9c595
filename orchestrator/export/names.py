"""The names an exported dataset uses: its feature keys and the evaluation files beside
LeRobot's own, and the schema of `meta/ab_evaluation.json`."""

from __future__ import annotations

EXPORT_SCHEMA = "orchestrator.export/1"

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
