"""The whole export: checks, plan, LeRobot's writer into a temporary directory beside the root,
the evaluation files, then the directory swapped into place (`durable.swap_directory`), and
optionally pushed to the Hub."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import time
from collections.abc import Callable
from concurrent.futures import BrokenExecutor, Executor, Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.core.durable import swap_directory
from orchestrator.core.errors import BadInput, RuntimeFailure
from orchestrator.core.pids import process_running
from orchestrator.core.progress import terminal_for
from orchestrator.export.checks import (
    check_export_space,
    check_hub_token,
    check_lerobot_installed,
    check_not_running,
    check_repo_id,
    check_root,
    default_root,
)
from orchestrator.export.evidence import EVIDENCE_FILE, evidence_document, evidence_summary
from orchestrator.export.hub import push_dataset
from orchestrator.export.names import (
    CARD_FILE,
    EVALUATION_FILE,
    LAYOUT_FILE,
    PROTOCOL_FILE,
    REPORT_FILE,
    RIG_FILE,
    TRIALS_FILE,
)
from orchestrator.export.plan import ExportPlan, plan_export
from orchestrator.export.recorded import Recordings
from orchestrator.export.tables import (
    card_arguments,
    evaluation_summary,
    render_full_card,
    report_of,
    trial_rows,
    write_table,
)
from orchestrator.export.workers import HELPER_DIED, helpers
from orchestrator.export.writer import write_dataset
from orchestrator.store.sqlite import CampaignStore


@dataclass
class ExportResult:
    root: Path
    episodes: int
    frames: int
    cameras: list[str]
    seconds: float
    pushed_to: str | None = None
    forced: list[str] = field(default_factory=list)
    written: bool = True          # False: an export already current at `root` was pushed as it was


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
        if pid == os.getpid() or not process_running(pid):
            shutil.rmtree(child, ignore_errors=True)


def _cleanup(tmp: Path, created: list[Path]) -> None:
    shutil.rmtree(tmp, ignore_errors=True)
    for directory in created:  # innermost first; only the empty folders this export made
        try:
            directory.rmdir()
        except OSError:
            break


@dataclass
class _Prepared:
    plan: ExportPlan
    report_job: Future                 # (report JSON, its Markdown): `tables.report_of` on a helper
    judge_labels: dict[str, dict[str, Any]]
    evidence: dict[str, Any]           # meta/ab_evidence.json: the chain and the rows it covers
    recordings: Recordings             # the recordings' packets and frame statistics, on the helpers

    @property
    def report(self) -> dict[str, Any]:
        return self.report_job.result()[0]

    @property
    def report_md(self) -> str:
        return self.report_job.result()[1]


def _prepare(campaign_dir: Path, repo_id: str, root: Path | None, judge: str | None, include_aborted: bool,
             force: bool, push: bool, fps: str, say: Callable[[str], None], helpers: Executor) -> _Prepared:
    """Every check and everything read from the store, before anything is written; the report's
    statistics and the recordings' reading handed to the `helpers`."""
    check_repo_id(repo_id)
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
                           include_aborted=include_aborted, force=force, fps=fps)
        for line in plan.forced:
            say(f"warning (--force): {line}")
        recordings = Recordings(helpers, plan)
        report_job = helpers.submit(report_of, plan.labels.outcomes, store.directory.name)   # the plan's reading
        return _Prepared(plan, report_job, {j: store.latest_labels(j) for j in plan.judges},
                         evidence_document(store), recordings)
    finally:
        store.close()


