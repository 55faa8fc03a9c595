"""Judge app latency and playback rate, half-block rendering, 320x240 videos.

Prints:
- time from a label key press to the next episode's first frame on screen (the episode was
  decoded ahead while the previous one was judged: the normal case), target < 300 ms;
- the same for `z` (undo), which goes back to an episode whose frames were dropped: a cold
  open, decoding from the file;
- playback: frames per second drawn at 1x for a 30 fps video.

"On screen" is when Textual has composited the frame (the app's `shown_log`, written from
`call_after_refresh` after the image widget got the frame), measured in a headless app of a
fixed terminal size. When tmux is installed, the key-to-next-episode time is also measured
end to end in a real terminal: `orchestrator judge` in a tmux pane, `send-keys s`, then
`capture-pane` polled until the next episode is drawn.
Usage: `uv run python bench/judge_latency.py [--episodes 8] [--size 120x40]`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import secrets
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))   # the test fixture writes small recorded campaigns

from textual import events  # noqa: E402

from orchestrator.judging.blinding import CampaignSource  # noqa: E402
from orchestrator.judging.tui.app import JudgeApp  # noqa: E402
from orchestrator.judging.tui.player import Player  # noqa: E402
from support.judge_campaign import make_campaign  # noqa: E402


def press(app: JudgeApp, key: str) -> float:
    """Send a key the way the terminal driver does; returns the send time."""
    event = events.Key(key, key if len(key) == 1 else None)
    event.set_sender(app)
    driver = app._driver
    if driver is None:
        raise RuntimeError("the judge app is not running")
    t0 = time.perf_counter()
    driver.send_message(event)
    return t0


CPU: list[float] = []   # process CPU seconds (all threads) from key to first frame


async def first_frame_after(app: JudgeApp, t0: float, episode: str | None = None,
                            timeout: float = 5.0) -> float:
    """Seconds from t0 until frame 0 of a different (or the given) episode is on screen."""
    before = app.current_id
    cpu0 = time.process_time()
    deadline = t0 + timeout
    while time.perf_counter() < deadline:
        for at, shown, frame in app.shown_log:
            if at >= t0 and frame == 0 and (shown == episode if episode else shown != before):
                CPU.append(time.process_time() - cpu0)
                return at - t0
        await asyncio.sleep(0.002)
    return float("nan")


async def _playback_rate(app: JudgeApp) -> tuple[float, float]:
    """(frames/s drawn, CPU s per frame) over 3 s of playback at 1x from the episode start."""
    player = app.query_one("#player", Player)
    player._set_clock(0.0)
    player.playing = True
    await asyncio.sleep(0.3)
    t_start, cpu_start = time.perf_counter(), time.process_time()
    await asyncio.sleep(3.0)
    t_end, cpu_end = time.perf_counter(), time.process_time()
    frames = {(e, f) for at, e, f in app.shown_log if t_start <= at <= t_end}
    return len(frames) / (t_end - t_start), (cpu_end - cpu_start) / max(1, len(frames))


async def playback_only(campaign: Path, size: tuple[int, int], renderer: str) -> tuple[float, float]:
    """(frames/s drawn, CPU s per frame) for 3 s of playback with `renderer`."""
    app = JudgeApp(CampaignSource(campaign, f"pb{int(time.time())}"), renderer=renderer)
    async with app.run_test(size=size) as pilot:
        await pilot.pause(1.0)
        rate = await _playback_rate(app)
        app.query_one("#player", Player).playing = False
        await pilot.press("q")
    app.source.close()
    return rate


async def measure(campaign: Path, size: tuple[int, int], rounds: int) -> dict:
    app = JudgeApp(CampaignSource(campaign, f"bench{int(time.time())}"), renderer="halfcell")
    result: dict = {"next": [], "undo": [], "fps": None}
    async with app.run_test(size=size) as pilot:
        await pilot.pause(1.0)
        result["fps"], result["cpu_per_frame"] = await _playback_rate(app)
        player = app.query_one("#player", Player)
        result["video_fps"] = player.shown_sources[0].fps
        for _ in range(rounds):
            await asyncio.sleep(3.0)            # a judge watches; the next episode decodes ahead
            t0 = press(app, "s")
            result["next"].append(await first_frame_after(app, t0))
        for _ in range(min(rounds, 3)):
            await asyncio.sleep(1.0)
            history = app.source.history()
            t0 = press(app, "z")
            result["undo"].append(await first_frame_after(app, t0, history[-1].episode_id))
        await pilot.press("q")
    app.source.close()
    return result


def tmux_latency(campaign: Path, size: tuple[int, int], rounds: int) -> list[float]:
    """Key to next episode drawn, in `orchestrator judge` inside a real tmux terminal."""
    tmux = shutil.which("tmux")
    if tmux is None:
        return []
    sock = f"judge-bench-{secrets.token_hex(3)}"
    cols, rows = size
    command = shlex.join([sys.executable, "-m", "orchestrator", "judge", str(campaign),
                          "--judge", "tmuxbench", "--renderer", "halfcell"])
    shell = (f"until [ \"$(stty size)\" = '{rows} {cols}' ]; do sleep 0.05; done; unset COLUMNS LINES; "
             f"cd {shlex.quote(str(ROOT))} && {command}; sleep 30")

    def run(*args: str) -> str:
        return subprocess.run([tmux, "-L", sock, *args], capture_output=True, text=True,
                              timeout=20).stdout

    def episode_on_screen() -> str | None:
        found = re.search(r"Episode (ep_[0-9a-f]{16})", run("capture-pane", "-p", "-t", "b"))
        return found.group(1) if found else None

    times = []
    try:
        run("new-session", "-d", "-s", "b", "-x", str(cols), "-y", str(rows), shell)
        deadline = time.monotonic() + 60
        while episode_on_screen() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        for _ in range(rounds):
            time.sleep(3.0)
            before = episode_on_screen()
            t0 = time.perf_counter()
            run("send-keys", "-t", "b", "s")
            while time.perf_counter() - t0 < 5:
                now = episode_on_screen()
                if now and now != before:
                    times.append(time.perf_counter() - t0)
                    break
        run("send-keys", "-t", "b", "q")
        time.sleep(1)
    finally:
        subprocess.run([tmux, "-L", sock, "kill-server"], capture_output=True, timeout=20)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=8, help="episodes in the campaign (even)")
    parser.add_argument("--size", default="120x40", help="terminal columns x rows")
    parser.add_argument("--seconds", type=float, default=12.0, help="episode length")
    args = parser.parse_args()
    cols, rows = (int(v) for v in args.size.split("x"))
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        campaign = make_campaign(Path(tmp), marks=max(1, args.episodes // 2), fps=30,
                                 seconds=args.seconds, size=(320, 240))
        print(f"campaign: {args.episodes} episodes x 2 cameras, 320x240, 30 fps, {args.seconds:g} s "
              f"(written in {time.perf_counter() - t:.1f} s); terminal {cols}x{rows}, half-blocks")
        r = asyncio.run(measure(campaign, (cols, rows), rounds=max(1, args.episodes // 2)))
        ti = asyncio.run(playback_only(campaign, (cols, rows), "ti-halfcell"))
        real = tmux_latency(campaign, (cols, rows), rounds=max(1, args.episodes // 2 - 1))

    def ms(values: list[float]) -> str:
        return (f"median {statistics.median(values) * 1e3:.0f} ms, max {max(values) * 1e3:.0f} ms "
                f"(n={len(values)})")

    verdict = "OK" if max(r["next"]) < 0.300 else "OVER TARGET"
    print(f"key -> next episode's first frame on screen: {ms(r['next'])}; target < 300 ms: {verdict}")
    print(f"  CPU used from key to frame (all threads): median {statistics.median(CPU[:len(r['next'])]) * 1e3:.0f} ms")
    if real:
        print(f"  in a real terminal (tmux, send-keys to capture-pane showing the next episode): "
              f"{ms(real)}")
    print(f"z (undo) -> earlier episode's first frame, cold decode: {ms(r['undo'])}")
    print(f"playback at 1x: {r['fps']:.1f} frames/s drawn of {r['video_fps']:.0f} "
          f"({r['fps'] / r['video_fps']:.2f} of real time); CPU per drawn frame "
          f"{r['cpu_per_frame'] * 1e3:.0f} ms (all threads; one free core would allow "
          f"~{1 / r['cpu_per_frame']:.0f} frames/s)")
    print(f"  textual-image's own half-cell widget for comparison: {ti[0]:.1f} frames/s, CPU per "
          f"frame {ti[1] * 1e3:.0f} ms; built-in half-blocks use {ti[1] / r['cpu_per_frame']:.1f}x less "
          "CPU per frame")
    load = os.getloadavg()[0]
    print(f"machine: {os.cpu_count()} cores, load average {load:.1f} while measuring"
          + (" (busy machine: wall-clock figures are inflated)" if load > (os.cpu_count() or 1) else ""))


if __name__ == "__main__":
    main()
