"""Several arms on one campaign: wall time with 1, 2 and 3 stations on the sim rig.

Starts a private PostgreSQL cluster (Debian's postgresql-15, as the tests do), then for each
station count runs one fresh campaign of the same protocol with that many `orchestrator run
--station` processes started together, and prints the wall time (first start to last exit),
the speed-up over one station and the claim overhead per block (the claim transaction and
the recovery check, as each station reports it). Each station is one process with one
simulated arm, so on a machine with fewer cores than stations the speed-up is bounded by the
cores: the figure to read there is the claim overhead.

    uv run --all-extras python bench/stations.py [--repeats 2] [--stations 1 2 3]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.postgres import PgCluster  # noqa: E402

DATA = ROOT / "tests" / "data"
CLAIM = re.compile(r"(\d+) block\(s\) claimed; claim and recovery median ([\d.]+) ms per block")


def _protocol(work: Path, repeats: int) -> Path:
    text = (DATA / "tiny_protocol.yaml").read_text().replace("trials_per_layout: 1", f"trials_per_layout: {repeats}")
    (work / "tiny_layout.yaml").write_text((DATA / "tiny_layout.yaml").read_text())
    path = work / "bench_stations.yaml"
    path.write_text(text + "stations: {lease_s: 30}\n")
    return path


def run_campaign(cluster: PgCluster, protocol: Path, stations: int, work: Path) -> tuple[float, list[float], int]:
    """(wall seconds, per-station median claim ms, blocks) for one campaign."""
    url = cluster.new_database()
    videos = work / f"videos-{stations}"
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    started = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-m", "orchestrator", "run", str(protocol), "--rig",
                               str(DATA / "tiny_sim.yaml"), "--store", url, "--out", str(videos),
                               "--station", f"arm{i + 1}"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for i in range(stations)]
    outputs = [p.communicate()[0] for p in procs]
    wall = time.perf_counter() - started
    for proc, out in zip(procs, outputs, strict=True):
        if proc.returncode:
            raise SystemExit(f"station failed ({proc.returncode}):\n{out}")
    claims, blocks = [], 0
    for out in outputs:
        for n, ms in CLAIM.findall(out):
            blocks += int(n)
            claims.append(float(ms))
    return wall, claims, blocks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2, help="trials_per_layout (blocks = 3 x repeats)")
    parser.add_argument("--stations", type=int, nargs="+", default=[1, 2, 3])
    args = parser.parse_args()
    cluster = PgCluster().start()
    try:
        with tempfile.TemporaryDirectory(prefix="bench_stations_") as tmp:
            work = Path(tmp)
            protocol = _protocol(work, args.repeats)
            print(f"protocol: tiny (3 marks x {args.repeats} repeats = {3 * args.repeats} blocks, "
                  f"{6 * args.repeats} episodes of 5 s at 10 fps); cores: {os.cpu_count()}")
            base = None
            for n in args.stations:
                wall, claims, blocks = run_campaign(cluster, protocol, n, work)
                base = base or wall
                claim = statistics.median(claims) if claims else float("nan")
                print(f"{n} station(s): wall {wall:6.1f} s, speed-up {base / wall:4.2f}x, "
                      f"{blocks} blocks, claim overhead median {claim:.1f} ms per block", flush=True)
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
