"""Export speed and size: a simulated campaign of the demo protocol, then `orchestrator export` and
`orchestrator view`.

Runs `orchestrator run` on the demo protocol (the first --marks marks of layouts/grid20.yaml, both
policies, 12 s episodes, --repeats trials per mark and policy) and `orchestrator export` of the
result, each as a fresh process, and prints: the load average, the campaign's wall time, the export's wall time,
peak RSS and their ratio, how much of it is importing LeRobot and torch, and the export's own
account of its check; the recorded video bytes (the campaign's MP4s) and the dataset's (its
videos, and everything) and their ratio; the CPU seconds of the campaign and the export (robust
to a shared machine's load, unlike the wall times); then `orchestrator view` of one episode to an .rrd (time,
size); with --load-all, LeRobotDataset reading every frame of every episode (time, errors).
Targets: export <= 0.2x the campaign's wall time; dataset videos <= 1.05x the
recorded video bytes.

    uv run --all-extras python bench/export_speed.py [--marks 20] [--repeats 1] [--load-all] [-- EXPORT ARGS...]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def tree_bytes(root: Path, suffix: str = "") -> int:
    return sum(p.stat().st_size for p in root.rglob(f"*{suffix}") if p.is_file())


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float, str, float]:
    """(wall s, the process's own peak RSS in MB, its stdout, its CPU s: user + system, with the
    child processes it waited for) of `orchestrator ARGV`, a fresh process."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "orchestrator", *argv], cwd=ROOT, env=env,
                                stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(proc.pid, 0)   # this child's rusage alone
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            sys.exit(f"orchestrator {argv[0]} failed ({proc.returncode}): {err.read().strip()[-2000:]}")
        return wall, usage.ru_maxrss / 1024, out.read(), usage.ru_utime + usage.ru_stime


def load_all(root: Path, env: dict[str, str]) -> str:
    code = ("import sys, time; from lerobot.datasets.lerobot_dataset import LeRobotDataset; "
            f"d = LeRobotDataset('local/export-speed', root={str(root)!r}); t = time.perf_counter(); "
            "[d[i] for i in range(len(d))]; print(f'{len(d)} frames x {len(d.meta.video_keys)} cameras read by '"
            "f'LeRobotDataset ({d._video_backend}) in {time.perf_counter() - t:.1f} s, no timestamp error')")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"LeRobotDataset failed to read the export: {proc.stderr.strip()[-2000:]}")
    return proc.stdout.strip()


def campaign_files(work: Path, marks: int, repeats: int) -> Path:
    layout = yaml.safe_load((ROOT / "layouts" / "grid20.yaml").read_text())
    layout["marks"] = layout["marks"][:marks]
    (work / "layout.yaml").write_text(yaml.safe_dump(layout, sort_keys=False))
    protocol = (ROOT / "protocols" / "sim_demo.yaml").read_text().replace("../layouts/grid20.yaml", "layout.yaml")
    protocol = protocol.replace("trials_per_layout: 1", f"trials_per_layout: {repeats}")
    (work / "protocol.yaml").write_text(protocol)
    return work / "protocol.yaml"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--marks", type=int, default=20, help="marks of grid20 to use (default all 20)")
    parser.add_argument("--repeats", type=int, default=1, help="trials per mark and policy (default 1; 10: 400 episodes)")
    parser.add_argument("--load-all", action="store_true", help="read every frame back with LeRobotDataset")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    parser.add_argument("export_args", nargs="*", help="extra arguments for `orchestrator export`")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="export_speed_"))
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl"), "HF_HUB_OFFLINE": "1",
           "HF_HOME": str(work / "hf")}
    # An installed package has its bytecode compiled; with PYTHONDONTWRITEBYTECODE set, every fresh
    # process would recompile torch and LeRobot (~50 s on a loaded 2-core machine) and the
    # figure would measure the compiler. Cache it, warm up once, and time the import separately.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    imports = ("import orchestrator.export.writer, orchestrator.export.lerobot_import as i; i.import_lerobot_datasets(); "
               "import orchestrator.export.remux_writer, orchestrator.export.video_check")
    subprocess.run([sys.executable, "-c", imports], cwd=ROOT, env=env, check=True)
    load_at_start = os.getloadavg()[0]
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", imports], cwd=ROOT, env=env, check=True)
    import_s = time.perf_counter() - started
    try:
        campaign, root = work / "campaign", work / "dataset"
        run_s, _, _, run_cpu = timed(["run", str(campaign_files(work, args.marks, args.repeats)),
                                      "--rig", str(ROOT / "hardware" / "sim.yaml"), "--out", str(campaign)], env)
        export_s, export_mb, out, export_cpu = timed(["export", str(campaign), "--repo-id", "local/export-speed",
                                                      "--root", str(root), *args.export_args], env)
        recorded = tree_bytes(campaign / "videos", ".mp4")
        videos, total = tree_bytes(root / "videos"), tree_bytes(root)
        episodes = 2 * args.marks * args.repeats
        print(f"load average (1 min) {load_at_start:.2f} at the start, {os.getloadavg()[0]:.2f} after the export")
        print(f"campaign: {episodes} episodes in {run_s:.1f} s; export: {export_s:.1f} s, peak RSS {export_mb:.0f} MB "
              f"({export_s / run_s:.2f} of the campaign's wall time; target <= 0.20), of which "
              f"{import_s:.1f} s importing LeRobot and torch")
        print(f"CPU (user + system, with the helper processes): campaign {run_cpu:.1f} s, export {export_cpu:.1f} s")
        for line in out.splitlines():
            if line.startswith(("videos joined", "re-encoding", "checked")):
                print(f"  export: {line}")
        print(f"recorded video {recorded / 1e6:.1f} MB; dataset videos {videos / 1e6:.1f} MB "
              f"({videos / recorded:.3f}x; target <= 1.05x), all files {total / 1e6:.1f} MB")
        view_s, _, _, _ = timed(["view", str(campaign), "--trial", "1", "--save", str(work / "trial1.rrd")], env)
        print(f"view of one episode: {view_s:.1f} s to a saved .rrd of {(work / 'trial1.rrd').stat().st_size / 1e6:.2f} MB")
        if args.load_all:
            print(load_all(root, env))
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
