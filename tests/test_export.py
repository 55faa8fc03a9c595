"""`orchestrator export`: a recorded campaign as a LeRobotDataset (v3), read back with LeRobot.

Offline throughout (HF_HUB_OFFLINE=1, HF_HOME / HF_LEROBOT_HOME in a temporary folder). The
Hub is replaced at the boundary of `huggingface_hub.HfApi` (create_repo, upload_folder, tags)
and of the card upload, so `--push` runs LeRobot's real `push_to_hub` down to the HTTP layer.
The campaign is the small one of `tests/support/export_campaign.py` (3 marks x 2 policies, 10 fps x 1 s,
a 10 fps and a 5 fps camera, one aborted attempt), whose images encode their control step.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from orchestrator.store.sqlite import CampaignStore
from support.cli import run_module, unprivileged
from support.export_campaign import FPS, REPO, STEPS, label_all, level, make_campaign, state_value, tree_digest

REPO_ID = "tester/so101-ab-export"
TOKEN = "hf_EXPORTTESTTOKENdoNotLeakThis0123456789"


@pytest.fixture(scope="module")
def sim_campaign(tmp_path_factory, hf_env) -> Path:
    """Complete simulated campaign, nobody judged: physics labels count."""
    return make_campaign(tmp_path_factory.mktemp("sim"))


@pytest.fixture(scope="module")
def exported(sim_campaign, tmp_path_factory):
    """The sim campaign exported once (shared by the read-back tests)."""
    from orchestrator.cli import main

    root = tmp_path_factory.mktemp("out") / "dataset"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["export", str(sim_campaign), "--repo-id", REPO_ID, "--root", str(root)])
    assert code == 0, out.getvalue()
    return root, out.getvalue()


def store_rows(campaign: Path):
    store = CampaignStore.open_readonly(campaign)
    try:
        return store.trials(), {e["id"]: e for e in store.episodes()}, store.attempts()
    finally:
        store.close()


def siblings(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir()) if path.parent.exists() else []


def load(root: Path):
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    return LeRobotDataset(REPO_ID, root=root, video_backend="pyav")


def columns(dataset) -> dict[str, np.ndarray]:
    """Every non-video column of the dataset's parquet data, read through LeRobot."""
    table = dataset.hf_dataset.with_format(None)
    keys = ["episode_index", "frame_index", "timestamp", "observation.state", "action",
            "ab.policy", "ab.mark", "ab.success", "ab.failure_mode"]
    return {k: np.asarray(table[k]) for k in keys}


# ------------------------------------------------------------------ the core install


