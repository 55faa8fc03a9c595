"""The dataset card (README.md) of an exported campaign: the description LeRobot's card
template receives as `dataset_description`.

The results are the report's own Markdown (`orchestrator.analysis.report`, the text `orchestrator report
--format md` prints): per-policy Wilson intervals, the paired 2x2 table of each comparison,
McNemar (mid-p, exact, asymptotic), the paired difference with its interval, strata, judges.
Nothing is computed or formatted here. Then the frozen protocol (with its SHA-256), what the
columns mean, and how to load the data.
"""

from __future__ import annotations

import json
from typing import Any

from orchestrator.design.judge_facts import success_test_text
from orchestrator.store.records import RIG_KIND_WORDS

PRIMARY_NAMES = {"mcnemar_midp": "McNemar mid-p", "mcnemar_exact": "McNemar exact"}


def _spec(spec: Any) -> str:
    data = spec.model_dump(exclude_none=True) if hasattr(spec, "model_dump") else dict(spec)
    return ", ".join(f"{k}: {v}" for k, v in data.items())


def _nested(report_md: str) -> str:
    """The report's Markdown without its title, its headings demoted to nest under a section."""
    lines = report_md.strip().splitlines()
    if lines and lines[0].startswith("# "):
        lines = lines[1:]
    return "\n".join(("#" + line) if line.startswith("#") else line for line in lines).strip()


def _intro(plan: Any, summary: dict[str, Any]) -> list[str]:
    """Who compared what, on which arm; the campaign; frames and cameras; labels; protocol hash."""
    protocol = plan.protocol.protocol
    campaign = summary["campaign"]
    lines: list[str] = []
    add = lines.append
    kind = RIG_KIND_WORDS[campaign["rig_kind"]] if campaign.get("rig_kind") else (
        "simulated SO-101 (MuJoCo)" if campaign["simulated"] else "real SO-101 arm")
    add(f"Evaluation rollouts of a **blinded, paired, interleaved A/B campaign** comparing "
        f"{len(plan.policies)} policies ({', '.join(plan.policies)}) on a {kind}, exported by "
        f"so101-ab-orchestrator with LeRobot's own dataset writer.")
    add("")
    add(f"- Campaign `{campaign['name']}` (id `{campaign['id']}`): {campaign['done']} of "
        f"{campaign['trials']} scheduled trials done, {campaign['aborted_attempts']} aborted attempt(s) "
        f"(re-run, not counted){'; stopped: ' + str(campaign['stop_reason']) if campaign.get('stop_reason') not in (None, 'complete') else ''}.")
    control_fps = summary.get("control_fps", summary["fps"])
    rate = (f"{summary['fps']} fps (the cameras' recorded rate: one row per recorded frame, with the joint "
            f"state and action of the control step it was taken at; the control loop ran at {control_fps} Hz)"
            if summary["fps"] != control_fps else f"{summary['fps']} fps")
    add(f"- {summary['episodes']} episodes, one per completed trial, {rate}, "
        f"{protocol.episode.duration_s:g} s each "
        f"({round(protocol.episode.duration_s * summary['fps'])} frames); cameras: "
        + ", ".join(f"`{cam}` {v['width']}x{v['height']}"
                    + (f" (recorded at {v['recorded_fps']} fps)" if v.get("recorded_fps") else "")
                    for cam, v in summary["cameras"].items()) + ".")
    add(f"- Success labels: **{summary['labels']['source']}**.")
    add(f"- Protocol SHA-256: `{campaign['protocol_sha256']}` (frozen before the first trial; "
        f"the text is in `meta/protocol.yaml`).")
    if summary.get("evidence"):
        evidence = summary["evidence"]
        add(f"- Evidence chain head: `{evidence['head']}` ({evidence['entries']} entries over every trial, "
            f"attempt, episode, label, event and session row; the chain and the rows the outcomes come from "
            f"are in `{evidence['file']}`; check them with `orchestrator verify DATASET_DIR`).")
    if summary.get("forced"):
        add("")
        add("> **Exported with `--force`, read with care:** " + "; ".join(summary["forced"]) + ".")
    add("")
    return lines


def _results(plan: Any, report_md: str) -> list[str]:
    """The report's own Markdown, and the methods it used."""
    protocol = plan.protocol.protocol
    lines: list[str] = []
    add = lines.append
    primary = protocol.analysis.primary
    add("## Results")
    add("")
    add(_nested(report_md))
    add("")
    add(f"Alpha {protocol.analysis.alpha:g}; primary test {PRIMARY_NAMES.get(primary, primary)}. "
        "Wilson score intervals (Wilson 1927); McNemar exact and mid-p (Fagerland, Lydersen & Laake "
        "2013); paired difference interval Newcombe (1998) method 10"
        + ("; with repeats on a mark the mark is the unit: clustered McNemar over marks (Durkalski et al. "
           "2003) and Newcombe with the design effect (Rao & Scott 1992)" if protocol.trials_per_layout > 1 else "")
        + ". The full report is in `meta/report.json` (schema `orchestrator.report/1`).")
    add("")
    return lines


