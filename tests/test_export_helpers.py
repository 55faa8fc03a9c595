"""The export's helpers (`orchestrator/export/workers.py`): forked processes in a fresh process,
gone when the export's process is killed; the frame statistics they compute are
LeRobot's sample of the frames, with numpy's own statistics; a helper that dies fails the export
in one line, nothing published."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def write_noise_video(path: Path, frames: int, size: tuple[int, int] = (320, 240), seed: int = 3) -> Path:
    """An H.264 video of `frames` random frames (every level in every channel), `size` (w, h)."""
    import av

    rng = np.random.default_rng(seed)
    with av.open(str(path), mode="w") as container:
        stream = container.add_stream("libx264", rate=15)
        stream.width, stream.height, stream.pix_fmt = size[0], size[1], "yuv420p"
        for _ in range(frames):
            image = rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def test_frame_statistics_are_numpys_of_lerobots_sample(tmp_path):
    """`recorded.frame_stats` (histograms added up frame by frame) against numpy's min, max, mean,
    std and linear quantiles of the frames LeRobot samples (`sample_indices`), downsampled as
    LeRobot does (`auto_downsample_height_width`), every frame decoded by PyAV."""
    import av
    from lerobot.datasets.compute_stats import auto_downsample_height_width, sample_indices

    from orchestrator.export.recorded import frame_stats

    path = write_noise_video(tmp_path / "noise.mp4", 130)
    with av.open(str(path)) as container:
        decoded = [f.to_ndarray(format="rgb24").transpose(2, 0, 1) for f in container.decode(video=0)]
    assert len(decoded) == 130
    picked = sample_indices(len(decoded))
    assert 100 <= len(picked) < len(decoded)                  # a sample, not every frame
    images = np.stack([auto_downsample_height_width(decoded[i]) for i in picked]).astype(np.float64)
    assert images.shape[2:] == (120, 160)                     # downsampled by 2
    stats = frame_stats(path)
    assert int(stats["count"][0]) == len(picked)
    channels = images.transpose(1, 0, 2, 3).reshape(3, -1)
    assert np.array_equal(stats["min"], channels.min(axis=1)) and np.array_equal(stats["max"], channels.max(axis=1))
    assert np.allclose(stats["mean"], channels.mean(axis=1), rtol=0, atol=1e-9)
    assert np.allclose(stats["std"], channels.std(axis=1), rtol=0, atol=1e-9)
    for q in (0.01, 0.10, 0.50, 0.90, 0.99):
        assert np.allclose(stats[f"q{round(q * 100):02d}"], np.quantile(channels, q, axis=1), rtol=0, atol=1e-9), q


HELPERS = """
import json, os, sys, time
from orchestrator.export.workers import forks, helpers
from orchestrator.export.recorded import frame_stats
forked = forks()
pool = helpers()
pids = sorted(pool._processes)
stats = pool.submit(frame_stats, sys.argv[1]).result()
print(json.dumps({"forks": forked, "pids": pids, "job_pid": pool.submit(os.getpid).result(),
                  "mean": stats["mean"].tolist(), "count": int(stats["count"][0])}), flush=True)
time.sleep(600)
"""


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")
def test_helpers_are_forked_processes_that_end_with_the_export(tmp_path):
    """In a fresh process the helpers are forked processes, one per core but the main thread's (at
    most two); a job runs in one of them, not in the export's process, and computes what the
    export's process would; SIGKILL the export's process and every helper is gone within seconds."""
    from orchestrator.export.recorded import frame_stats

    video = write_noise_video(tmp_path / "noise.mp4", 30)
    process = subprocess.Popen([sys.executable, "-c", HELPERS, str(video)], cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        assert line, process.stderr.read()[-2000:] if process.poll() is not None else "no output"
        out = json.loads(line)
        assert out["forks"] is True and len(out["pids"]) == max(1, min(2, os.cpu_count() - 1))
        assert out["job_pid"] in out["pids"] and process.pid not in out["pids"]
        here = frame_stats(video)
        assert out["count"] == int(here["count"][0]) and out["mean"] == here["mean"].tolist()
        assert all(alive(pid) for pid in out["pids"])                           # control: there before the kill
        process.send_signal(signal.SIGKILL)
        process.wait()
        deadline = time.monotonic() + 30
        while any(alive(pid) for pid in out["pids"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(alive(pid) for pid in out["pids"]), "a helper outlived the export's process"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_a_dead_helper_fails_the_export_in_one_line_and_publishes_nothing(tmp_path, monkeypatch, capsys, hf_env):
    """A helper process that dies (here: one that exits in a job before the export starts) makes
    `orchestrator export` say so in one line, exit 1, and leave no dataset."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    from orchestrator.cli import main
    from orchestrator.export import run as export_run
    from support.export_campaign import make_campaign

    campaign = make_campaign(tmp_path / "sim", wrist_fps=10)
    broken = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
    with pytest.raises(BrokenProcessPool):
        broken.submit(os._exit, 9).result()
    monkeypatch.setattr(export_run, "helpers", lambda: broken)
    root = tmp_path / "dataset"
    code = main(["export", str(campaign), "--repo-id", "tester/dead-helper", "--root", str(root)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1, err
    assert "a helper process of the export died" in err[0] and "nothing was published" in err[0]
    assert not root.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".dataset")]


AFTER_TORCH = """
import json
from orchestrator.export.workers import forks
before = forks()
import torch
torch.ones(64, 64) @ torch.ones(64, 64)       # torch's thread pool started
print(json.dumps({"before": before, "after": forks()}))
"""


def test_a_process_that_imported_torch_makes_its_helpers_threads_not_forks():
    """An export inside a process that already imported torch (a test's process, beside a policy;
    seen in the suite as Python's 'multi-threaded, use of fork() may lead to deadlocks' warning)
    does not fork its helpers; control: the same fresh process forks before torch is imported."""
    out = subprocess.run([sys.executable, "-c", AFTER_TORCH], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout)
    assert got["before"] is True                      # control: a fresh process forks
    assert got["after"] is False


AT_EXIT = """
import atexit, gc, sys
atexit.register(lambda: print("frozen", gc.get_freeze_count(), flush=True))   # runs after the verb's handlers
from orchestrator.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("verb, frozen", [("export", True), ("report", False)])
def test_the_export_process_freezes_its_objects_as_it_exits(tmp_path, verb, frozen):
    """`orchestrator export` has Python freeze its objects (`gc.freeze`) when the process exits, so
    the last garbage collections do not walk what LeRobot and torch made at import (1.3 s of CPU
    measured, docs/benchmarks.md, Export), even when it refuses (here: no such campaign, exit 2);
    control: another verb's process leaves them to the collections."""
    argv = [verb, str(tmp_path / "no-campaign")] + (["--repo-id", "user/name"] if verb == "export" else [])
    out = subprocess.run([sys.executable, "-c", AT_EXIT, *argv], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 2, out.stderr[-2000:]
    assert "no-campaign" in out.stderr                # the refusal, one line
    count = int(out.stdout.split("frozen ")[1])
    assert (count > 0) is frozen, out.stdout
