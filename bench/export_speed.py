"""Export speed and size: a simulated campaign of the demo protocol, then `orchestrator export`.

Runs `orchestrator run` on the demo protocol (the first --marks marks of layouts/grid20.yaml, both
policies, 12 s episodes) and `orchestrator export` of the result, each as a fresh process, and
prints: the campaign's wall time, the export's wall time and their ratio; the recorded video
bytes (the campaign's MP4s) and the dataset's bytes (its videos, and everything) and their
ratio. Targets (issue 14): export <= 1/5 of the campaign's wall time; dataset <= 2x the
recorded video bytes.

    uv run --all-extras python bench/export_speed.py [--marks 20] [-- EXPORT ARGS...]
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


def timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "orchestrator", *argv], cwd=ROOT, env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.exit(f"orchestrator {argv[0]} failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--marks", type=int, default=20, help="marks of grid20 to use (default all 20)")
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
    imports = "import orchestrator.export.writer, lerobot.datasets.lerobot_dataset, lerobot.datasets.utils"
    subprocess.run([sys.executable, "-c", imports], cwd=ROOT, env=env, check=True)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", imports], cwd=ROOT, env=env, check=True)
    import_s = time.perf_counter() - started
    try:
        layout = yaml.safe_load((ROOT / "layouts" / "grid20.yaml").read_text())
        layout["marks"] = layout["marks"][:args.marks]
        (work / "layout.yaml").write_text(yaml.safe_dump(layout, sort_keys=False))
        protocol = (ROOT / "protocols" / "sim_demo.yaml").read_text().replace("../layouts/grid20.yaml", "layout.yaml")
        (work / "protocol.yaml").write_text(protocol)
        campaign, root = work / "campaign", work / "dataset"
        run_s = timed(["run", str(work / "protocol.yaml"), "--rig", str(ROOT / "hardware" / "sim.yaml"),
                       "--out", str(campaign)], env)
        export_s = timed(["export", str(campaign), "--repo-id", "bench/export-speed", "--root", str(root),
                          *args.export_args], env)
        recorded = tree_bytes(campaign / "videos", ".mp4")
        videos, total = tree_bytes(root / "videos"), tree_bytes(root)
        episodes = 2 * args.marks
        print(f"campaign: {episodes} episodes in {run_s:.1f} s; export: {export_s:.1f} s "
              f"({export_s / run_s:.2f} of the campaign's wall time; target <= 0.20), of which "
              f"{import_s:.1f} s importing LeRobot and torch")
        print(f"recorded video {recorded / 1e6:.1f} MB; dataset videos {videos / 1e6:.1f} MB, all files "
              f"{total / 1e6:.1f} MB ({total / recorded:.2f}x the recorded video; target <= 2x)")
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
