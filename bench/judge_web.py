"""Browser judge latency: `orchestrator judge CAMPAIGN --web` in a fresh process, driven by
headless Chromium (Playwright, Debian's /usr/bin/chromium), on a campaign of two 640x480
cameras at 30 fps, 8 s episodes (H.264 written by PyAV, as the recorder writes them).

Prints:
- time to first frame: from the start of navigation (`performance.timeOrigin`) to the page
  having every camera's first frame decoded (`ready`), and to the first frame presented by
  the compositor (the first `requestVideoFrameCallback` of every camera; an episode opens
  paused on that frame),
  over fresh page loads; target < 500 ms;
- key press to next episode ready: from the `s` key event to the next episode's every camera
  having its first frame (the page loaded it ahead while the judge watched the previous one),
  and to its first presented frame; target < 200 ms;
- the same for `z` (undo), which goes back to an episode not loaded ahead (a cold open).

Usage: `uv run python bench/judge_web.py [CAMPAIGN] [--episodes 8] [--loads 5] [--network MS,MBIT]`
(CAMPAIGN: an existing campaign to judge instead, e.g. the demo's; a new judge `bench-XXXX` labels it;
`--network 20,50`: Chromium's network emulation adds 20 ms of latency per request and caps the
throughput at 50 Mbit/s, a judge on another machine of a LAN or a good Wi-Fi).
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))   # the test helpers write small recorded campaigns

from support.judge_campaign import make_campaign  # noqa: E402
from support.judge_web import WebJudge, browser, wait  # noqa: E402


def first_presented(page) -> float:
    """When every camera had presented its first frame (ms since navigation start)."""
    return wait(page, "(() => { const f = Object.values(window.judgeMetrics.frames);"
                      " return f.length && f.every(l => l.length) ? Math.max(...f.map(l => l[0].wall)) : 0; })()")


def summary(name: str, values: list[float], target: float) -> None:
    print(f"{name:<46} median {statistics.median(values):6.0f} ms   max {max(values):6.0f} ms   "
          f"(n={len(values)}, target < {target:.0f} ms)   [{' '.join(f'{v:.0f}' for v in values)}]")


def press(page, key: str) -> tuple[float, float]:
    """(key -> ready, key -> first presented frame) in ms, for a key that changes the episode."""
    readies = page.evaluate("() => window.judgeMetrics.ready.length")
    page.keyboard.press(key)
    wait(page, f"window.judgeMetrics.ready.length > {readies}")
    key_at = page.evaluate("() => window.judgeMetrics.keys[window.judgeMetrics.keys.length - 1].wall")
    ready_at = page.evaluate("() => window.judgeMetrics.ready[window.judgeMetrics.ready.length - 1].wall")
    return ready_at - key_at, first_presented(page) - key_at


def new_page(chrome, network: str | None):
    """A page; with `network` ("MS,MBIT") behind Chromium's network emulation (DevTools)."""
    page = chrome.new_page(viewport={"width": 1600, "height": 1000})
    if network:
        latency, mbit = (float(x) for x in network.split(","))
        cdp = page.context.new_cdp_session(page)
        cdp.send("Network.enable")
        cdp.send("Network.emulateNetworkConditions", {
            "offline": False, "latency": latency, "downloadThroughput": mbit * 1e6 / 8,
            "uploadThroughput": mbit * 1e6 / 8})
    return page


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("campaign", nargs="?", type=Path, default=None)
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--loads", type=int, default=5)
    parser.add_argument("--network", default=None, metavar="MS,MBIT")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        if args.campaign is not None:
            campaign = args.campaign
            print(f"campaign: {campaign}")
        else:
            campaign = make_campaign(Path(tmp), marks=max(1, args.episodes // 2), fps=30, seconds=8.0,
                                     size=(640, 480))
            print(f"campaign: {args.episodes} episodes x 2 cameras, 640x480 30 fps 8 s "
                  f"(written in {time.perf_counter() - t0:.1f} s)")
        with WebJudge(campaign, "--judge", f"bench-{secrets.token_hex(3)}") as judge, browser() as chrome:
            ready, shown = [], []
            for _ in range(args.loads):
                page = new_page(chrome, args.network)
                page.goto(judge.url)
                ready.append(wait(page, "window.judgeMetrics.ready.length && window.judgeMetrics.ready[0].wall"))
                shown.append(first_presented(page))
                page.close()
            summary("time to first frame (decoded, ready)", ready, 500)
            summary("time to first frame (presented, rVFC)", shown, 500)
            page = new_page(chrome, args.network)
            page.goto(judge.url)
            wait(page, "window.judgeMetrics.ready.length")
            labels: list[tuple[float, float]] = []
            undos: list[tuple[float, float]] = []
            for _ in range(args.episodes - 1):
                time.sleep(1.0)                     # the judge watches; the next episode loads ahead
                labels.append(press(page, "s"))
                if len(undos) < 3:
                    time.sleep(0.5)
                    undos.append(press(page, "z"))
                    time.sleep(0.5)
                    labels.append(press(page, "s"))
            summary("key s -> next episode ready", [a for a, _ in labels], 200)
            summary("key s -> next episode's first frame presented", [b for _, b in labels], 200)
            summary("key z (undo, cold) -> episode ready", [a for a, _ in undos], 200)
            summary("key z (undo, cold) -> first frame presented", [b for _, b in undos], 200)


if __name__ == "__main__":
    main()
