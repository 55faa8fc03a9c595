"""Judge bundles: written atomically, judged with the core install only, labels merged back."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from orchestrator.cli import main
from orchestrator.judging.bundle import BundleSource, bundle_labels
from orchestrator.judging.tui.app import JudgeApp
from support.evidence import accept_edits
from support.judge_campaign import live_judgments, make_campaign

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> tuple[Path, Path]:
    """A campaign and its bundle (read-only for the tests that share them)."""
    root = tmp_path_factory.mktemp("bundled")
    directory = make_campaign(root)
    assert main(["bundle", str(directory), "--out", str(root / "bundle")]) == 0
    return directory, root / "bundle"


@pytest.fixture
def fresh(made, tmp_path) -> tuple[Path, Path]:
    directory, bundle = made
    shutil.copytree(directory, tmp_path / "campaign")
    shutil.copytree(bundle, tmp_path / "bundle")
    return tmp_path / "campaign", tmp_path / "bundle"


def judgments(directory: Path) -> list[tuple]:
    return live_judgments(directory, columns="episode_id, judge, label, failure_mode, note, source, created_at")


def judge_bundle(bundle: Path, judge: str, keys: list[str]) -> JudgeApp:
    app = JudgeApp(BundleSource(bundle, judge), renderer="halfcell", autoplay=False)

    async def session():
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause()
            for key in keys:
                await pilot.press(key)

    asyncio.run(session())
    return app


def test_bundle_layout_and_manifest(made):
    _, bundle = made
    names = sorted(p.name for p in bundle.iterdir())
    assert names == ["README.txt", "labels", "manifest.json", "videos"]
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert set(manifest) == {"schema", "bundle_id", "campaign_id", "success_test",
                             "failure_modes", "min_height_m", "episodes"}
    ids = [e["id"] for e in manifest["episodes"]]
    assert ids == sorted(ids) and len(ids) == 8         # sorted by id, not by run order
    for entry in manifest["episodes"]:
        assert set(entry) == {"id", "videos", "mark", "duration_s", "frames", "arm_still", "stills",
                              "camera_poses"}
        for rel in entry["videos"].values():
            assert (bundle / rel).stat().st_size > 0
    import av  # remuxed, not re-encoded: every frame is there

    with av.open(str(bundle / manifest["episodes"][0]["videos"]["front"])) as container:
        assert sum(1 for _ in container.decode(video=0)) == 30
    assert not [p for p in bundle.parent.iterdir() if ".partial-" in p.name]


def test_the_manifest_reads_back_as_written_and_other_schemas_are_refused(made, tmp_path):
    from dataclasses import replace

    from orchestrator.core.errors import BadInput
    from orchestrator.judging.manifest import SCHEMA, read_manifest

    _, bundle = made
    manifest = read_manifest(bundle)
    assert manifest.to_dict() == json.loads((bundle / "manifest.json").read_text())   # the writer's output
    assert len(manifest.episodes) == 8 and manifest.bundle_id.startswith("bd_")
    changed = replace(manifest, success_test="cube lifted", failure_modes=("missed",))
    changed.write(tmp_path)
    assert read_manifest(tmp_path) == changed                                        # write, read back
    for schema in ("orchestrator.bundle/2", "orchestrator.bundle/0", None):
        data = changed.to_dict()
        data["schema"] = schema
        (tmp_path / "manifest.json").write_text(json.dumps(data))
        with pytest.raises(BadInput, match=f"this version reads '{SCHEMA}'") as refused:
            read_manifest(tmp_path)
        assert f"schema {schema!r}" in str(refused.value)
        assert "\n" not in str(refused.value)


def test_bundle_refuses_a_non_empty_target(made, tmp_path, capsys):
    directory, _ = made
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("x")
    assert main(["bundle", str(directory), "--out", str(tmp_path / "out")]) == 2
    assert "not empty" in capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["keep.txt"]


def test_bundle_folder_name_must_not_name_a_policy(made, tmp_path, capsys):
    directory, _ = made
    assert main(["bundle", str(directory), "--out", str(tmp_path / "secretpolicyalpha_vs_b")]) == 2
    assert "names a policy" in capsys.readouterr().err
    assert not (tmp_path / "secretpolicyalpha_vs_b").exists()


def test_judging_a_bundle_appends_a_line_per_key_and_resumes(fresh):
    _, bundle = fresh
    app = judge_bundle(bundle, "remote", ["s", "f", "3", "u", "q"])
    order = [e.id for e in app.session.order]
    lines = (bundle / "labels" / "remote.jsonl").read_text().splitlines()
    assert [json.loads(x)["op"] for x in lines] == ["add", "add", "add", "retract", "add"]
    live = {r.episode_id: (r.label, r.failure_mode) for r in bundle_labels(bundle)["remote"]}
    assert live == {order[0]: ("success", None), order[1]: ("failure", "dropped"),
                    order[2]: ("unsure", None)}
    # a crash mid-write leaves a torn last line: ignored, and the next label still lands
    with open(bundle / "labels" / "remote.jsonl", "a") as handle:
        handle.write('{"op": "add", "id": "lb_tor')
    again = judge_bundle(bundle, "remote", ["s"])
    assert again.session.order[0].id == order[0]
    live = {r.episode_id: r.label for r in bundle_labels(bundle)["remote"]}
    assert live == {order[0]: "success", order[1]: "failure", order[2]: "unsure", order[3]: "success"}


@pytest.mark.slow   # several seconds: kept out of the fast lane
def test_import_labels_merges_and_reports_duplicates(fresh, capsys):
    directory, bundle = fresh
    judge_bundle(bundle, "remote", ["s", "f", "2", "n", *"late grip", "enter"])
    judge_bundle(bundle, "second", ["u"])
    capsys.readouterr()
    assert main(["import-labels", str(directory), str(bundle)]) == 0
    out = capsys.readouterr().out
    assert "imported 3 labels" in out and "remote" in out and "second" in out
    rows = judgments(directory)
    bundle_id = json.loads((bundle / "manifest.json").read_text())["bundle_id"]
    assert len(rows) == 3 and all(r[5] == f"bundle:{bundle_id}" for r in rows)
    by_judge = {(r[1], r[2]): r for r in rows}
    assert by_judge[("remote", "failure")][3:5] == ("pushed", "late grip")
    file_times = {r.created_at for r in bundle_labels(bundle)["remote"]}
    assert {r[6] for r in rows if r[1] == "remote"} == file_times     # label times kept
    assert main(["import-labels", str(directory), str(bundle)]) == 0
    assert "imported 0 labels" in (out := capsys.readouterr().out) and "skipped 3 already imported" in out
    assert len(judgments(directory)) == 3


def test_import_labels_refuses_foreign_episodes_and_other_campaigns(fresh, made, tmp_path, capsys):
    directory, bundle = fresh
    judge_bundle(bundle, "remote", ["s", "s"])
    path = bundle / "labels" / "remote.jsonl"
    line = json.loads(path.read_text().splitlines()[0])
    line.update(id="lb_forged", episode_id="ep_0000000000000000")
    with open(path, "a") as handle:
        handle.write(json.dumps(line) + "\n")
    capsys.readouterr()
    assert main(["import-labels", str(directory), str(bundle)]) == 2
    err = capsys.readouterr().err
    assert "not in this campaign" in err and "nothing imported" in err and len(err.splitlines()) == 1
    assert judgments(directory) == []
    other = make_campaign(tmp_path / "other", marks=1)
    assert main(["import-labels", str(other), str(made[1])]) == 2
    assert "made from campaign" in capsys.readouterr().err


def test_import_labels_skips_episodes_the_judge_labelled_locally(fresh, capsys):
    directory, bundle = fresh
    app = judge_bundle(bundle, "remote", ["s"])
    conn = sqlite3.connect(directory / "campaign.db")
    conn.execute("INSERT INTO judgments (episode_id, judge, label, created_at, source)"
                 " VALUES (?, 'remote', 'failure', 1.0, 'local')", (app.session.order[0].id,))
    conn.commit()
    conn.close()
    assert accept_edits(directory) == 1   # as if the judge had labelled it in the campaign
    assert main(["import-labels", str(directory), str(bundle)]) == 0
    assert "skipped 1 where the judge already labelled" in capsys.readouterr().out


def test_judge_cli_input_errors(made, tmp_path, capsys):
    directory, bundle = made
    assert main(["judge", str(bundle), "--judge", "physics"]) == 2
    assert "reserved" in capsys.readouterr().err
    assert main(["judge", str(bundle), "--judge", "two words"]) == 2
    assert main(["judge", str(tmp_path / "nowhere"), "--judge", "ann"]) == 2
    assert "no such campaign" in capsys.readouterr().err
    assert main(["judge", str(directory), "--judge", "ann"]) == 2   # not a terminal here
    assert "interactive terminal" in capsys.readouterr().err


@pytest.mark.subprocess
def test_judging_a_bundle_needs_no_torch_or_mujoco(made, tmp_path):
    """`orchestrator judge BUNDLE` with torch, mujoco and lerobot made unimportable."""
    _, bundle = made
    copy = tmp_path / "bundle"
    shutil.copytree(bundle, copy)
    blockers = tmp_path / "blockers"
    blockers.mkdir()
    for name in ("torch", "mujoco", "lerobot"):
        (blockers / f"{name}.py").write_text(
            f"open({str(tmp_path / (name + '.tried'))!r}, 'w').close()\n"
            f"raise ImportError('{name} is not installed (core install)')\n")
    script = textwrap.dedent(f"""
        import asyncio, sys
        from orchestrator.cli import build_parser
        from orchestrator.commands.judge import build_app
        args = build_parser().parse_args(["judge", {str(copy)!r}, "--judge", "remote"])
        app = build_app(args)
        app.autoplay = False
        async def go():
            async with app.run_test(size=(90, 28)) as pilot:
                await pilot.press("s", "f", "q")
        asyncio.run(go())
        print(sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "mujoco", "lerobot")))
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(blockers), str(ROOT)]))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"
    assert [p.name for p in tmp_path.glob("*.tried")] == []     # not even attempted
    assert len(bundle_labels(copy)["remote"]) == 2
