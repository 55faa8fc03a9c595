"""True-time playback of a recorded campaign in the judge app (headless, half-blocks).

Plays the first episode of CAMPAIGN from its start to its end at the given speed and prints the
wall-clock time it took, the clock's final value and the cursor line, and the playback rate
measured from the frames put on screen (slope of their timestamps against wall-clock time;
1.0 = real time at x1). For the demo campaign (15 fps cameras under a 30 Hz loop) the clock
must end at 12.00 s after 12 s of wall-clock time at x1.

    uv run python bench/judge_playback.py recordings/demo-... [--speed 1] [--size 160x48]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path

import numpy as np

from orchestrator.judging.blinding import CampaignSource
from orchestrator.judging.tui.app import JudgeApp
from orchestrator.judging.tui.player import Player


async def play(campaign: Path, speed: float, size: tuple[int, int]) -> None:
    app = JudgeApp(CampaignSource(campaign, f"playback{int(time.time())}"), renderer="halfcell",
                   autoplay=False)
    async with app.run_test(size=size) as pilot:
        player = app.query_one(Player)
        for _ in range(200):
            await pilot.pause(0.05)
            if player.all_decoded:
                break
        player.speed = speed
        start = time.perf_counter()
        player.toggle()
        while player.playing:
            await asyncio.sleep(0.02)
        wall = time.perf_counter() - start
        source = player.shown_sources[0]
        shown = [(at, source.times[f]) for at, e, f in app.shown_log if at >= start and e == app.current_id]
        at, pts = np.array(shown).T
        slope = float(np.polyfit(at - start, pts, 1)[0])
        print(f"camera {player.view_name} at {source.fps:.2f} fps, {source.decoded} frames; speed x{speed:g}")
        print(f"played to the end in {wall:.2f} s of wall-clock time (expected {player.end_s / speed:.2f} s); "
              f"on-screen timestamps advanced at {slope / speed:.3f} x real time x speed")
        print("cursor:", player.cursor_text().splitlines()[0])
        await pilot.press("q")
    app.source.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("campaign", type=Path)
    parser.add_argument("--speed", type=float, default=1.0)
    parser.add_argument("--size", default="160x48")
    args = parser.parse_args()
    cols, rows = (int(x) for x in args.size.split("x"))
    asyncio.run(play(args.campaign, args.speed, (cols, rows)))


if __name__ == "__main__":
    main()
