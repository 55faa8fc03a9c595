"""End-to-end tests of the campaign runner on the simulated SO-101 (tiny protocol).

The tiny protocol (tests/data) has 3 marks x 2 scripted policies, 5 s episodes at 10 fps and
two 64x48 cameras at 5 fps, so a whole campaign runs in seconds.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import av
import numpy as np
import pytest

from orchestrator.cli import main
from orchestrator.run.recording import PARTIAL
from orchestrator.store.backend import DB_NAME
from orchestrator.store.sqlite import CampaignStore
from support.tiny import DATA, PROTOCOL, RIG, ROOT, run_cli  # noqa: E402
from support.waiting import wait_until

sys.path.insert(0, str(ROOT / "bench"))
from kill_anywhere import check_invariants, kill_loop, outcomes  # noqa: E402


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """An uninterrupted sequential run of the tiny campaign."""
    out = tmp_path_factory.mktemp("runner") / "reference"
    assert run_cli(out, "--workers", "1") == 0
    return out


def test_complete_campaign_has_one_full_episode_per_slot(reference):
    with CampaignStore.open_readonly(reference) as store:
        trials = store.trials()
        episodes = {e["id"]: e for e in store.episodes()}
        assert len(trials) == 6 and all(t.state == "done" for t in trials)
        assert store.campaign()["stop_reason"] == "complete"
        for trial in trials:
            episode = episodes[trial.episode_id]
            assert episode["frames"] == 50 and episode["duration_s"] == 5
            series = np.load(reference / episode["files"]["timeseries"])
            assert series["state"].shape == (50, 6) and series["action"].shape == (50, 6)
            assert np.allclose(np.diff(series["t"]), 0.1)
            for camera in ("front", "wrist"):
                with av.open(str(reference / episode["files"][camera])) as container:
                    frames = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
                assert len(frames) == 25 and frames[0].shape == (48, 64, 3)
            assert not list((reference / "videos" / trial.episode_id).glob(f"*{PARTIAL}*"))
        physics = store.judgments("physics")
        assert sorted(j.episode_id for j in physics) == sorted(episodes)
        done_attempts = [a for a in store.attempts() if a["status"] == "done"]
        assert sorted(a["slot"] for a in done_attempts) == list(range(6))


@pytest.mark.subprocess
def test_parallel_run_equals_sequential(reference, tmp_path):
    assert run_cli(tmp_path / "parallel", "--workers", "2") == 0
    assert outcomes(tmp_path / "parallel") == outcomes(reference)
    # the demo difference must be visible: zero aim noise picks every mark
    assert all(success for mark, policy, success in outcomes(reference).values() if policy == "A")


def test_rerun_of_complete_campaign_changes_nothing(reference, capsys):
    before = outcomes(reference)
    assert run_cli(reference) == 0
    assert "campaign is complete" in capsys.readouterr().out
    assert outcomes(reference) == before


def test_other_protocol_in_same_directory_is_refused(reference, tmp_path, capsys):
    other = tmp_path / "other.yaml"
    other.write_text(PROTOCOL.read_text().replace("seed: 7", "seed: 8"))
    shutil.copy(DATA / "tiny_layout.yaml", tmp_path / "tiny_layout.yaml")
    assert run_cli(reference, protocol=other) == 2
    err = capsys.readouterr().err
    assert "different protocol" in err and len(err.strip().splitlines()) == 1


def test_second_runner_is_refused_while_readers_work(tmp_path, capsys):
    out = tmp_path / "c"
    assert run_cli(out, "--stop-after", "1", "--workers", "1") == 0
    capsys.readouterr()
    holder = CampaignStore.open_for_run(out)
    try:
        assert run_cli(out) == 2
        assert "another `orchestrator run`" in capsys.readouterr().err
        with CampaignStore.open_readonly(out) as reader:
            assert len(reader.trials()) == 6
        assert main(["report", str(out), "--format", "json"]) == 0
    finally:
        holder.close()


@pytest.fixture(scope="module")
def long_episodes(tmp_path_factory) -> tuple[Path, Path]:
    """The tiny protocol with 40 s episodes (0.6-1.3 s of wall time a trial on the idle 2-core
    machine, against 0.25 s for 5 s ones), and its uninterrupted reference run."""
    folder = tmp_path_factory.mktemp("long")
    shutil.copy(DATA / "tiny_layout.yaml", folder / "tiny_layout.yaml")
    protocol = folder / "tiny_protocol.yaml"
    protocol.write_text(PROTOCOL.read_text().replace("duration_s: 5}", "duration_s: 40}"))
    assert "duration_s: 40}" in protocol.read_text()
    assert run_cli(folder / "reference", "--workers", "1", protocol=protocol) == 0
    return protocol, folder / "reference"


def running_since(campaign: Path) -> float | None:
    """How long ago (s, by the store's `started_at` wall-clock times) the attempt the campaign's
    store holds as running started, read straight from its SQLite file; None when none is running
    (or the file or its schema does not exist yet)."""
    if not (campaign / DB_NAME).exists():
        return None
    with contextlib.closing(sqlite3.connect(f"file:{campaign / DB_NAME}?mode=ro", uri=True, timeout=10)) as db:
        try:
            started = db.execute("SELECT max(started_at) FROM attempts WHERE status = 'running'").fetchone()[0]
        except sqlite3.OperationalError:   # the schema not yet created
            return None
    return None if started is None else time.time() - started


@pytest.mark.subprocess
def test_ctrl_c_exits_130_aborts_the_trial_and_resume_completes(long_episodes, tmp_path):
    protocol, reference = long_episodes
    out = tmp_path / "c"
    # Started with SIGINT ignored, as from a pytest-xdist worker, a script's background job or
    # nohup (the child inherits SIG_IGN and Python then installs no KeyboardInterrupt handler):
    # the run must stop on it all the same. Found when the suite moved to two workers.
    process = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "run", str(protocol), "--rig", str(RIG), "--out", str(out),
         "--workers", "1"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    for line in process.stdout:
        if line.startswith("trial 1/6"):   # printed when trial 1 is done: trial 2 starts next
            break
    # Ctrl-C inside a trial: once the store holds an attempt as running that started less than
    # 0.3 s ago (a trial takes 1.3 s of wall time on the idle machine, longer on a busy one; with
    # 5 s episodes, 0.25 s a trial, the whole campaign could end before the signal came, and did
    # once on a fresh machine; a signal sent late in a trial could land between two trials, when
    # no attempt is running)
    wait_until(lambda: (age := running_since(out)) is not None and age < 0.3, 120, "a trial just started",
               poll_s=0.02)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    with CampaignStore.open_readonly(out) as store:
        reasons = [a["reason"] for a in store.attempts() if a["status"] == "aborted"]
        assert reasons and "interrupted by the user" in reasons[0]
        assert store.integrity_ok()
    assert run_cli(out, "--workers", "1", protocol=protocol) == 0
    assert outcomes(out) == outcomes(reference)
    with CampaignStore.open_readonly(out) as store:
        assert len(store.episodes()) == 6


@pytest.mark.subprocess
def test_sigkill_anywhere_then_resume_gives_identical_outcomes(reference, tmp_path):
    import random

    # Three kills, 3.4, 2.6 and 3.5 s after each start (seed 10), late enough to land after the
    # interpreter's start and imports; seed 3's four (1.4, 3.3, 2.2, 3.6 s) spent a resume (a process
    # and its two workers) on a kill at 1.4 s, about when the campaign opens. bench/kill_anywhere.py
    # kills 50 times.
    stats = kill_loop(PROTOCOL, RIG, tmp_path / "killed", kills=3, workers=2, max_delay_s=6.0,
                      rng=random.Random(10), log=lambda *_: None)
    assert stats.violations == []
    assert stats.kills == 3
    for campaign in stats.campaigns:
        assert outcomes(campaign) == outcomes(reference)
        done, problems = check_invariants(campaign)
        assert done == 6 and problems == []


def test_damaged_video_of_done_trial_is_detected_and_rerun(reference, tmp_path):
    out = tmp_path / "c"
    shutil.copytree(reference, out)
    with CampaignStore.open_readonly(out) as store:
        victim = store.episodes()[2]
    video = out / victim["files"]["front"]
    with open(video, "r+b") as handle:
        handle.truncate(video.stat().st_size // 3)
    assert run_cli(out, "--workers", "1") == 0
    with CampaignStore.open_readonly(out) as store:
        kinds = [e["kind"] for e in store.events()]
        assert "invalidated" in kinds
        assert victim["id"] not in {e["id"] for e in store.episodes()}
        assert all(t.state == "done" for t in store.trials())
    assert outcomes(out) == outcomes(reference)


@pytest.mark.subprocess
def test_preregistered_evalue_rule_stops_at_max_layouts(tmp_path, capsys):
    protocol = tmp_path / "p.yaml"
    protocol.write_text(PROTOCOL.read_text().replace(
        "stopping: none", "stopping: {kind: evalue, max_layouts: 2}"))
    shutil.copy(DATA / "tiny_layout.yaml", tmp_path / "tiny_layout.yaml")
    out = tmp_path / "c"
    assert run_cli(out, "--workers", "2", protocol=protocol) == 0
    text = capsys.readouterr().out
    assert "stopping:" in text
    with CampaignStore.open_readonly(out) as store:
        done = [t for t in store.trials() if t.state == "done"]
        assert len(done) == 4 and {t.unit for t in done} == {0, 1}
        assert "max_layouts" in store.campaign()["stop_reason"] or "2 layouts" in store.campaign()["stop_reason"]


def test_commit_episode_counts_and_logs_slow_episodes(tmp_path):
    """The sequential and the parallel runner commit through one function (`trials.commit_episode`):
    an episode whose loop overran the period on more than 5 % of its steps is counted as slow and
    logged against its slot; exactly 5 % is not."""
    from dataclasses import replace

    from orchestrator.run.bookkeeping import RunSummary, commit_episode
    from orchestrator.store.sqlite import new_episode_id
    from support.store_rows import create, record

    store = create(tmp_path / "c", n_units=1)
    slow, borderline = store.trials()[:2]
    summary = RunSummary(total=2)
    for trial, overruns in ((slow, 6), (borderline, 5)):
        episode_id = new_episode_id()
        attempt = store.begin_attempt(trial.slot, episode_id)
        timing = {"steps": 100, "overruns": overruns, "period_p99_ms": 40.0}
        commit_episode(store, attempt, trial, replace(record(episode_id), timing=timing), 30, summary)
    assert (summary.done_now, summary.done_total, summary.slow_episodes) == (2, 2, 1)
    events = [e for e in store.events() if e["kind"] == "overrun"]
    assert [e["slot"] for e in events] == [slow.slot]
    assert events[0]["message"] == "6 of 100 steps overran the 30 Hz period (p99 40.0 ms)"
    assert [t.state for t in store.trials()] == ["done", "done"]
    store.close()
