"""The dataset card (README.md) of an exported campaign: the description LeRobot's card
template receives as `dataset_description`.

Everything numeric comes from the report JSON (`orchestrator.report/1`): per-policy results
with Wilson intervals, the paired 2x2 table of each comparison, McNemar (mid-p, exact,
asymptotic), the paired difference with its interval. Nothing is computed here. Then the
frozen protocol (with its SHA-256), what the columns mean, and how to load the data.
"""

from __future__ import annotations

import json
from typing import Any

PRIMARY_NAMES = {"mcnemar_midp": "McNemar mid-p", "mcnemar_exact": "McNemar exact"}


def _p(value: Any) -> str:
    if value is None:
        return "n/a"
    value = float(value)
    return "< 0.0001" if value < 1e-4 else f"{value:.4f}"


def _num(value: Any) -> str:
    return "n/a" if value is None else f"{float(value):.2f}"


def _rate(value: Any) -> str:
    return "n/a" if value is None else f"{100 * float(value):.1f}%"


def _interval(pair: Any, percent: bool = True) -> str:
    if not pair or pair[0] is None or pair[1] is None:
        return "n/a"
    lo, hi = float(pair[0]), float(pair[1])
    return f"[{100 * lo:.1f}%, {100 * hi:.1f}%]" if percent else f"[{lo:+.3f}, {hi:+.3f}]"


def _points(pair: Any) -> str:
    if not pair or pair[0] is None or pair[1] is None:
        return "n/a"
    return f"{100 * float(pair[0]):+.1f} to {100 * float(pair[1]):+.1f} points"


def _spec(spec: Any) -> str:
    data = spec.model_dump(exclude_none=True) if hasattr(spec, "model_dump") else dict(spec)
    return ", ".join(f"{k}: {v}" for k, v in data.items())