def _write_all(prep: _Prepared, summary: dict[str, Any], out: Path,
               say: Callable[[str], None]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The dataset and the evaluation files into `out`; (LeRobot's info, the card arguments)."""
    plan = prep.plan
    info = write_dataset(plan, out, say, terminal_for(say), prep.recordings)
    write_table(trial_rows(plan, prep.judge_labels), out / TRIALS_FILE)
    (out / PROTOCOL_FILE).write_text(plan.campaign["protocol_text"], encoding="utf-8")
    (out / LAYOUT_FILE).write_text(plan.campaign["layout_text"], encoding="utf-8")
    (out / RIG_FILE).write_text(plan.campaign["rig_text"], encoding="utf-8")
    (out / REPORT_FILE).write_text(json.dumps(prep.report, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    (out / EVALUATION_FILE).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    (out / EVIDENCE_FILE).write_text(json.dumps(prep.evidence) + "\n", encoding="utf-8")
    card_kwargs = card_arguments(plan, summary, prep.report_md)
    (out / CARD_FILE).write_text(render_full_card(info, card_kwargs, plan.repo_id), encoding="utf-8")
    return info, card_kwargs


def _current_export(root: Path, summary: dict[str, Any], evidence: dict[str, Any]) -> int | None:
    """The frame count of the export at `root` when it is what this export would write: the same
    evidence document (the store's chain as it stands) and the same evaluation summary (labels,
    judges, options, files; its `exported_at` aside). None otherwise (or nothing readable there)."""
    try:
        written = json.loads((root / EVALUATION_FILE).read_text(encoding="utf-8"))
        same_evidence = json.loads((root / EVIDENCE_FILE).read_text(encoding="utf-8")) == json.loads(
            json.dumps(evidence))
        info = json.loads((root / "meta" / "info.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    now = json.loads(json.dumps(summary))
    written.pop("exported_at", None)
    now.pop("exported_at", None)
    return int(info.get("total_frames", 0)) if same_evidence and written == now else None


def export_campaign(campaign_dir: Path, *, repo_id: str, root: Path | None = None, judge: str | None = None,
                    include_aborted: bool = False, force: bool = False, push: bool = False,
                    private: bool = False, fps: str = "recorded",
                    say: Callable[[str], None] = print) -> ExportResult:
    """Export the campaign at `campaign_dir` (see the package docstring). Raises `BadInput` for
    refusals (nothing written) and `RuntimeFailure` for faults (nothing left half-written).
    The recordings and the report's statistics are read on helper processes (`workers`)."""
    started = time.monotonic()
    pool = helpers()
    try:
        return _export(Path(campaign_dir), repo_id, root, judge, include_aborted, force, push, private, fps,
                       say, pool, started)
    except BrokenExecutor:
        raise RuntimeFailure(f"{campaign_dir}: {HELPER_DIED}") from None
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _export(campaign_dir: Path, repo_id: str, root: Path | None, judge: str | None, include_aborted: bool,
            force: bool, push: bool, private: bool, fps: str, say: Callable[[str], None], pool: Executor,
            started: float) -> ExportResult:
    prep = _prepare(campaign_dir, repo_id, root, judge, include_aborted, force, push, fps, say, pool)
    plan = prep.plan
    root = plan.root
    summary = evaluation_summary(plan)  # refuses an altered store before anything is written
    summary["evidence"] = evidence_summary(prep.evidence)
    summary["files"]["evidence"] = EVIDENCE_FILE
    if push and (current := _current_export(root, summary, prep.evidence)) is not None:
        say(f"{root} is this campaign's export as it stands (same evidence, labels and options): "
            "pushing it without exporting again")
        prep.recordings.close()
        result = ExportResult(root=root, episodes=len(plan.episodes), frames=current, cameras=plan.cameras,
                              seconds=time.monotonic() - started, forced=plan.forced, written=False)
        result.pushed_to = push_dataset(root, repo_id, private=private,
                                        card_kwargs=card_arguments(plan, summary, prep.report_md))
        return result
    check_export_space(plan)
    say(f"exporting {len(plan.episodes)} episodes of {campaign_dir} as {repo_id} to {root} "
        f"(labels: {plan.labels.source}; {plan.fps} fps"
        + (f", the cameras' recorded rate: every {plan.stride} control steps" if plan.stride > 1 else "") + ")")

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
        info, card_kwargs = _write_all(prep, summary, tmp, say)
        swap_directory(tmp, root)
    except OSError as exc:
        _cleanup(tmp, created)
        raise RuntimeFailure(f"{root}: export failed: {exc.strerror or exc}"
                             f"{' (' + str(exc.filename) + ')' if getattr(exc, 'filename', None) else ''}; "
                             "nothing was replaced") from None
    except BaseException:
        _cleanup(tmp, created)
        raise
    frames = int(info.get("total_frames", 0))
    result = ExportResult(root=root, episodes=len(plan.episodes), frames=frames, cameras=plan.cameras,
                          seconds=time.monotonic() - started, forced=plan.forced)
    if push:
        result.pushed_to = push_dataset(root, repo_id, private=private, card_kwargs=card_kwargs)
    return result
