"""Speed of the statistics that users wait for (not a test; prints figures).

- `report` on an outcomes CSV of 10,000 trials (5,000 layouts x 2 policies, 4 strata):
  CSV parsing, building the Report, rendering text and JSON (HTML plots timed separately).
- `plan` for targets that need up to ~2,000 layouts, cold (first call builds the rejection
  bounds) and warm.
- the e-value stopping decision on 1,000 layouts (what the runner pays after each layout).

Run: uv run python bench/stats_speed.py
"""

from __future__ import annotations

import functools
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

t0 = time.perf_counter()
from orchestrator.analysis import stats  # noqa: E402
from orchestrator.analysis.outcomes_csv import load_outcomes_csv  # noqa: E402
from orchestrator.analysis.report import build_report, render  # noqa: E402
from orchestrator.analysis.stopping import stopping_decision  # noqa: E402

IMPORT_S = time.perf_counter() - t0


def timed(fn, repeat: int = 3):
    """Best of `repeat` runs, in CPU seconds of this process (robust to a loaded machine;
    wall time is printed at the end for the whole run)."""
    best = float("inf")
    result = None
    for _ in range(repeat):
        t = time.process_time()
        result = fn()
        best = min(best, time.process_time() - t)
    return best, result


def main() -> None:
    wall = time.perf_counter()
    print("times are CPU seconds of this process, best of 3 unless said")
    print(f"import orchestrator.stats/outcomes/report/stopping: {IMPORT_S:.2f} s (scipy dominates)")
    rng = random.Random(1)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.csv"
        rows = ["layout,policy,success,stratum,failure_mode"]
        for i in range(5000):
            hard = rng.random()
            a = rng.random() < 0.9 - 0.3 * hard
            b = rng.random() < 0.8 - 0.3 * hard
            rows.append(f"L{i:05d},A,{int(a)},s{i % 4},{'' if a else 'missed'}")
            rows.append(f"L{i:05d},B,{int(b)},s{i % 4},{'' if b else 'pushed'}")
        path.write_text("\n".join(rows) + "\n")
        t_load, data = timed(lambda: load_outcomes_csv(path))
        t_build, report = timed(lambda: build_report(data))
        t_text, _ = timed(lambda: render(report, "text"))
        t_json, _ = timed(lambda: render(report, "json"))
        t_html, _ = timed(lambda: render(report, "html"), repeat=1)
        total = t_load + t_build + t_text
        print(f"report, 10,000 trials: load CSV {t_load * 1000:.0f} ms, build {t_build * 1000:.0f} ms, "
              f"text {t_text * 1000:.1f} ms, json {t_json * 1000:.1f} ms -> {total * 1000:.0f} ms "
              f"(html with 4 plots {t_html:.2f} s, first call includes importing matplotlib)")

    cases = [(0.9, 0.8, None), (0.9, 0.85, None), (0.9, 0.85, 0.9), (0.95, 0.92, 0.95), (0.6, 0.55, None)]
    for p_a, p_b, agree in cases:
        stats._rejection_bounds.cache_clear()
        plan = functools.partial(stats.plan, p_a, p_b, agree, n_max=2000)
        t_cold, r = timed(plan, repeat=1)
        t_warm, r = timed(plan)
        needed = ", ".join(f"{int(100 * w)}%: {n if n is not None else '>2000'}" for w, n in r.targets)
        print(f"plan p_a={p_a} p_b={p_b} agreement={agree if agree is not None else 'indep.'}: "
              f"{needed} layouts; cold {t_cold * 1000:.0f} ms, warm {t_warm * 1000:.0f} ms")

    proto = {"policies": {"A": {}, "B": {}}, "analysis": {"alpha": 0.05, "stopping": {"kind": "evalue", "max_layouts": 2000}}}
    outcomes = data.outcomes[:2000]
    t_stop, dec = timed(lambda: stopping_decision(outcomes, proto))
    print(f"stopping decision on 1,000 layouts: {t_stop * 1000:.1f} ms (stop={dec.stop}, e={dec.e_value:.3g})")
    print(f"wall time of the whole benchmark: {time.perf_counter() - wall:.1f} s")


if __name__ == "__main__":
    main()
