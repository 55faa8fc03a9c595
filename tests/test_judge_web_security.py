"""The browser judge on a network: the token, cross-site requests, caching, and blinding on the
wire and on disk (every byte a judge's browser receives; every file the server process opens,
seen by strace, with planted canaries and a positive control)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.judge_campaign import SECRET_TERMS, make_campaign
from support.judge_web import WebJudge, browser, dress_campaign, wait
from support.requires import require_program
from support.video import tag_with_policy

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    directory = make_campaign(tmp_path_factory.mktemp("websec"), marks=1, seconds=1.0)
    dress_campaign(directory)
    return directory


@pytest.fixture
def campaign(template, tmp_path) -> Path:
    return Path(shutil.copytree(template, tmp_path / template.name))


def media_url(judge: WebJudge) -> str:
    return judge.state()["episode"]["cameras"][0]["video"]


def test_without_the_token_nothing_is_served(campaign):
    with WebJudge(campaign, "--judge", "alice", "--host", "0.0.0.0") as judge:
        printed = "".join(judge.lines)
        assert "?token=" in printed and "scan it on a tablet" in printed
        assert "\u2588" in printed or "\u2580" in printed or "\u2584" in printed    # the QR code
        video = media_url(judge)
        for path in ("/", "/api/state", "/api/upcoming", video):
            status, headers, body = judge.request("GET", path, token=False)
            assert status == 403 and b"token" in body and headers["cache-control"] == "no-store", path
            wrong = judge.token[:-1] + ("x" if judge.token[-1] != "x" else "y")   # never the token itself
            status, _, _ = judge.request("GET", path, headers={"X-Judge-Token": wrong}, token=False)
            assert status == 403, path
            assert judge.request("GET", path)[0] == 200, path                       # positive control
        status, _, body = judge.request("POST", "/api/action", {"action": "label", "value": "success"},
                                        headers={"X-Judge-Request": "1"}, token=False)
        assert status == 403
        assert judge.request("GET", "/?token=wrong", token=False)[0] == 403
        status, headers, _ = judge.request("GET", f"/?token={judge.token}", token=False)
        assert status == 303 and headers["location"] == "/"
        cookie = headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        status, _, _ = judge.request("GET", "/api/state", headers={"Cookie": cookie.split(";")[0]}, token=False)
        assert status == 200
        assert judge.state()["progress"]["decided"] == 0          # nothing was labelled without the token


def test_label_endpoints_refuse_cross_site_requests(campaign):
    with WebJudge(campaign, "--judge", "alice") as judge:
        episode = judge.state()["episode"]["id"]
        body = {"action": "label", "value": "success", "episode": episode}
        origin = f"http://127.0.0.1:{judge.port}"
        for headers in ({}, {"X-Judge-Request": "1", "Sec-Fetch-Site": "cross-site"},
                        {"X-Judge-Request": "1", "Sec-Fetch-Site": "same-site"},
                        {"X-Judge-Request": "1", "Origin": "http://evil.example"},
                        {"X-Judge-Request": "1", "Origin": f"http://127.0.0.1:{judge.port + 1}"}):
            status, _, reply = judge.request("POST", "/api/action", body, headers=headers)
            assert status == 403 and b"refused" in reply, headers
        assert judge.state()["progress"]["decided"] == 0
        status, _, _ = judge.request("POST", "/api/action", body, headers={
            "X-Judge-Request": "1", "Sec-Fetch-Site": "same-origin", "Origin": origin})
        assert status == 200 and judge.state()["progress"]["decided"] == 1      # positive control
        status, reply = judge.act("label", "failure", episode)                 # that episode is done
        assert status == 409 and "changed" in reply["error"]


def test_videos_are_served_in_ranges_and_never_cached(campaign):
    with WebJudge(campaign, "--judge", "alice") as judge:
        video = media_url(judge)
        status, headers, whole = judge.request("GET", video)
        assert status == 200 and whole[4:8] == b"ftyp" and headers["content-type"] == "video/mp4"
        status, headers, part = judge.request("GET", video, headers={"Range": "bytes=100-199"})
        assert status == 206 and part == whole[100:200]
        assert headers["content-range"] == f"bytes 100-199/{len(whole)}"
        status, _, tail = judge.request("GET", video, headers={"Range": "bytes=-50"})
        assert status == 206 and tail == whole[-50:]
        assert judge.request("GET", video, headers={"Range": f"bytes={len(whole)}-"})[0] == 416
        for name in ("cache-control", "pragma"):
            assert headers[name] in ("no-store", "no-cache")
        assert headers["cache-control"] == "no-store"
        for name in ("last-modified", "etag", "server", "date"):
            assert name not in headers


def plant_canaries(campaign: Path) -> None:
    """What a careless server would hand on: the policy in every video's metadata and in a JPEG
    comment of every still, a note with the key in every episode's folder."""
    for video in campaign.glob("videos/*/*.mp4"):
        tag_with_policy(video)
    for still in campaign.glob("videos/*/*.start.jpg"):
        data = still.read_bytes()
        comment = b"SECRETPOLICYBRAVO"
        still.write_bytes(data[:2] + b"\xff\xfe" + (len(comment) + 2).to_bytes(2, "big") + comment + data[2:])
    for folder in campaign.glob("videos/*/"):
        (folder / "key.txt").write_text("SECRETPOLICYALPHA ran this episode\n")


