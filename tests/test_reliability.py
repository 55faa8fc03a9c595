"""Reliability: disk full, power loss (torn WAL and video), concurrent readers and judges.

Uses the tiny simulated protocol of tests/data (see test_runner.py).
"""

from __future__ import annotations

import random
import shutil
import subprocess
import sys
import time
from multiprocessing import get_context
from pathlib import Path

import pytest

from orchestrator.cli import main
from orchestrator.core.disk import DISK_MARGIN_BYTES
from orchestrator.rigs.profile import load_rig
from orchestrator.run.recording import episode_bytes_estimate
from orchestrator.store.sqlite import CampaignStore
from support.tiny import PROTOCOL, RIG, ROOT, run_cli  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from kill_anywhere import check_invariants, kill_process_tree, outcomes  # noqa: E402


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("reliability") / "reference"
    assert run_cli(out, "--workers", "2") == 0
    return out


def _start_run(out: Path, workers: int = 1) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "run", str(PROTOCOL), "--rig", str(RIG), "--out", str(out),
         "--workers", str(workers)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True)


@pytest.fixture
def small_fs(tmp_path):
    """A 48 MB tmpfs; mounting needs root (CAP_SYS_ADMIN): anywhere else the test fails saying so,
    never skips."""
    mount = tmp_path / "fs"
    mount.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(mount)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        pytest.fail(f"cannot mount a 48 MB tmpfs here ({result.stderr.strip()}): this test fills a small file "
                    "system and needs root (or CAP_SYS_ADMIN), e.g. run the suite as root in a container",
                    pytrace=False)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_disk_full_stops_cleanly_between_trials_and_resumes_on_more_space(small_fs, reference, capsys):
    per_episode = episode_bytes_estimate(load_rig(RIG).profile.cameras, 5.0)
    out = small_fs / "campaign"
    out.mkdir()
    free = shutil.disk_usage(small_fs).free
    # leave room for the store and about two episodes above the stop threshold
    ballast = small_fs / "ballast"
    keep = 2 * per_episode + DISK_MARGIN_BYTES + 300_000
    with open(ballast, "wb") as handle:
        handle.truncate(0)
        handle.write(b"\0" * (free - keep))
    code = run_cli(out, "--workers", "1")
    err = capsys.readouterr().err
    assert code == 1
    assert "not enough disk space" in err and len(err.strip().splitlines()) == 1
    with CampaignStore.open_readonly(out) as store:
        states = [t.state for t in store.trials()]
        assert store.integrity_ok()
    assert 0 < states.count("done") < 6 and "running" not in states
    done, problems = check_invariants(out)
    assert problems == []
    ballast.unlink()
    assert run_cli(out, "--workers", "1") == 0
    assert outcomes(out) == outcomes(reference)


def test_power_loss_torn_wal_and_video_are_detected_and_rerun(reference, tmp_path):
    rng = random.Random(11)
    out = tmp_path / "c"
    process = _start_run(out, workers=1)
    for line in process.stdout:
        if line.startswith("trial 3/6"):
            break
    kill_process_tree(process)  # no clean close: the WAL keeps the last transactions
    wal = out / "campaign.db-wal"
    assert wal.exists() and wal.stat().st_size > 0
    with open(wal, "r+b") as handle:
        handle.truncate(rng.randrange(wal.stat().st_size))
    newest = max((out / "videos").glob("*/*.mp4"), key=lambda p: p.stat().st_mtime)
    with open(newest, "r+b") as handle:
        handle.truncate(rng.randrange(newest.stat().st_size))
    assert run_cli(out, "--workers", "1") == 0
    done, problems = check_invariants(out)
    assert done == 6 and problems == []
    assert outcomes(out) == outcomes(reference)


def _label_until(directory: str, judge: str, stop_file: str) -> int:
    """Label episodes (alternating success/failure) until `stop_file` exists; return the count."""
    made = 0
    with CampaignStore.open_for_labels(Path(directory)) as store:
        episodes = [e["id"] for e in store.episodes()]
        while not Path(stop_file).exists():
            store.add_judgment(episodes[made % len(episodes)], judge, "success" if made % 2 else "failure")
            made += 1
            time.sleep(0.01)   # pacing: a label every 10 ms until the test writes the stop file
    return made


def _label_counts(directory: Path) -> tuple[int, int]:
    with CampaignStore.open_readonly(directory) as store:
        return len(store.judgments("ann")), len(store.judgments("bob"))


def test_report_and_two_judges_work_while_run_writes(tmp_path, capsys):
    out = tmp_path / "c"
    assert run_cli(out, "--workers", "1", "--stop-after", "2") == 0
    stop = tmp_path / "stop"
    reports_during_run = 0
    with get_context("spawn").Pool(2) as pool:
        pending = pool.starmap_async(_label_until, [(str(out), "ann", str(stop)), (str(out), "bob", str(stop))])
        deadline = time.monotonic() + 120
        while min(_label_counts(out)) == 0:  # both judges are labelling before the run starts
            assert time.monotonic() < deadline and not pending.ready(), "labellers did not start"
            time.sleep(0.1)
        at_start = _label_counts(out)
        process = _start_run(out, workers=1)
        try:
            while process.poll() is None:
                capsys.readouterr()
                with CampaignStore.open_readonly(out) as store:
                    mid_run = any(t.state != "done" for t in store.trials())
                assert main(["report", str(out), "--format", "json"]) == 0
                assert '"schema": "orchestrator.report/1"' in capsys.readouterr().out
                reports_during_run += mid_run
                time.sleep(0.2)   # pacing: a report every 0.2 s while the run goes on
            at_end = _label_counts(out)
            _, err = process.communicate(timeout=300)
            assert process.returncode == 0, err
        finally:
            stop.touch()
            if process.poll() is None:
                kill_process_tree(process)
        ann, bob = pending.get(timeout=120)
    assert reports_during_run >= 1
    assert at_end[0] > at_start[0] and at_end[1] > at_start[1], "labels were written while the run wrote"
    with CampaignStore.open_readonly(out) as store:
        assert len(store.judgments("ann")) == ann and len(store.judgments("bob")) == bob
        assert all(t.state == "done" for t in store.trials())
        assert store.integrity_ok()
