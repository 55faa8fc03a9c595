"""Speed of `orchestrator compare` (not a test; prints figures): 50 campaign stores (50 tasks)
x 6 policies (3 methods x 2 training seeds, scripted picks of different aim noise, physics
outcomes drawn as tests/support/compare_campaigns.py draws them) x 20 marks, with the default
50,000 stratified bootstrap resamples. Times the whole command in a fresh process (imports,
reading the 50 stores, every statistic, text output) and, in process, building the comparison.

Run: uv run python bench/compare_speed.py
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from orchestrator.analysis.compare import CampaignSource, build_comparison, read_inputs  # noqa: E402
from support.compare_campaigns import make_campaign  # noqa: E402

CAMPAIGNS = 50
POLICIES = {f"{m}{s}": (m, s, None, noise + 2 * s) for m, noise in (("alpha", 3.0), ("beta", 7.0), ("gamma", 11.0))
            for s in range(2)}


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        dirs = [make_campaign(Path(tmp) / f"c{i:02d}", "sim_demo", policies=POLICIES, seed=i) for i in range(CAMPAIGNS)]
        suite = Path(tmp) / "suite.yaml"
        suite.write_text("campaigns:\n" + "".join(f"  - {{path: {d}, task: task-{i:02d}}}\n" for i, d in enumerate(dirs)))
        print(f"wrote {CAMPAIGNS} stores x {len(POLICIES)} policies x 20 marks in {time.perf_counter() - t:.1f} s")
        walls = []
        for _ in range(3):
            t = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "orchestrator", "compare", str(suite)], cwd=ROOT,
                                  capture_output=True, text=True)
            walls.append(time.perf_counter() - t)
            assert proc.returncode == 0, proc.stderr
        print(f"orchestrator compare (fresh process, text, 50,000 resamples): best {min(walls):.2f} s, "
              f"runs {', '.join(f'{w:.2f}' for w in walls)} s")
        sources = [CampaignSource(d, task=f"task-{i:02d}") for i, d in enumerate(dirs)]
        t = time.perf_counter()
        inputs = read_inputs(sources, [])
        read_s = time.perf_counter() - t
        t = time.perf_counter()
        build_comparison(inputs)
        print(f"in process: reading the stores {read_s:.2f} s, building the comparison {time.perf_counter() - t:.2f} s")


if __name__ == "__main__":
    main()