def test_nothing_the_browser_receives_names_a_policy_or_a_time(campaign):
    plant_canaries(campaign)
    from orchestrator.store.sqlite import CampaignStore

    with CampaignStore.open_readonly(campaign) as store:
        campaign_row = store.campaign()
        times = [a["started_at"] for a in store.attempts()] + [campaign_row["created_at"]]
        campaign_id = campaign_row["id"]
    responses = []
    received: list[tuple[str, dict, bytes]] = []
    with WebJudge(campaign, "--judge", "alice") as judge, browser() as chrome:
        page = chrome.new_page()
        page.on("response", lambda response: responses.append(response))
        page.goto(judge.url)
        wait(page, "window.judgeMetrics.ready.length > 0")
        page.keyboard.press("a")
        wait(page, "[...document.querySelectorAll('.auditrow img')].every(i => i.complete)")
        for key in ("a", "s", "z", "u", "s"):
            before = page.evaluate("() => window.judgeMetrics.answered")
            page.keyboard.press(key)
            if key != "a":
                wait(page, f"window.judgeMetrics.answered > {before}")
        page.keyboard.press("?")                                   # every key listed: nothing sent
        page.keyboard.press("Escape")
        page.keyboard.press("j")                                   # the judge's episodes, by number
        assert page.text_content("#gotolist") == "1:u  2:s"
        page.keyboard.type("2")
        before = page.evaluate("() => window.judgeMetrics.answered")
        page.keyboard.press("Enter")
        wait(page, f"window.judgeMetrics.answered > {before}")
        assert "Episode 2 of 2" in page.inner_text("#status")
        assert page.title().startswith("Blind judging - judge alice - campaign ")
        for response in responses:
            try:
                body = response.body()
            except Exception:     # the media stack's range requests: fetched again below
                body = b""
            received.append((response.url, response.headers, body))
        for url in {u for u, _, _ in received if "/media/" in u}:
            received.append((url, {}, judge.request("GET", "/media/" + url.rsplit("/", 1)[1])[2]))
        assert any(body[4:8] == b"ftyp" for _, _, body in received)
    kinds = {re.sub(r"/media/[A-Za-z0-9_-]{24}$", "/media/TOKEN", url.split(f":{judge.port}", 1)[1].split("?")[0])
             for url, _, _ in received}
    assert kinds <= {"/", "/api/state", "/api/upcoming",
                     "/api/action", "/media/TOKEN", "/favicon.ico"}, kinds
    assert any(h.get("content-type") == "video/mp4" for _, h, _ in received)
    assert any(h.get("content-type") == "image/jpeg" for _, h, _ in received)
    everything = "\n".join(f"{url}\n{json.dumps(headers)}" for url, headers, _ in received).encode() \
        + b"".join(body for _, _, body in received)
    for term in SECRET_TERMS:
        assert term.lower().encode() not in everything.lower(), term
    for _, headers, _ in received:
        assert "last-modified" not in headers and "etag" not in headers and "date" not in headers
    # the campaign id (12 random hex digits, in the title by design) starts with 9 or more decimal
    # digits once in ~70 campaigns: it is not a time, so it is taken out before the numbers are read;
    # and a number must not run on into a word, as digits inside the media files' random tokens do
    long_number = re.compile(r"(?<![\w.])\d{6,}(?:\.\d+)?(?![\w-])")
    assert long_number.findall(json.dumps({"t": times[0]})) and not long_number.findall("4764424406ab12")
    texts = [body.decode() for _, headers, body in received
             if headers.get("content-type", "").startswith(("application/json", "text/html"))]
    assert len(texts) >= 3 and any(campaign_id in text for text in texts)
    for text in texts:                                                      # (the page holds the state)
        text = text.replace(campaign_id, "CAMPAIGN")
        numbers = [float(n) for n in long_number.findall(text)]
        assert not [n for n in numbers if n > 1e8], numbers          # no Unix times
        assert not any(str(int(t)) in text for t in times)
        assert not re.search(r"\b20\d\d-\d\d-\d\d", text)            # no dates
        assert not re.search(r'"id":\s*\d', text)                    # no store (sequential) ids
        assert not re.search(r"/(home|tmp|work|root)/", text)       # no paths


