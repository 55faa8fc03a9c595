"""The browser judge from the outside: `orchestrator judge ... --web --port 0` in a fresh
process (its URL read from what it prints), headless Chromium driven through Playwright
(Debian's /usr/bin/chromium, nothing downloaded), and small HTTP helpers.

`WebJudge` starts the server and stops it (SIGINT, as Ctrl-C); `browser()` opens Chromium;
`wait(page, js)` polls a JavaScript expression (the page's Content-Security-Policy forbids
`eval`, which Playwright's `wait_for_function` uses, so the tests poll `page.evaluate`).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import av
import pytest

from support.repo import REPO

CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--no-first-run", "--disable-sync",
                  "--autoplay-policy=no-user-gesture-required"]


def chromium_path() -> str:
    for path in ("/usr/bin/chromium", "/usr/bin/chromium-browser"):
        if Path(path).exists():
            return path
    pytest.fail("headless Chromium is needed for the browser judge tests: apt-get install chromium",
                pytrace=False)


class WebJudge:
    """`orchestrator judge ARGS --web --port 0` running in a fresh process."""

    def __init__(self, *args: str | os.PathLike, env: dict | None = None, prefix: list[str] | None = None):
        cmd = [*(prefix or []), sys.executable, "-m", "orchestrator", "judge", *map(str, args), "--web",
               *([] if "--port" in map(str, args) else ["--port", "0"])]
        self.proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env={**os.environ, **(env or {})})
        self.lines: list[str] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.lines.append(line)
            if match := re.search(r"(http://\S+\?token=(\S+))", line):
                self.url, self.token = match.group(1), match.group(2)
                break
        else:
            self.stop()
            raise AssertionError("no URL printed in 60 s")
        if not hasattr(self, "url"):
            err = self.proc.stderr.read()
            raise AssertionError(f"server exited: {''.join(self.lines)} {err}")
        parts = urlsplit(self.url)
        self.base = f"{parts.scheme}://{parts.netloc}"
        self.host, self.port = parts.hostname, parts.port
        while (line := self.proc.stdout.readline()) and "Ctrl-C" not in line:
            self.lines.append(line)

    def request(self, method: str, path: str, body: dict | None = None, headers: dict | None = None,
                token: bool = True, host: str = "127.0.0.1") -> tuple[int, dict, bytes]:
        """One HTTP request (status, lower-case headers, body); with the token header unless told not."""
        conn = http.client.HTTPConnection(host, self.port, timeout=30)
        sent = {**({"X-Judge-Token": self.token} if token else {}), **(headers or {})}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            sent.setdefault("Content-Type", "application/json")
        conn.request(method, path, body=data, headers=sent)
        response = conn.getresponse()
        out = response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
        conn.close()
        return out

    def state(self) -> dict:
        status, _, body = self.request("GET", "/api/state")
        assert status == 200, body
        return json.loads(body)

    def act(self, action: str, value=None, episode: str | None = None) -> tuple[int, dict]:
        status, _, body = self.request("POST", "/api/action", {"action": action, "value": value, "episode": episode},
                                       headers={"X-Judge-Request": "1"})
        return status, json.loads(body)

    def stop(self) -> tuple[int, str, str]:
        """Ctrl-C; returns (exit code, rest of stdout, stderr)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            out, err = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
        return self.proc.returncode, "".join(self.lines) + out, err

    def __enter__(self) -> WebJudge:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


@contextlib.contextmanager
def browser():
    """A headless Chromium (Playwright over the DevTools protocol)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chrome = p.chromium.launch(executable_path=chromium_path(), headless=True, args=CHROMIUM_FLAGS)
        try:
            yield chrome
        finally:
            chrome.close()


def wait(page, expression: str, timeout: float = 15.0):
    """Poll `expression` in the page until it is truthy; returns its value."""
    deadline = time.monotonic() + timeout
    while True:
        value = page.evaluate(f"() => {expression}")
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {expression}")
        time.sleep(0.02)


def press_and_wait(page, key: str) -> None:
    """Press `key` (a label key) and wait until the server has answered it."""
    before = page.evaluate("() => window.judgeMetrics.answered")
    page.keyboard.press(key)
    wait(page, f"window.judgeMetrics.answered > {before}")


def write_vfr(path: Path, times: list[float], size: tuple[int, int] = (64, 48)) -> None:
    """An H.264 MP4 whose frames carry the given timestamps (as the recorder writes them:
    PTS from the control step), with a block that moves frame by frame."""
    import numpy as np

    width, height = size
    with av.open(str(path), "w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=30)
        stream.time_base = __import__("fractions").Fraction(1, 90000)
        stream.codec_context.time_base = stream.time_base
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = {"preset": "ultrafast", "g": "15"}
        for index, t in enumerate(times):
            image = np.full((height, width, 3), 90, np.uint8)
            x = int((width - 8) * index / max(len(times) - 1, 1))
            image[height // 3: height // 3 + 8, x: x + 8] = 250
            frame = av.VideoFrame.from_ndarray(image, format="rgb24")
            frame.pts = round(t * 90000)
            frame.time_base = stream.time_base
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


# Frame times of the rewritten front camera: 15 fps with 0.4 s of dropped frames after 0.8 s
# (a camera that stalled), so a player that counted frames at a nominal rate would be off.
VFR_TIMES = [round(i / 15, 6) for i in range(13)] + [round(1.2 + i / 15, 6) for i in range(11)]
POSE = {"position": [0.55, 0.0, 0.35], "target": [0.2, 0.0, 0.0], "fovy_deg": 45.0, "width": 64, "height": 48}


def dress_campaign(directory: Path) -> list[str]:
    """Give every episode of a `make_campaign` campaign what real recordings have: a front
    camera with recorded (uneven) timestamps, its pose (`cameras.json`) and a start still.
    Returns the episode ids."""
    import sqlite3

    import cv2
    import numpy as np

    conn = sqlite3.connect(directory / "campaign.db")
    ids = []
    try:
        for episode_id, files in conn.execute("SELECT id, files FROM episodes").fetchall():
            files = json.loads(files)
            folder = directory / "videos" / episode_id
            write_vfr(folder / "front.mp4", VFR_TIMES)
            (folder / "cameras.json").write_text(json.dumps({"front": POSE}))
            still = np.zeros((48, 64, 3), np.uint8)
            still[:, :, 2] = 255
            cv2.imwrite(str(folder / "front.start.jpg"), still)
            files.update({"camera_poses": f"videos/{episode_id}/cameras.json",
                          "front.start": f"videos/{episode_id}/front.start.jpg"})
            conn.execute("UPDATE episodes SET files=? WHERE id=?", (json.dumps(files), episode_id))
            ids.append(episode_id)
        conn.commit()
    finally:
        conn.close()
    from support.evidence import accept_edits

    accept_edits(directory)   # the episodes as if they had been recorded with these files
    return ids