def test_importing_export_does_not_import_torch_or_lerobot():
    code = ("import sys, orchestrator.export, orchestrator.export.dataset_card, orchestrator.commands.export, "
            "orchestrator.cli; orchestrator.cli.build_parser(); "
            "bad = [m for m in ('torch', 'lerobot', 'datasets', 'huggingface_hub') if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# ------------------------------------------------------------------ the dataset, read back


@pytest.mark.slow
def test_export_reads_back_with_lerobot(exported, sim_campaign):
    root, output = exported
    trials, episodes, _ = store_rows(sim_campaign)
    dataset = load(root)
    assert dataset.num_episodes == len(trials) == 6
    assert dataset.fps == FPS
    assert dataset.num_frames == len(trials) * STEPS
    assert list(dataset.meta.episodes["length"]) == [STEPS] * len(trials)  # fps x duration each
    assert dataset.meta.robot_type == "sim_so101"
    assert set(dataset.meta.video_keys) == {"observation.images.front", "observation.images.wrist"}
    assert dataset.features["observation.state"]["names"][0] == "shoulder_pan.pos"
    assert list(dataset.meta.tasks.index) == ["Pick up the cube and hold it above the table"]

    evaluation = json.loads((root / "meta" / "ab_evaluation.json").read_text())
    policies = evaluation["features"]["ab.policy"]["values"]
    marks = evaluation["features"]["ab.mark"]["values"]
    assert policies == ["A", "B"] and marks == ["M01", "M02", "M03"]
    data = columns(dataset)
    for index, trial in enumerate(trials):  # run order = episode order
        rows = data["episode_index"] == index
        assert rows.sum() == STEPS
        assert set(data["ab.policy"][rows]) == {policies.index(trial.policy)}
        assert set(data["ab.mark"][rows]) == {marks.index(trial.mark_id)}
        physics = episodes[trial.episode_id]["physics_success"]
        assert set(data["ab.success"][rows]) == {physics}
        assert set(data["ab.failure_mode"][rows]) == {-1}  # physics gives no failure mode
        state = data["observation.state"][rows]
        expected = np.array([state_value(trial.slot, s) for s in range(STEPS)], dtype=np.float32)
        np.testing.assert_allclose(state, expected, rtol=0, atol=1e-5)
        np.testing.assert_allclose(data["action"][rows], expected + 0.5, rtol=0, atol=1e-5)
        np.testing.assert_allclose(data["timestamp"][rows], np.arange(STEPS) / FPS, atol=1e-6)

    # videos decode; front (10 fps) shows each step's frame, wrist (5 fps) holds the previous one
    episode = 3
    start = int(dataset.meta.episodes["dataset_from_index"][episode])
    for step in range(STEPS):
        item = dataset[start + step]
        front = item["observation.images.front"]
        assert tuple(front.shape) == (3, 48, 64)
        front_level = float(front.mean()) * 255
        wrist_level = float(item["observation.images.wrist"].mean()) * 255
        assert abs(front_level - level(step)) < 6, (step, front_level)
        assert abs(wrist_level - level(2 * (step // 2))) < 6, (step, wrist_level)
    assert "exported 6 episodes (60 frames, cameras front, wrist)" in output


@pytest.mark.slow
def test_evaluation_files_and_card(exported, sim_campaign):
    import hashlib

    import pandas as pd

    root, _ = exported
    trials, episodes, attempts = store_rows(sim_campaign)
    store = CampaignStore.open_readonly(sim_campaign)
    campaign = store.campaign()
    store.close()

    table = pd.read_parquet(root / "meta" / "ab_trials.parquet")
    assert list(table.episode_index) == list(range(len(trials)))
    assert list(table.slot) == [t.slot for t in trials]
    assert list(table.mark_id) == [t.mark_id for t in trials]
    assert list(table.policy) == [t.policy for t in trials]
    assert list(table.position) == [t.position for t in trials]
    assert list(table["repeat"]) == [t.repeat for t in trials]
    assert list(table.success) == [bool(episodes[t.episode_id]["physics_success"]) for t in trials]
    assert list(table["label.physics"]) == ["success" if episodes[t.episode_id]["physics_success"]
                                            else "failure" for t in trials]
    assert list(table["timing.policy_p50_ms"]) == [1.0 + t.slot for t in trials]
    assert list(table["aborted_attempts"]) == [1 if t.slot == 1 else 0 for t in trials]
    assert table.stratum.notna().all() and not (table.status != "done").any()

    protocol = (root / "meta" / "protocol.yaml").read_text()
    assert protocol == campaign["protocol_text"]
    assert hashlib.sha256(protocol.encode()).hexdigest() == campaign["protocol_sha256"]
    evaluation = json.loads((root / "meta" / "ab_evaluation.json").read_text())
    assert evaluation["campaign"]["protocol_sha256"] == campaign["protocol_sha256"]
    assert evaluation["labels"]["source"].startswith("physics")
    assert evaluation["campaign"]["aborted_attempts"] == 1 == sum(a["status"] == "aborted" for a in attempts)

    report = json.loads((root / "meta" / "report.json").read_text())
    assert report["schema"] == "orchestrator.report/1"
    assert report["policies"]["A"]["successes"] == 3 and report["policies"]["B"]["successes"] == 1
    comparison = report["comparisons"][0]
    assert comparison["table"] == {"both": 1, "a_only": 2, "b_only": 0, "neither": 0}

    card = (root / "README.md").read_text()
    assert card.startswith("---\n") and "LeRobot" in card and "robotics" in card
    for path in root.rglob("*"):  # no local path of the campaign is published
        if path.is_file():
            assert str(sim_campaign.parent).encode() not in path.read_bytes(), path
    # the results are the report's own Markdown, headings nested under the card's "## Results"
    assert "| A | 3/3 (100%) | [0.439, 1.000] |" in card          # Wilson 3/3
    assert "| B | 1/3 (33%) | [0.061, 0.792] |" in card           # Wilson 1/3
    assert "### A vs B: paired over 3 layouts" in card
    assert "| A succeeds | both: 1 | A only: 2 |" in card        # the paired 2x2
    assert "| A fails | B only: 0 | neither: 0 |" in card
    assert (f"McNemar mid-p {comparison['mcnemar']['mid_p']:.3f} (primary), "
            f"exact {comparison['mcnemar']['exact_p']:.3f};") in card
    assert campaign["protocol_sha256"] in card
    # loaded from the exported folder with PyAV (no torchcodec tracebacks first), no Hub address for
    # it; the Hub's lines only once pushed
    assert f'LeRobotDataset("{REPO_ID}", root=root, video_backend="pyav")' in card
    assert 'trials = pd.read_parquet(root / "meta" / "ab_trials.parquet")' in card
    snippet = card[card.index("```python"):card.index("```", card.index("```python") + 3)]
    assert "hf://" not in snippet and f'On the Hub (once pushed with `--push`): `LeRobotDataset("{REPO_ID}", ' in card
    assert "| `ab.policy` | policy label | 0 = A, 1 = B |" in card
    assert not (root / "images").exists()
    assert not [n for n in siblings(root) if n.startswith(".dataset.")]  # no temp dirs left


# ------------------------------------------------------------------ the evidence it carries


def _meta_copy(root: Path, target: Path) -> Path:
    """What `verify DATASET` reads (meta/ and the card), copied to be edited."""
    shutil.copytree(root / "meta", target / "meta")
    shutil.copy(root / "README.md", target / "README.md")
    return target


def _flip_success(d: Path) -> None:
    import pandas as pd

    table = pd.read_parquet(d / "meta" / "ab_trials.parquet")
    table.loc[0, "success"] = not bool(table.loc[0, "success"])
    table.to_parquet(d / "meta" / "ab_trials.parquet", index=False)


def _relabel(d: Path) -> None:
    import pandas as pd

    table = pd.read_parquet(d / "meta" / "ab_trials.parquet")
    table.loc[1, "label.physics"] = "failure" if table.loc[1, "label.physics"] == "success" else "success"
    table.to_parquet(d / "meta" / "ab_trials.parquet", index=False)


def _stage(d: Path) -> None:
    import pandas as pd

    table = pd.read_parquet(d / "meta" / "ab_trials.parquet")
    table["stage.physics"] = table["stage.physics"].astype(object)
    table.loc[1, "stage.physics"] = "held" if table.loc[1, "stage.physics"] != "held" else "none"
    table.to_parquet(d / "meta" / "ab_trials.parquet", index=False)


def _drop_row(d: Path) -> None:
    import pandas as pd

    table = pd.read_parquet(d / "meta" / "ab_trials.parquet")
    table.drop(index=2).to_parquet(d / "meta" / "ab_trials.parquet", index=False)


def _flip_with_its_label(d: Path) -> None:
    """The outcome and the carried label row edited together: the label's digest gives it away."""
    import pandas as pd

    _flip_success(d)
    table = pd.read_parquet(d / "meta" / "ab_trials.parquet")
    evidence = json.loads((d / "meta" / "ab_evidence.json").read_text())
    episode = table.loc[0, "episode_id"]
    for row in evidence["rows"]["judgments"]:
        if row["episode_id"] == episode and row["judge"] == "physics":
            row["label"] = "success" if bool(table.loc[0, "success"]) else "failure"
    for row in evidence["rows"]["episodes"]:
        if row["id"] == episode:
            row["physics_success"] = int(bool(table.loc[0, "success"]))
    (d / "meta" / "ab_evidence.json").write_text(json.dumps(evidence))


def _new_head_in_card(d: Path) -> None:
    evidence = json.loads((d / "meta" / "ab_evidence.json").read_text())
    card = d / "README.md"
    card.write_text(card.read_text().replace(evidence["chain"]["head"], "f" * 64))


def test_the_dataset_carries_the_chain_head_and_verifies(exported, sim_campaign, cli):
    root, _ = exported
    with CampaignStore.open_readonly(sim_campaign) as store:
        head, entries = store.evidence.head, store.evidence.entries
    assert json.loads((root / "meta" / "ab_evaluation.json").read_text())["evidence"]["head"] == head
    assert json.loads((root / "meta" / "report.json").read_text())["evidence"]["head"] == head
    assert f"Evidence chain head: `{head}`" in (root / "README.md").read_text()
    evidence = json.loads((root / "meta" / "ab_evidence.json").read_text())
    assert len(evidence["entries"]) == entries and evidence["entries"][-1][5] == head
    assert all(isinstance(r["protocol_path"], dict) for r in evidence["rows"]["campaign"])   # no local path
    done = cli("verify", root)
    assert done.code == 0 and "dataset verified: 6 trial rows" in done.out and head in done.out, done.err


@pytest.mark.parametrize("edit, named", [
    (_flip_success, "ab_trials.parquet: row 0 (trial slot 0): success is"),
    (_relabel, "ab_trials.parquet: row 1 (trial slot 1): label.physics is"),
    (_stage, "ab_trials.parquet: row 1 (trial slot 1): stage.physics is"),
    (_drop_row, "has an outcome in the chained rows and no row here"),
    (_flip_with_its_label, "ab_evidence.json: episodes id"),
    (_new_head_in_card, "README.md: does not name the chain head"),
])
def test_verify_refuses_an_edited_dataset(exported, tmp_path, cli, edit, named):
    root, _ = exported
    copy = _meta_copy(root, tmp_path / "dataset")
    assert cli("verify", copy).code == 0                        # the positive control
    edit(copy)
    done = cli("verify", copy)
    assert done.code == 2 and len(done.err_lines) == 1 and named in done.err, done.err


@pytest.mark.subprocess
def test_verify_a_dataset_in_a_fresh_process(exported, tmp_path):
    root, _ = exported
    assert run_module("verify", root).code == 0
    copy = _meta_copy(root, tmp_path / "dataset")
    _flip_success(copy)
    done = run_module("verify", copy)
    assert done.code == 2 and "ab_trials.parquet: row 0" in done.err, done.err


# ------------------------------------------------------------------ idempotent, atomic


@pytest.mark.slow
def test_reexport_replaces_atomically_and_a_failed_export_changes_nothing(exported, sim_campaign, tmp_path,
                                                                          cli, monkeypatch):
    import orchestrator.export.frames as frames
    from orchestrator.core.errors import RuntimeFailure

    root = tmp_path / "ds"
    shutil.copytree(exported[0], root)  # an earlier export of this campaign
    (root / "meta" / "stale-marker").write_text("from the first export")

    # a fault in the middle of the second export: the first export stays, byte for byte
    before = tree_digest(root)
    calls = {"n": 0}
    real_frames = frames.held_frames

    def failing_frames(*args, **kwargs):  # the 5th camera stream (3rd episode) dies at frame 5
        calls["n"] += 1
        mine = calls["n"]
        for index, image in enumerate(real_frames(*args, **kwargs)):
            if mine == 5 and index == 5:
                raise RuntimeFailure("disk fault (injected)")
            yield image

    monkeypatch.setattr(frames, "held_frames", failing_frames)
    failed = cli("export", sim_campaign, "--repo-id", REPO_ID, "--root", root)
    assert failed.code == 1 and len(failed.err_lines) == 1 and "disk fault (injected)" in failed.err
    assert "episode 2/6" in failed.out and "episode 3/6" not in failed.out
    assert tree_digest(root) == before
    assert siblings(root) == ["ds"]
    monkeypatch.setattr(frames, "held_frames", real_frames)

    # exporting again replaces the whole root (the stale file goes), with different options;
    # the temp dir a killed export left behind (its pid is gone) is cleaned up on the way
    (root.parent / ".ds.export-99999999-0badc0de" / "meta").mkdir(parents=True)
    second = cli("export", sim_campaign, "--repo-id", REPO_ID, "--root", root, "--judge", "physics",
                 "--include-aborted")
    assert second.code == 0, second.err
    assert not (root / "meta" / "stale-marker").exists()
    assert siblings(root) == ["ds"]
    import pandas as pd

    table = pd.read_parquet(root / "meta" / "ab_trials.parquet")
    aborted = table[table.status == "aborted"]
    assert len(aborted) == 1 and not aborted.exported.iloc[0] and aborted.slot.iloc[0] == 1
    assert aborted.reason.iloc[0] == "emergency stop (test)"
    assert load(root).num_episodes == 6


# ------------------------------------------------------------------ judges, --force, push


class FakeHub:
    """Stands in for the Hub at HfApi's boundary; records what would have been sent."""

    def __init__(self, store: Path):
        self.store = store
        self.calls: list[tuple[str, dict]] = []

    def install(self, monkeypatch):
        import huggingface_hub.repocard as repocard
        from huggingface_hub import HfApi
        from huggingface_hub.repocard import RepoCard

        hub = self

        def create_repo(self, repo_id, **kw):
            hub.calls.append(("create_repo", {"repo_id": repo_id, **kw}))
            return f"https://huggingface.co/datasets/{repo_id}"

        def upload_folder(self, **kw):
            hub.calls.append(("upload_folder", kw))
            ignore = [p.rstrip("/") for p in (kw.get("ignore_patterns") or [])]
            base = Path(kw["folder_path"])
            for path in sorted(base.rglob("*")):
                relative = path.relative_to(base)
                if path.is_file() and not any(str(relative).startswith(p) for p in ignore):
                    target = hub.store / kw["repo_id"] / relative
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(path, target)
            return "commit"

        def upload_file(**kw):
            hub.calls.append(("upload_file", kw))
            target = hub.store / kw["repo_id"] / kw["path_in_repo"]
            shutil.copyfile(kw["path_or_fileobj"], target)
            return "commit"

        def tag(name):
            def record(self, repo_id, **kw):
                hub.calls.append((name, {"repo_id": repo_id, **kw}))
            return record

        monkeypatch.setattr(HfApi, "create_repo", create_repo)
        monkeypatch.setattr(HfApi, "upload_folder", upload_folder)
        monkeypatch.setattr(HfApi, "create_tag", tag("create_tag"))
        monkeypatch.setattr(HfApi, "delete_tag", tag("delete_tag"))
        monkeypatch.setattr(repocard, "upload_file", upload_file)
        monkeypatch.setattr(RepoCard, "validate", lambda self, repo_type=None: None)
        return self


@pytest.fixture(scope="module")
def judged_campaign(tmp_path_factory, hf_env) -> Path:
    """Two human judges: alice agrees with physics; bob disagrees on the slot-0 episode, so
    that episode's consensus is a tie (no definite label)."""
    directory = make_campaign(tmp_path_factory.mktemp("judged"), judges=2)
    label_all(directory, "alice")
    trials, episodes, _ = store_rows(directory)
    flipped = trials[0].episode_id

    def bob(trial):
        physics = episodes[trial.episode_id]["physics_success"]
        if trial.episode_id == flipped:
            physics = not physics
        return "success" if physics else "failure"

    label_all(directory, "bob", rule=bob, failure_mode="pushed")
    return directory


def test_tied_consensus_is_refused_without_force(judged_campaign, tmp_path, cli):
    root = tmp_path / "ds"
    result = cli("export", judged_campaign, "--repo-id", REPO_ID, "--root", root)
    assert result.code == 2
    assert len(result.err_lines) == 1
    assert "1 of 6 episodes have no definite label under consensus" in result.err
    assert "--force" in result.err
    assert "(`--judge NAME`: alice, bob, physics)" in result.err             # the way out that works
    assert not root.exists() and siblings(root) == []


@pytest.mark.slow
def test_push_with_consensus_labels_and_force(judged_campaign, tmp_path, cli, monkeypatch, caplog):
    import logging

    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    hub = FakeHub(tmp_path / "hub").install(monkeypatch)
    root = tmp_path / "ds"
    result = cli("export", judged_campaign, "--repo-id", REPO_ID, "--root", root, "--push", "--private",
                 "--force")
    assert result.code == 0, result.err
    assert "warning (--force): 1 of 6 episodes without a definite label" in result.out
    assert f"pushed to https://huggingface.co/datasets/{REPO_ID}" in result.out

    # labels: consensus of alice and bob; the tied episode is -1, failure modes from the judges
    trials, episodes, _ = store_rows(judged_campaign)
    data = columns(load(root))
    evaluation = json.loads((root / "meta" / "ab_evaluation.json").read_text())
    modes = evaluation["features"]["ab.failure_mode"]["values"]
    assert evaluation["labels"]["source"].startswith("consensus")
    for index, trial in enumerate(trials):
        rows = data["episode_index"] == index
        physics = episodes[trial.episode_id]["physics_success"]
        expected = -1 if index == 0 else physics
        assert set(data["ab.success"][rows]) == {expected}, index
        # alice says "missed", bob "pushed": the tie between modes goes to the first by name
        mode = -1 if expected != 0 else modes.index("missed")
        assert set(data["ab.failure_mode"][rows]) == {mode}, index
    import pandas as pd

    table = pd.read_parquet(root / "meta" / "ab_trials.parquet")
    assert {"label.alice", "label.bob", "label.physics", "failure_mode.bob"} <= set(table.columns)
    assert table.success.isna().iloc[0] and table["label.alice"].iloc[0] != table["label.bob"].iloc[0]

    # what reached the (fake) Hub
    names = [name for name, _ in hub.calls]
    assert names[:2] == ["create_repo", "upload_folder"] and "upload_file" in names
    create = dict(hub.calls[0][1])
    assert create["repo_id"] == REPO_ID and create["repo_type"] == "dataset" and create["private"] is True
    upload = dict(hub.calls[1][1])
    assert upload["repo_id"] == REPO_ID and upload["repo_type"] == "dataset"
    assert Path(upload["folder_path"]) == root
    pushed = hub.store / REPO_ID
    for relative in ("meta/info.json", "meta/stats.json", "meta/tasks.parquet", "meta/ab_trials.parquet",
                     "meta/ab_evaluation.json", "meta/protocol.yaml", "meta/report.json", "README.md",
                     "data/chunk-000/file-000.parquet",
                     "videos/observation.images.front/chunk-000/file-000.mp4",
                     "videos/observation.images.wrist/chunk-000/file-000.mp4"):
        assert (pushed / relative).is_file(), relative
    card = (pushed / "README.md").read_text()
    assert card == (root / "README.md").read_text()  # LeRobot's card = ours
    assert "### A vs B: paired over" in card and "Exported with `--force`" in card

    # --push again on an export that is current: pushed as it is, nothing written again
    from orchestrator.export import run as export_run

    before = sorted((p.relative_to(root), p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file())
    def written_again(*args, **kwargs):
        raise RuntimeError("exported again")

    monkeypatch.setattr(export_run, "write_dataset", written_again)
    hub.calls.clear()
    again = cli("export", judged_campaign, "--repo-id", REPO_ID, "--root", root, "--push", "--private", "--force")
    assert again.code == 0, again.err
    assert "is this campaign's export as it stands" in again.out and "pushed to https://huggingface.co" in again.out
    assert "exported 6 episodes" not in again.out
    assert [name for name, _ in hub.calls][:2] == ["create_repo", "upload_folder"]
    assert sorted((p.relative_to(root), p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()) == before
    # positive control: other labels (one judge's) are another export, so it is written again
    other = cli("export", judged_campaign, "--repo-id", REPO_ID, "--root", root, "--push", "--force", "--judge", "alice")
    assert other.code == 1 and "exported again" in other.out + other.err, other.out + other.err

    # the token is never printed, logged, written, or passed by us
    assert TOKEN not in result.out + result.err + caplog.text
    for folder in (root, pushed, judged_campaign):
        for path in folder.rglob("*"):
            if path.is_file():
                assert TOKEN.encode() not in path.read_bytes(), path
    for _, kwargs in hub.calls:
        assert TOKEN not in repr(kwargs)


def test_push_without_a_token_is_refused_before_writing(sim_campaign, tmp_path, cli, monkeypatch):
    import huggingface_hub

    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr(huggingface_hub, "get_token", lambda: None)
    root = tmp_path / "ds"
    result = cli("export", sim_campaign, "--repo-id", REPO_ID, "--root", root, "--push")
    assert result.code == 2 and len(result.err_lines) == 1
    assert "no Hugging Face token" in result.err and "HF_TOKEN" in result.err
    assert not root.exists()


# ------------------------------------------------------------------ bad input: exit 2, one line


@pytest.mark.parametrize("repo_id", ["no-slash", "a/b/c", "user/na me", "user/-dash", "user/dots..x",
                                     "us$er/name", "user/", "user/name.git", "üser/name"])
def test_invalid_repo_id(sim_campaign, tmp_path, cli, repo_id):
    root = tmp_path / "ds"
    result = cli("export", sim_campaign, "--repo-id", repo_id, "--root", root)
    assert result.code == 2 and len(result.err_lines) == 1, result.err
    assert "invalid Hugging Face repo id" in result.err
    assert list(tmp_path.iterdir()) == []


def test_unwritable_root(sim_campaign, tmp_path, cli):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    result = cli("export", sim_campaign, "--repo-id", REPO_ID, "--root", blocker / "ds")
    assert result.code == 2 and len(result.err_lines) == 1
    assert "not writable" in result.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


@pytest.mark.subprocess
def test_read_only_parent(sim_campaign, tmp_path):
    """Run as a user who cannot write there (root too: `unprivileged()`), so this runs on every
    machine, beside the disk-full test that needs root to mount its tmpfs."""
    parent = tmp_path / "ro"
    parent.mkdir()
    parent.chmod(0o555)
    try:
        result = run_module("export", sim_campaign, "--repo-id", REPO_ID, "--root", parent / "ds",
                            prefix=unprivileged(), timeout=300)
    finally:
        parent.chmod(0o755)
    assert result.code == 2 and "not writable" in result.err, result.err
    assert len(result.err_lines) == 1, result.err
    assert list(parent.iterdir()) == []


def test_running_campaign_is_refused(sim_campaign, tmp_path, cli):
    root = tmp_path / "ds"
    before = tree_digest(sim_campaign / "videos")
    running = CampaignStore.open_for_run(sim_campaign)  # holds campaign.lock, as `run` does
    try:
        result = cli("export", sim_campaign, "--repo-id", REPO_ID, "--root", root)
    finally:
        running.close()
    assert result.code == 2 and len(result.err_lines) == 1
    assert "still running" in result.err and "campaign.lock" in result.err
    assert not root.exists() and list(tmp_path.iterdir()) == []
    assert tree_digest(sim_campaign / "videos") == before


def test_not_a_campaign(tmp_path, cli):
    empty = tmp_path / "empty"
    empty.mkdir()
    for target in (empty, tmp_path / "missing"):
        result = cli("export", target, "--repo-id", REPO_ID, "--root", tmp_path / "ds")
        assert result.code == 2 and len(result.err_lines) == 1, result.err
        assert "campaign" in result.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty"] and list(empty.iterdir()) == []


def test_foreign_root_is_never_replaced(sim_campaign, tmp_path, cli):
    root = tmp_path / "precious"
    root.mkdir()
    (root / "thesis.tex").write_text("years of work")
    result = cli("export", sim_campaign, "--repo-id", REPO_ID, "--root", root)
    assert result.code == 2 and "refusing to replace it" in result.err
    assert (root / "thesis.tex").read_text() == "years of work"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["precious"]


def test_unjudged_hardware_and_incomplete_campaigns_are_refused(tmp_path, cli, hf_env):
    real = make_campaign(tmp_path / "real", simulated=False, abort_slot=None)
    result = cli("export", real, "--repo-id", REPO_ID, "--root", tmp_path / "ds1")
    assert result.code == 2 and len(result.err_lines) == 1
    assert "6 of 6 episodes have no definite label" in result.err
    assert "orchestrator judge" in result.err and "--force" in result.err

    partial = make_campaign(tmp_path / "partial", run=4, abort_slot=None)
    result = cli("export", partial, "--repo-id", REPO_ID, "--root", tmp_path / "ds2")
    assert result.code == 2 and len(result.err_lines) == 1
    assert "incomplete (4 of 6 trials done)" in result.err and "--force" in result.err
    assert not (tmp_path / "ds1").exists() and not (tmp_path / "ds2").exists()


def test_private_needs_push(sim_campaign, tmp_path, cli):
    result = cli("export", sim_campaign, "--repo-id", REPO_ID, "--root", tmp_path / "ds", "--private")
    assert result.code == 2 and "--private applies to --push only" in result.err


def test_unknown_judge(sim_campaign, tmp_path, cli):
    result = cli("export", sim_campaign, "--repo-id", REPO_ID, "--root", tmp_path / "ds", "--judge", "carol")
    assert result.code == 2 and len(result.err_lines) == 1 and "carol" in result.err
    assert list(tmp_path.iterdir()) == []


def test_frame_indices_hold_the_latest_frame():
    from orchestrator.export import frame_indices

    t = np.arange(10) / 10
    np.testing.assert_array_equal(frame_indices(t, np.array([0.0, 0.2, 0.4, 0.6, 0.8]), None),
                                  [0, 0, 1, 1, 2, 2, 3, 3, 4, 4])
    np.testing.assert_array_equal(frame_indices(t, t, None), np.arange(10))
    # 15 fps camera under 30 Hz with no recorded times: spread uniformly
    np.testing.assert_array_equal(frame_indices(np.arange(6) / 30, None, 3), [0, 0, 1, 1, 2, 2])
    # a frame taken "at" a step despite float noise counts for that step
    np.testing.assert_array_equal(frame_indices(np.array([0.0, 0.30000000000000004]), np.array([0.0, 0.3]), None),
                                  [0, 1])


@pytest.mark.slow
def test_failed_push_is_one_line_keeps_the_export_and_hides_the_token(sim_campaign, tmp_path, cli,
                                                                      monkeypatch):
    from huggingface_hub import HfApi

    monkeypatch.setenv("HF_TOKEN", TOKEN)

    def refuse(self, repo_id, **kw):  # a Hub error that (badly) echoes the credential
        raise RuntimeError(f"401 Client Error: Unauthorized for token {TOKEN}\nmore detail")

    monkeypatch.setattr(HfApi, "create_repo", refuse)
    root = tmp_path / "ds"
    result = cli("export", sim_campaign, "--repo-id", REPO_ID, "--root", root, "--push")
    assert result.code == 1 and len(result.err_lines) == 1, result.err
    assert "push of" in result.err and "401 Client Error" in result.err and "--push again" in result.err
    assert TOKEN not in result.out + result.err
    assert load(root).num_episodes == 6  # the local export is complete


def test_too_few_preregistered_judges_is_refused(tmp_path, cli, hf_env):
    directory = make_campaign(tmp_path / "c", marks=1, judges=2, abort_slot=None)
    label_all(directory, "alice")  # the protocol asks for 2 judges; only alice has judged
    result = cli("export", directory, "--repo-id", REPO_ID, "--root", tmp_path / "ds")
    assert result.code == 2 and len(result.err_lines) == 1, result.err
    assert "asks for 2 judges" in result.err and "1 (alice)" in result.err and "--force" in result.err
    assert not (tmp_path / "ds").exists()


def test_default_root_follows_lerobot(monkeypatch, tmp_path):
    from orchestrator.export import default_root

    monkeypatch.setenv("HF_LEROBOT_HOME", str(tmp_path / "lr"))
    assert default_root("me/ds") == tmp_path / "lr" / "me" / "ds"
    monkeypatch.delenv("HF_LEROBOT_HOME")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    assert default_root("me/ds") == tmp_path / "hf" / "lerobot" / "me" / "ds"


def test_without_lerobot_installed(sim_campaign, tmp_path, cli, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "lerobot" else real(name, *a))
    result = cli("export", sim_campaign, "--repo-id", REPO_ID, "--root", tmp_path / "ds")
    assert result.code == 2 and len(result.err_lines) == 1 and "needs the lerobot extra" in result.err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_real_simulated_campaign_exports(tmp_path, cli, hf_env):
    """End to end on the real simulated rig: `orchestrator run` (MuJoCo, scripted policies,
    the recorder) on a 2-mark, 10 fps x 1 s copy of the demo protocol, then `export`."""
    import pandas as pd
    import yaml

    from support.repo import GRID20, sim_protocol_text

    layout = yaml.safe_load(GRID20.read_text())
    layout["marks"] = layout["marks"][5:7]
    (tmp_path / "layout.yaml").write_text(yaml.safe_dump(layout, sort_keys=False))
    text = sim_protocol_text().replace("episode: {fps: 30, duration_s: 12}", "episode: {fps: 10, duration_s: 1}")
    assert "fps: 10" in text
    (tmp_path / "protocol.yaml").write_text(text)
    campaign = tmp_path / "campaign"
    ran = cli("run", tmp_path / "protocol.yaml", "--rig", REPO / "hardware" / "sim.yaml", "--out", campaign,
              "--workers", "1")
    assert ran.code == 0, ran.err
    root = tmp_path / "ds"
    result = cli("export", campaign, "--repo-id", REPO_ID, "--root", root)
    assert result.code == 0, result.err

    trials, episodes, _ = store_rows(campaign)
    dataset = load(root)
    assert dataset.num_episodes == len(trials) == 4
    assert list(dataset.meta.episodes["length"]) == [10] * 4
    data = columns(dataset)
    for index, trial in enumerate(trials):
        rows = data["episode_index"] == index
        assert set(data["ab.policy"][rows]) == {["A", "B"].index(trial.policy)}
        assert set(data["ab.success"][rows]) == {episodes[trial.episode_id]["physics_success"]}
    # each label's stage of the progress ladder, beside it (the runner stored physics' and auto's)
    table = pd.read_parquet(root / "meta" / "ab_trials.parquet")
    with CampaignStore.open_readonly(campaign) as store:
        for judge in ("physics", "auto"):
            stored = {e: j.stage for e, j in store.latest_labels(judge).items()}
            assert list(table[f"stage.{judge}"]) == [stored[t.episode_id] for t in trials] and None not in stored.values()
    assert cli("verify", root).code == 0
    rig = yaml.safe_load((REPO / "hardware" / "sim.yaml").read_text())
    item = dataset[len(dataset) - 1]
    for camera, spec in rig["cameras"].items():
        assert tuple(item[f"observation.images.{camera}"].shape) == (3, spec["height"], spec["width"])
        assert float(item[f"observation.images.{camera}"].std()) > 0.01  # a rendered scene, not blank


def test_a_trial_scored_by_an_abort_is_a_row_of_the_trials_table(tmp_path, cli, hf_env):
    """A trial the `aborts` rules scored as its policy's failure has no episode; the report counts
    it, so meta/ab_trials.parquet lists it (it used to hold one row fewer than the trials counted)."""
    import pandas as pd

    campaign = make_campaign(tmp_path / "src", marks=2, abort_slot=None, scored_slot=2)
    root = tmp_path / "ds"
    result = cli("export", campaign, "--repo-id", REPO_ID, "--root", root)
    assert result.code == 0, result.err
    table = pd.read_parquet(root / "meta" / "ab_trials.parquet")
    assert len(table) == 4 and sorted(table.slot) == [0, 1, 2, 3]
    (scored,) = table[table.status == "scored_failure"].itertuples()
    assert scored.slot == 2 and not scored.exported and not scored.success and not pd.isna(scored.success)
    assert scored.failure_mode == "aborted (policy)" and scored.label_source == "aborts rule"
    assert load(root).num_episodes == 3
    evaluation = json.loads((root / "meta" / "ab_evaluation.json").read_text())
    assert evaluation["campaign"]["settled_without_episode"] == {"scored_failure": 1, "excluded": 0}
    report = json.loads((root / "meta" / "report.json").read_text())
    for policy, summary in report["policies"].items():   # the table holds what the report counts
        rows = table[table.policy == policy]
        assert (summary["trials"], summary["successes"]) == (int(rows.success.notna().sum()), int(rows.success.sum()))
    assert sum(summary["trials"] for summary in report["policies"].values()) == 4


def test_export_stride_follows_the_recorded_camera_rate():
    from orchestrator.export.plan import export_stride
    from orchestrator.rigs.profile import parse_rig_text

    def rig(*rates: int):
        cams = ", ".join(f"c{i}: {{type: sim, width: 64, height: 48, fps: {r}}}" for i, r in enumerate(rates))
        return parse_rig_text(f"robot: {{type: sim_so101}}\ncameras: {{{cams}}}\n")

    assert export_stride(30, rig(15, 15), ["c0", "c1"], "recorded") == 2      # the demo: 30 Hz loop, 15 fps cameras
    assert export_stride(30, rig(15, 15), ["c0", "c1"], "control") == 1
    assert export_stride(30, rig(15, 10), ["c0", "c1"], "recorded") == 1      # two rates: one dataset fps cannot hold both
    assert export_stride(10, rig(15), ["c0"], "recorded") == 1                # a camera faster than the loop
    assert export_stride(30, rig(20), ["c0"], "recorded") == 1                # 20 does not divide 30
    assert export_stride(30, None, ["c0"], "recorded") == 1                   # no readable rig profile


@pytest.mark.slow
def test_tiny_campaign_exports_at_the_cameras_recorded_rate(tmp_path, cli, hf_env):
    """The tiny campaign's loop runs at 10 Hz, its cameras at 5 fps: the dataset runs at 5 fps, one
    row per recorded frame, holding the joint state and action of the step the frame was taken at."""
    from support.tiny import run_cli

    campaign = tmp_path / "c"
    assert run_cli(campaign) == 0
    root = tmp_path / "ds"
    result = cli("export", campaign, "--repo-id", REPO_ID, "--root", root)
    assert result.code == 0, result.err
    assert "5 fps, the cameras' recorded rate: every 2 control steps" in result.out
    dataset = load(root)
    assert dataset.fps == 5 and dataset.num_episodes == 6
    cols = columns(dataset)
    trials, records, _ = store_rows(campaign)
    for index, trial in enumerate(t for t in trials if t.state == "done"):
        with np.load(campaign / records[trial.episode_id]["files"]["timeseries"]) as z:
            state = np.asarray(z["state"], dtype=np.float32)
        mine = cols["episode_index"] == index
        np.testing.assert_allclose(cols["observation.state"][mine], state[::2], rtol=1e-6)
        np.testing.assert_allclose(cols["timestamp"][mine], np.arange(mine.sum()) / 5, atol=1e-6)
    card = (root / "README.md").read_text()
    assert "5 fps (the cameras' recorded rate" in card and "the control loop ran at 10 Hz" in card