SERVE_QUIT = "/api/quit"


def opened_under(trace: Path, root: Path) -> set[Path]:
    found = set()
    for line in trace.read_text(errors="replace").splitlines():
        match = re.search(r'open(?:at)?\((?:[^,]+, )?"([^"]+)"', line)
        if match and "ENOENT" not in line:
            path = Path(match.group(1))
            if str(path).startswith(str(root)):
                found.add(path)
    return found


def test_the_server_opens_no_file_outside_the_blinded_view(campaign, tmp_path):
    strace = require_program("strace", "apt-get install -y strace (.ci/run installs it)")
    plant_canaries(campaign)
    (campaign.parent / "protocol.yaml").touch()               # beside the campaign, naming the policies
    canaries = sorted(campaign.glob("videos/*/key.txt")) + [campaign.parent / "protocol.yaml"]
    control = tmp_path / "control.trace"                      # the tracer sees an open (positive control)
    subprocess.run([strace, "-f", "-qq", "-e", "trace=open,openat", "-o", str(control), sys.executable, "-c",
                    f"open({str(canaries[0])!r}).read()"], check=True, timeout=60)
    assert canaries[0] in opened_under(control, campaign.parent)
    trace = tmp_path / "server.trace"
    judge = WebJudge(campaign, "--judge", "auditor",
                     prefix=[strace, "-f", "-qq", "-e", "trace=open,openat", "-o", str(trace)])
    try:
        for _ in range(3):
            state = judge.state()
            if state["episode"] is None:
                break
            for camera in state["episode"]["cameras"]:
                for url in (camera["video"], camera["still"]):
                    if url:
                        assert judge.request("GET", url)[0] == 200
            judge.request("GET", "/api/upcoming")
            judge.act("label", "success", state["episode"]["id"])
        judge.request("POST", SERVE_QUIT, {}, headers={"X-Judge-Request": "1"})
        judge.proc.wait(timeout=30)
    finally:
        code, _, err = judge.stop()
    assert code == 0, err
    opened = opened_under(trace, campaign.parent)
    assert any(p.suffix == ".mp4" for p in opened) and any(p.name.endswith(".start.jpg") for p in opened)
    assert not set(canaries) & opened
    view = {"campaign.db", "campaign.db-wal", "campaign.db-shm", "campaign.db-journal"}
    # (SQLite opens the campaign folder itself, to make its journal durable; no other folder
    # is opened, so none is listed)
    outside = [p for p in opened if p != campaign and p.name not in view
               and not re.fullmatch(r"(front|wrist)\.mp4|front\.start\.jpg|cameras\.json|timeseries\.\w+", p.name)]
    assert outside == []


def test_the_web_judge_cannot_reach_the_key():
    """Importing the browser judge loads none of the modules that can read the key: it gets a
    `JudgeSource` and nothing else (commands/judge.py opens it)."""
    code = ("import sys, orchestrator.judging.web.serve, orchestrator.judging.web.app\n"
            "bad = [m for m in ('orchestrator.store.sqlite', 'orchestrator.judging.blinding', "
            "'orchestrator.judging.bundle', 'orchestrator.design.schedule', 'orchestrator.design.protocol', "
            "'sqlite3', 'psycopg') if m in sys.modules]\n"
            "print(bad, 'orchestrator.judging.session' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[] True"