def _protocol(plan: Any, summary: dict[str, Any]) -> list[str]:
    """The frozen protocol, spelled out."""
    protocol = plan.protocol.protocol
    layout = plan.protocol.layout
    primary = protocol.analysis.primary
    lines: list[str] = []
    add = lines.append
    add("## Protocol")
    add("")
    add(f"- Name: `{protocol.name}`; task: \"{protocol.task}\"")
    strata = sorted({m.stratum for m in layout.marks})
    add(f"- Layout `{layout.name}`: {len(layout.marks)} marked cube positions "
        f"(strata: {', '.join(strata)}), cube {layout.cube.size_m * 100:g} cm; "
        f"{protocol.trials_per_layout} trial(s) per policy per mark.")
    for label, spec in protocol.policies.items():
        add(f"- Policy **{label}**: {_spec(spec)}")
    add(f"- Order: {protocol.order} (policies interleaved per mark, first position balanced), seed {protocol.seed}.")
    add(f"- Episode: {protocol.episode.fps} fps for {protocol.episode.duration_s:g} s (fixed length).")
    s = protocol.success
    add(f"- Success: {success_test_text(s.min_height_m, s.hold_s)} ({s.kind}).")
    stopping = protocol.analysis.stopping
    add(f"- Analysis: {PRIMARY_NAMES.get(primary, primary)}, alpha {protocol.analysis.alpha:g}, stopping: "
        f"{stopping if isinstance(stopping, str) else json.dumps(stopping.model_dump())}.")
    add(f"- Judging: {protocol.judging.judges} blind judge(s) from video; failure modes "
        f"{', '.join(protocol.judging.failure_modes) or 'none'}; judges with labels: "
        f"{', '.join(summary['labels']['judges']) or 'none'}.")
    add("")
    return lines


def _contents(summary: dict[str, Any]) -> list[str]:
    """The features, the evaluation columns and files."""
    lines: list[str] = []
    add = lines.append
    add("## Contents")
    add("")
    add("Standard LeRobotDataset v3 features: `observation.state` and `action` (6 joint positions: "
        "`shoulder_pan.pos` ... `gripper.pos`, degrees, gripper 0-100), "
        + ", ".join(f"`observation.images.{cam}`" for cam in summary["cameras"])
        + " (video; a camera recorded below the control fps holds its latest frame), and the task string.")
    add("")
    add("Per-frame evaluation columns (constant over an episode; int64, shape (1,)):")
    add("")
    add("| Column | Meaning | Values |")
    add("|---|---|---|")
    for key, feature in summary["features"].items():
        values = feature["values"]
        if isinstance(values, dict):
            shown = ", ".join(f"{k} = {v}" for k, v in values.items())
        else:
            shown = ", ".join(f"{i} = {v}" for i, v in enumerate(values))
            if key == "ab.failure_mode":
                shown = "-1 = none, " + shown
        add(f"| `{key}` | {feature['meaning']} | {shown} |")
    add("")
    add("Evaluation files:")
    add("")
    add("- `meta/ab_trials.parquet`: one row per exported episode (`episode_index`): trial slot, mark, stratum, "
        "repeat, order position, policy, seed, attempts, the label used (`success`, `failure_mode`), "
        "every judge's label (`label.<judge>`, `failure_mode.<judge>`, `stage.<judge>`: the furthest stage of the "
        "progress ladder, recorded only), physics (`physics_success`, "
        "`max_lift_m`, `time_to_success_s`), safety events and control-loop timing (`timing.*`); "
        "a trial the protocol's `aborts` rules settled without an episode is a row with `exported = false` "
        "and `status` `scored_failure` (counted as its policy's failure, `label_source` \"aborts rule\") or "
        "`excluded` (past its re-run limit, not counted)"
        + ("; aborted attempts as rows with `exported = false` (their recordings are deleted when they "
           "abort, so no frames exist)" if summary.get("include_aborted") else "") + ".")
    add("- `meta/ab_evaluation.json`: the index encodings above, label source, campaign identity.")
    add("- `meta/protocol.yaml`, `meta/layout.yaml`, `meta/rig.yaml`: the frozen protocol, layout and rig profile.")
    add("- `meta/report.json`: the report (`orchestrator.report/1`).")
    add("")
    return lines


def _how_to_load(plan: Any, summary: dict[str, Any]) -> list[str]:
    """Loading with LeRobot and pandas: from the exported folder (no Hub needed), then from the Hub
    once pushed. `video_backend="pyav"`: LeRobot's default decoder (torchcodec) prints a long
    traceback first where it cannot load, before falling back."""
    repo_id = summary["repo_id"]
    lines: list[str] = []
    add = lines.append
    add("## How to load")
    add("")
    add("```python")
    add("import pandas as pd")
    add("from lerobot.datasets.lerobot_dataset import LeRobotDataset")
    add("from lerobot.utils.constants import HF_LEROBOT_HOME")
    add("")
    add(f'root = HF_LEROBOT_HOME / "{repo_id}"   # where the export writes by default (else its --root)')
    add(f'dataset = LeRobotDataset("{repo_id}", root=root, video_backend="pyav")')
    add('trials = pd.read_parquet(root / "meta" / "ab_trials.parquet")')
    add("")
    add("# e.g. only the successful rollouts of one policy, for fine-tuning")
    first = plan.policies[0]
    add(f'keep = trials[(trials.exported) & (trials.success == True) & (trials.policy == "{first}")]')
    add(f'successes = LeRobotDataset("{repo_id}", root=root, episodes=keep.episode_index.tolist(), '
        'video_backend="pyav")')
    add("```")
    add("")
    add(f'On the Hub (once pushed with `--push`): `LeRobotDataset("{repo_id}", video_backend="pyav")` and '
        f'`pd.read_parquet("hf://datasets/{repo_id}/meta/ab_trials.parquet")`.')
    return lines


def render_description(plan: Any, summary: dict[str, Any], report_md: str) -> str:
    """Markdown for the card: results, paired tables, tests, protocol, contents, loading."""
    lines = (_intro(plan, summary) + _results(plan, report_md) + _protocol(plan, summary) + _contents(summary)
             + _how_to_load(plan, summary))
    return "\n".join(lines) + "\n"
