"""Security of the evidence.

* A judge cannot learn the key from anything the judge path opens: a judging session runs in a
  subprocess under a Python audit hook that records every file opened; each opened file
  (outside the Python installation) is then searched for the key's strings. For a bundle no
  opened file may hold them; for a campaign the only such file is campaign.db, which the judge
  reads through a sealed connection (test_blinding.py proves SQLite refuses the key columns).
* Hugging Face tokens in the environment never reach the campaign store or its files.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from orchestrator.judging.bundle import write_bundle
from support.judge_campaign import SECRET_TERMS, make_campaign
from support.requires import require_program

ROOT = Path(__file__).resolve().parents[1]

SESSION = r"""
import asyncio, json, sys
opened = []
def hook(event, args):
    if event == "open" and isinstance(args[0], (str, bytes)):
        opened.append(args[0] if isinstance(args[0], str) else args[0].decode(errors="replace"))
    elif event == "sqlite3.connect":
        opened.append(str(args[0]))
sys.addaudithook(hook)
from pathlib import Path
from orchestrator.judging.tui.app import JudgeApp
kind, target = sys.argv[1], Path(sys.argv[2])
if kind == "bundle":
    from orchestrator.judging.bundle import BundleSource
    source = BundleSource(target, "auditor")
else:
    from orchestrator.judging.blinding import CampaignSource
    source = CampaignSource(target, "auditor")
app = JudgeApp(source, renderer="halfcell", autoplay=False)
async def session():
    async with app.run_test(size=(110, 34)) as pilot:
        await pilot.press("s", "f", "1", "right", "right", "e", "u", "z", "s", "c", "s", "q")
asyncio.run(session())
print(json.dumps(opened))
"""

PYTHON_DIRS = tuple({sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
                    | {sys.prefix, sys.base_prefix})


def _opened_files(kind: str, target: Path, trace: Path) -> list[Path]:
    """Every file the judging session opened: Python's audit events plus the kernel's view
    (strace), since the video decoder (FFmpeg inside PyAV) opens files in C."""
    require_program("strace", "apt-get install -y strace (.ci/run installs it)")
    result = subprocess.run(["strace", "-f", "-qq", "-e", "trace=open,openat", "-o", str(trace),
                             sys.executable, "-c", SESSION, kind, str(target)], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    paths = {Path(p) for p in json.loads(result.stdout.strip().splitlines()[-1])}
    for line in trace.read_text(errors="replace").splitlines():
        match = re.search(r'open(?:at)?\((?:[^,]+, )?"([^"]+)"', line)
        if match and "ENOENT" not in line:
            paths.add(Path(match.group(1)))
    return sorted(p for p in paths
                  if p.is_file() and not str(p).startswith(("/dev", "/proc", "/sys", *PYTHON_DIRS))
                  and not str(p).startswith(str(ROOT / "orchestrator")))


def _leaks(path: Path) -> list[str]:
    data = path.read_bytes()
    return [term for term in SECRET_TERMS if term.encode() in data or term.lower().encode() in data]


@pytest.fixture(scope="module")
def campaign(tmp_path_factory) -> Path:
    return make_campaign(tmp_path_factory.mktemp("audit"))


@pytest.mark.subprocess
def test_every_file_a_bundle_judge_opens_is_free_of_the_key(campaign, tmp_path):
    bundle = tmp_path / "bundle"
    write_bundle(campaign, bundle)
    opened = _opened_files("bundle", bundle, tmp_path / "trace")
    assert any(p.suffix == ".mp4" for p in opened), opened   # the audit saw the videos
    assert any(p.name == "manifest.json" for p in opened)
    assert not any(p.name.startswith("campaign.db") for p in opened)
    leaks = {str(p): _leaks(p) for p in opened if _leaks(p)}
    assert leaks == {}


@pytest.mark.subprocess
def test_campaign_judge_opens_nothing_with_the_key_but_the_sealed_store(campaign, tmp_path):
    copy = tmp_path / "c"
    shutil.copytree(campaign, copy)
    opened = _opened_files("campaign", copy, tmp_path / "trace")
    assert any(p.suffix == ".mp4" for p in opened), opened
    leaks = {str(p): _leaks(p) for p in opened if _leaks(p)}
    assert set(Path(p).name for p in leaks) <= {"campaign.db", "campaign.db-wal"}, leaks


def test_hf_token_never_reaches_the_campaign(tmp_path, monkeypatch):
    from orchestrator.cli import main

    token = "hf_SECRETTOKENabcdefghijklmnopqrstuvwxyz"
    monkeypatch.setenv("HF_TOKEN", token)
    monkeypatch.setenv("HUGGING_FACE_HUB_TOKEN", token)
    out = tmp_path / "c"
    assert main(["run", str(ROOT / "tests/data/tiny_protocol.yaml"), "--rig",
                 str(ROOT / "tests/data/tiny_sim.yaml"), "--out", str(out), "--workers", "1",
                 "--stop-after", "2"]) == 0
    assert main(["report", str(out), "--format", "html", "--out", str(tmp_path / "r.html")]) == 0

    def holding_token() -> list[str]:
        files = [p for p in [*out.rglob("*"), tmp_path / "r.html"] if p.is_file()]
        assert len(files) >= 6   # count guard: the store, the report, 2 episodes' videos and series
        return [p.name for p in files if token.encode() in p.read_bytes()]

    assert holding_token() == []
    # Positive control: text that does reach the store is found in its raw bytes by the same scan
    # (SQLite stores it uncompressed), so a token written anywhere in the campaign would be seen.
    from orchestrator.store.sqlite import CampaignStore

    with CampaignStore.open_for_labels(out) as store:
        episode = store.episodes()[0]["id"]
        store.add_judgment(episode, "alice", "success", note=f"pasted by mistake: {token}")
    assert [name for name in holding_token() if name.startswith("campaign.db")]