def render_description(plan: Any, summary: dict[str, Any], report: dict[str, Any],
                       report_md: str | None = None) -> str:
    """Markdown for the card: results, paired tables, tests, protocol, contents, loading."""
    protocol = plan.protocol.protocol
    layout = plan.protocol.layout
    campaign = summary["campaign"]
    repo_id = summary["repo_id"]
    lines: list[str] = []
    add = lines.append

    kind = "simulated SO-101 (MuJoCo)" if campaign["simulated"] else "real SO-101 arm"
    add(f"Evaluation rollouts of a **blinded, paired, interleaved A/B campaign** comparing "
        f"{len(plan.policies)} policies ({', '.join(plan.policies)}) on a {kind}, exported by "
        f"so101-ab-orchestrator with LeRobot's own dataset writer.")
    add("")
    add(f"- Campaign `{campaign['name']}` (id `{campaign['id']}`): {campaign['done']} of "
        f"{campaign['trials']} scheduled trials done, {campaign['aborted_attempts']} aborted attempt(s) "
        f"(re-run, not counted){'; stopped: ' + str(campaign['stop_reason']) if campaign.get('stop_reason') not in (None, 'complete') else ''}.")
    add(f"- {summary['episodes']} episodes, one per completed trial, {summary['fps']} fps, "
        f"{protocol.episode.duration_s:g} s each ({protocol.episode.frames} frames); cameras: "
        + ", ".join(f"`{cam}` {v['width']}x{v['height']}"
                    + (f" (recorded at {v['recorded_fps']} fps)" if v.get("recorded_fps") else "")
                    for cam, v in summary["cameras"].items()) + ".")
    add(f"- Success labels: **{summary['labels']['source']}**.")
    add(f"- Protocol SHA-256: `{campaign['protocol_sha256']}` (frozen before the first trial; "
        f"the text is in `meta/protocol.yaml`).")
    if summary.get("forced"):
        add("")
        add("> **Exported with `--force`, read with care:** " + "; ".join(summary["forced"]) + ".")
    add("")

    add("## Results")
    add("")
    if report.get("verdict"):
        add(f"**{report['verdict']}**")
        add("")
    add("| Policy | Successes / trials | Success rate | Wilson 95% CI |")
    add("|---|---|---|---|")
    for label in plan.policies:
        p = report.get("policies", {}).get(label, {})
        add(f"| {label} | {p.get('successes', 0)} / {p.get('trials', 0)} | {_rate(p.get('rate'))} | "
            f"{_interval(p.get('wilson95'))} |")
    add("")
    primary = protocol.analysis.primary
    for c in report.get("comparisons", []):
        a, b, t, m = c["a"], c["b"], c["table"], c["mcnemar"]
        add(f"### Paired comparison {a} vs {b} ({c['pairs']} pairs: same mark, same repeat)")
        add("")
        add(f"| | {b} succeeded | {b} failed |")
        add("|---|---|---|")
        add(f"| **{a} succeeded** | {t['both']} (both) | {t['a_only']} ({a} only) |")
        add(f"| **{a} failed** | {t['b_only']} ({b} only) | {t['neither']} (neither) |")
        add("")
        marker = " (primary, pre-registered)"
        add(f"- McNemar mid-p{marker if primary == 'mcnemar_midp' else ''}: **{_p(m.get('mid_p'))}**; "
            f"exact{marker if primary == 'mcnemar_exact' else ''}: {_p(m.get('exact_p'))}; "
            f"chi-squared {_num(m.get('chi2'))} (p {_p(m.get('chi2_p'))}), with continuity "
            f"correction {_num(m.get('chi2_cc'))} (p {_p(m.get('chi2_cc_p'))}).")
        d = c.get("difference", {})
        est = d.get("estimate")
        add(f"- Difference in success rate {a} - {b}: "
            f"{'n/a' if est is None else f'{100 * est:+.1f} points'}, 95% CI {_points(d.get('ci95'))} "
            f"({d.get('method', 'newcombe')}).")
        if len(report.get("comparisons", [])) > 1 and c.get("holm_mid_p") is not None:
            add(f"- Holm-adjusted mid-p over all pairs: {_p(c['holm_mid_p'])}.")
        if c.get("verdict"):
            add(f"- {c['verdict']}")
        add("")
    if "cochran_q" in report:
        q = report["cochran_q"]
        add(f"Cochran's Q over all policies: Q = {_num(q.get('q'))}, df = {q.get('df')}, p = {_p(q.get('p'))}.")
        add("")
    add(f"Alpha {protocol.analysis.alpha:g}; primary test {PRIMARY_NAMES.get(primary, primary)}. "
        "Wilson score intervals (Wilson 1927); McNemar exact and mid-p (Fagerland, Lydersen & Laake "
        "2013); paired difference interval Newcombe (1998) method 10. The full report is in "
        "`meta/report.json` (schema `orchestrator.report/1`).")
    add("")

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
    add(f"- Success: cube bottom lifted >= {s.min_height_m * 100:g} cm and held >= {s.hold_s:g} s ({s.kind}).")
    stopping = protocol.analysis.stopping
    add(f"- Analysis: {PRIMARY_NAMES.get(primary, primary)}, alpha {protocol.analysis.alpha:g}, stopping: "
        f"{stopping if isinstance(stopping, str) else json.dumps(stopping.model_dump())}.")
    add(f"- Judging: {protocol.judging.judges} blind judge(s) from video; failure modes "
        f"{', '.join(protocol.judging.failure_modes) or 'none'}; judges with labels: "
        f"{', '.join(summary['labels']['judges']) or 'none'}.")
    add("")

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
    add("- `meta/ab_trials.parquet`: one row per episode (`episode_index`): trial slot, mark, stratum, "
        "repeat, order position, policy, seed, attempts, the label used (`success`, `failure_mode`), "
        "every judge's label (`label.<judge>`, `failure_mode.<judge>`), physics (`physics_success`, "
        "`max_lift_m`, `time_to_success_s`), safety events and control-loop timing (`timing.*`)"
        + ("; aborted attempts as rows with `exported = false` (their recordings are deleted when they "
           "abort, so no frames exist)" if summary.get("include_aborted") else "") + ".")
    add("- `meta/ab_evaluation.json`: the index encodings above, label source, campaign identity.")
    add("- `meta/protocol.yaml`, `meta/layout.yaml`, `meta/rig.yaml`: the frozen protocol, layout and rig profile.")
    add("- `meta/report.json`: the report (`orchestrator.report/1`).")
    add("")

    add("## How to load")
    add("")
    add("```python")
    add("import pandas as pd")
    add("from lerobot.datasets.lerobot_dataset import LeRobotDataset")
    add("")
    add(f'dataset = LeRobotDataset("{repo_id}")')
    add(f'trials = pd.read_parquet("hf://datasets/{repo_id}/meta/ab_trials.parquet")')
    add("")
    add("# e.g. only the successful rollouts of one policy, for fine-tuning")
    first = plan.policies[0]
    add(f'keep = trials[(trials.exported) & (trials.success == True) & (trials.policy == "{first}")]')
    add(f'successes = LeRobotDataset("{repo_id}", episodes=keep.episode_index.tolist())')
    add("```")
    add("")
    add("Or from a local copy: `LeRobotDataset(repo_id, root=PATH)`.")
    if report_md:
        add("")
        add("## Full report")
        add("")
        body = report_md.strip()
        # demote the report's headings so they nest under this section
        body = "\n".join(("##" + line) if line.startswith("#") else line for line in body.splitlines())
        add(body)
    return "\n".join(lines) + "\n"
