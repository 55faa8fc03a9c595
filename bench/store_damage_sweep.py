"""Byte-damage sweep of a campaign store: write one byte at each offset of a small campaign.db,
run `orchestrator report` on the damaged copy, and classify what the report did.

- refused: `report` exited non-zero (the damage was found: the evidence chain, the frozen
  protocol's hash, SQLite's own checks, the schema version);
- unchanged: exit 0 and the report printed exactly what it prints for the undamaged store;
- silent: exit 0 and a different report, the damage unnoticed. The goal is 0.
- same byte: the offset already held the byte written (nothing was damaged).

The campaign is the tiny simulated one of the tests (tests/data/tiny_protocol.yaml: 3 marks x
2 policies, 6 trials), made fresh unless `--campaign DIR` names one; its episodes' files are
linked into each damaged copy, so only the store differs. `report` runs in this process
(`orchestrator.cli.main`), as the command line runs it.

    uv run python bench/store_damage_sweep.py                 # every offset (about 90,000; an hour on 2 cores)
    uv run python bench/store_damage_sweep.py --stride 97     # a quick sample
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from orchestrator.store.sqlite_file import DB_NAME as DB  # noqa: E402  (after the path insert)

SHOWN = 40   # silent offsets printed
_STATE: dict = {}


def make_campaign(out: Path) -> Path:
    """The tiny campaign, run to completion in a fresh process; its store checkpointed."""
    data = ROOT / "tests" / "data"
    done = subprocess.run([sys.executable, "-m", "orchestrator", "run", str(data / "tiny_protocol.yaml"),
                           "--rig", str(data / "tiny_sim.yaml"), "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")})
    if done.returncode:
        raise SystemExit(f"the campaign did not run: {done.stderr.strip()[-500:]}")
    return out


def report(directory: Path, fmt: str) -> tuple[int, str, str]:
    from orchestrator.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["report", str(directory), "--format", fmt])
    return code, out.getvalue(), err.getvalue()


def _setup(source: str, pristine: bytes, value: int, fmt: str) -> None:
    """A worker's copy of the campaign (the store copied, the episodes' files linked) and the
    report of its undamaged store (the report names its folder)."""
    work = Path(tempfile.mkdtemp(prefix="damage-"))
    for name in os.listdir(source):
        if name not in (DB, f"{DB}-wal", f"{DB}-shm", "campaign.lock"):
            os.symlink(Path(source) / name, work / name)
    (work / DB).write_bytes(pristine)
    code, baseline, err = report(work, fmt)
    if code != 0:
        raise SystemExit(f"the undamaged store does not report: {err.strip()}")
    _STATE.update(work=work, pristine=pristine, baseline=baseline, value=value, fmt=fmt)


def _one(offset: int) -> tuple[int, str, str]:
    """(offset, class, detail) of the damage at `offset`."""
    work, pristine, value = _STATE["work"], _STATE["pristine"], _STATE["value"]
    if pristine[offset] == value:
        return offset, "same byte", ""
    damaged = bytearray(pristine)
    damaged[offset] = value
    for suffix in ("-wal", "-shm", "-journal"):
        (work / f"{DB}{suffix}").unlink(missing_ok=True)
    (work / DB).write_bytes(bytes(damaged))
    code, out, err = report(work, _STATE["fmt"])
    if code != 0:
        return offset, "refused", (err.strip().splitlines() or [f"exit {code}"])[0]
    if out == _STATE["baseline"]:
        return offset, "unchanged", ""
    changed = next((b for a, b in zip(_STATE["baseline"].splitlines(), out.splitlines(), strict=False) if a != b), "")
    return offset, "silent", changed[:160]


def _chunk(offsets: list[int]) -> list[tuple[int, str, str]]:
    return [_one(o) for o in offsets]


def _reason(detail: str) -> str:
    """A refusal's kind, for the summary."""
    for needle, kind in (("evidence chain", "evidence chain"), ("integrity check", "SQLite integrity check"),
                         ("SHA-256", "frozen protocol hash"),
                         ("damaged", "SQLite: damaged"), ("malformed", "SQLite: damaged"),
                         ("not a campaign store", "not a campaign store"), ("schema", "schema version"),
                         ("newer orchestrator", "schema version")):
        if needle in detail:
            return kind
    return "other: " + detail[:80]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--campaign", type=Path, help="sweep this campaign's store (default: a fresh tiny campaign)")
    parser.add_argument("--byte", type=lambda s: int(s, 0), default=0x20, help="the byte written (default 0x20, a space)")
    parser.add_argument("--stride", type=int, default=1, help="every N-th offset (default 1: all)")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--format", default="text", choices=("text", "json"), help="the report compared")
    args = parser.parse_args(argv)

    source = args.campaign or make_campaign(Path(tempfile.mkdtemp(prefix="sweep-")) / "campaign")
    pristine = (source / DB).read_bytes()
    page_size = int.from_bytes(pristine[16:18], "big") or 65536
    offsets = list(range(0, len(pristine), args.stride))
    chunks = [offsets[i:i + 200] for i in range(0, len(offsets), 200)]
    started = time.monotonic()
    results: list[tuple[int, str, str]] = []
    with ProcessPoolExecutor(args.jobs, initializer=_setup,
                             initargs=(str(source), pristine, args.byte, args.format)) as pool:
        for done in pool.map(_chunk, chunks):
            results += done
    seconds = time.monotonic() - started
    classes = Counter(kind for _, kind, _ in results)
    reasons = Counter(_reason(detail) for _, kind, detail in results if kind == "refused")
    print(f"store {source / DB}: {len(pristine)} bytes, {len(offsets)} offsets (stride {args.stride}), "
          f"byte {args.byte:#04x} written, report --format {args.format}; {seconds:.0f} s with {args.jobs} jobs")
    for kind in ("refused", "unchanged", "silent", "same byte"):
        print(f"  {kind:10s} {classes.get(kind, 0)}")
    for reason, n in reasons.most_common():
        print(f"    refused by {reason}: {n}")
    silent = [(offset, detail) for offset, kind, detail in results if kind == "silent"]
    for offset, detail in silent[:SHOWN]:
        print(f"  silent at offset {offset} (page {offset // page_size + 1}): {detail}")
    if len(silent) > SHOWN:
        print(f"  ... and {len(silent) - SHOWN} more silent offsets")
    return 1 if classes.get("silent") else 0


if __name__ == "__main__":
    sys.exit(main())
