"""Kill-anywhere harness: SIGKILL a simulated campaign at random moments and resume it.

After every kill the campaign must still hold: the store passes `PRAGMA integrity_check`,
every done trial has exactly one episode whose files are complete (size + SHA-256 as
committed), no partial file is visible inside a committed episode's folder, and the number
of done trials never goes down. When the campaign completes, its outcomes must equal those
of an uninterrupted run, with exactly one done trial per scheduled slot.

    uv run python bench/kill_anywhere.py --kills 50            # the full version (minutes)

tests/test_runner.py (test_sigkill_anywhere_then_resume_gives_identical_outcomes) runs a few kills of the same harness on a tiny protocol.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from orchestrator.run.recording import PARTIAL  # noqa: E402
from orchestrator.store.episode_files import damaged_files  # noqa: E402
from orchestrator.store.sqlite import CampaignStore  # noqa: E402
from orchestrator.store.sqlite_file import DB_NAME


@dataclass
class KillStats:
    kills: int = 0
    resumes: int = 0
    campaigns: list[Path] = field(default_factory=list)
    aborted_attempts: int = 0
    violations: list[str] = field(default_factory=list)


def run_command(protocol: Path, rig: Path, out: Path, workers: int) -> list[str]:
    return [sys.executable, "-m", "orchestrator", "run", str(protocol), "--rig", str(rig),
            "--out", str(out), "--workers", str(workers)]


def outcomes(directory: Path) -> dict[int, tuple[str, str, bool | None]]:
    """slot -> (mark, policy, physics outcome) of the done trials."""
    with CampaignStore.open_readonly(directory) as store:
        physics = {e["id"]: e["physics_success"] for e in store.episodes()}
        return {t.slot: (t.mark_id, t.policy, physics.get(t.episode_id))
                for t in store.trials() if t.state == "done"}


def check_invariants(directory: Path) -> tuple[int, list[str]]:
    """(done trials, violations) of a campaign directory at rest."""
    problems: list[str] = []
    if not (directory / DB_NAME).exists():
        return 0, problems  # killed before the store was published: nothing to check
    with CampaignStore.open_readonly(directory) as store:
        if not store.integrity_ok():
            problems.append("integrity_check failed")
        episodes = {e["id"]: e for e in store.episodes()}
        done = [t for t in store.trials() if t.state == "done"]
        slots = [e["slot"] for e in episodes.values()]
        if len(slots) != len(set(slots)):
            problems.append("a slot has two episodes")
        for trial in done:
            episode = episodes.get(trial.episode_id) if trial.episode_id is not None else None
            if episode is None or trial.episode_id is None:
                problems.append(f"done trial {trial.slot} has no episode")
                continue
            attempts = [a for a in store.attempts() if a["slot"] == trial.slot and a["status"] == "done"]
            if len(attempts) != 1:
                problems.append(f"trial {trial.slot} has {len(attempts)} done attempts")
            bad = damaged_files(directory, episode["digests"])
            if bad:
                problems.append(f"trial {trial.slot}: damaged files {bad}")
            for folder in (directory / "videos" / trial.episode_id, directory / "episodes" / trial.episode_id):
                partial = [p.name for p in folder.glob(f"*{PARTIAL}*")]
                if partial:
                    problems.append(f"trial {trial.slot}: partial files visible {partial}")
        return len(done), problems


def kill_process_tree(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def kill_loop(protocol: Path, rig: Path, out: Path, kills: int, workers: int, max_delay_s: float,
              rng: random.Random, log=print) -> KillStats:
    """Start/kill/resume until `kills` kills were delivered, then run to completion.

    A kill that comes too late (the run already finished) is not counted; once a campaign
    completes, the next kills go to a fresh campaign (`out`-2, `out`-3, ...), so every kill
    lands in a campaign that is still running. `stats.campaigns` lists the directories.
    """
    stats = KillStats()
    previous_done = 0
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    directory = out
    stats.campaigns.append(directory)
    while True:
        process = subprocess.Popen(run_command(protocol, rig, directory, workers), cwd=ROOT, env=env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                   start_new_session=True)
        stats.resumes += 1
        err = b""
        if stats.kills < kills:
            delay = rng.uniform(0.0, max_delay_s)
            try:
                _, err = process.communicate(timeout=delay)
            except subprocess.TimeoutExpired:
                kill_process_tree(process)
                stats.kills += 1
        else:
            _, err = process.communicate(timeout=1800)
        if process.returncode not in (0, -signal.SIGKILL):
            stats.violations.append(f"{directory.name}: run exited {process.returncode}: "
                                    f"{(err or b'').decode()[-300:].strip()}")
            return stats   # it would fail again at every resume: the loop would never end
        done, problems = check_invariants(directory)
        stats.violations.extend(f"{directory.name}: {p}" for p in problems)
        if done < previous_done:
            stats.violations.append(f"{directory.name}: done trials went down from {previous_done} to {done}")
        previous_done = done
        if process.returncode == 0:
            if stats.kills >= kills:
                break
            directory = out.with_name(f"{out.name}-{len(stats.campaigns) + 1}")
            stats.campaigns.append(directory)
            previous_done = 0
        log(f"kill {stats.kills}/{kills}: {done} trials done in {directory.name}")
    for campaign in stats.campaigns:
        with CampaignStore.open_readonly(campaign) as store:
            stats.aborted_attempts += sum(1 for a in store.attempts() if a["status"] == "aborted")
    return stats


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=50)
    parser.add_argument("--protocol", type=Path, default=ROOT / "tests" / "data" / "tiny_protocol.yaml")
    parser.add_argument("--rig", type=Path, default=ROOT / "tests" / "data" / "tiny_sim.yaml")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--max-delay", type=float, default=8.0, help="seconds before a kill, at most")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--work", type=Path, default=Path("/tmp/kill_anywhere"))
    args = parser.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    started = time.monotonic()
    reference = args.work / "reference"
    subprocess.run(run_command(args.protocol, args.rig, reference, args.workers), cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    expected = outcomes(reference)
    killed = args.work / "killed"
    stats = kill_loop(args.protocol, args.rig, killed, args.kills, args.workers, args.max_delay,
                      random.Random(args.seed))
    lost = mismatched = done_total = 0
    for campaign in stats.campaigns:
        got = outcomes(campaign)
        done_total += len(got)
        lost += len(expected) - len(got)
        mismatched += sum(1 for slot in expected if got.get(slot) != expected[slot])
    print(f"kills delivered:      {stats.kills} (SIGKILL to the run and its workers)")
    print(f"campaigns:            {len(stats.campaigns)} of {len(expected)} trials each, all completed")
    print(f"resumes:              {stats.resumes}")
    print(f"aborted attempts:     {stats.aborted_attempts} (re-run)")
    print(f"trials done:          {done_total} (lost {lost})")
    print(f"outcome mismatches:   {mismatched} (against an uninterrupted run)")
    print(f"invariant violations: {len(stats.violations)}")
    for violation in stats.violations[:10]:
        print(f"  {violation}")
    print(f"wall time:            {time.monotonic() - started:.0f} s")
    return 0 if not stats.violations and lost == 0 and mismatched == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
