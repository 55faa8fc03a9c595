"""Campaigns on the rehearsal twin, through the CLI.

A tiny ACT checkpoint saved by another process is policy B, the scripted pick is A; the real
LeRobot stack (SOFollower, FeetechMotorsBus, scservo_sdk, the `twin` camera type) drives the
twin's simulated SO-101 over a pseudo-terminal; `--unattended` lets the twin place the cube.
The unattended campaign runs in this process (LeRobot's policies imported once; a fresh
interpreter pays 7-10 s for them: 49 -> 34 s measured at load 10); the README's lines in fresh
processes (its interactive `run` in a real terminal), as test_rtc.py's campaign.
"""

from __future__ import annotations

import json
import shlex
import shutil
import sqlite3
import sys
import time

import pytest

from support.campaign_files import SHIPPED_TWIN_RIG, env, twin_rig, two_mark_protocol
from support.cli import run_main, run_module
from support.repo import REPO
from support.tmux import Tmux


@pytest.fixture(scope="module")
def twin_protocol(tmp_path_factory, saved_acts):
    folder = tmp_path_factory.mktemp("twin_act")
    shutil.copytree(saved_acts["twin"], folder / "act_b")   # saved by another interpreter (conftest)
    twin_rig(folder)
    protocol = two_mark_protocol(folder, "{type: lerobot, path: ./act_b}", duration_s=8, fps=30)
    # one mark (M01, 7.5 cm right of centre: a wrong pan sign or scale misses it), so two trials
    # of 8 s: the scripted pick needs ~7 s to lift and hold through the real stack
    layout = folder / "layout2.yaml"
    layout.write_text("\n".join(l for l in layout.read_text().splitlines() if "id: M02" not in l) + "\n")
    # the rater counted with a pre-registered audit of one trial in two (the audit's queue on the twin)
    judging = "judging: {judges: 1, "
    assert protocol.read_text().count(judging) == 1
    protocol.write_text(protocol.read_text().replace(judging, "judging: {judges: 1, auto: counted, audit: 0.5, "))
    return protocol


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_unattended_twin_campaign_scripted_vs_saved_act(twin_protocol, tmp_path, cli):
    out = tmp_path / "campaign"
    result = cli("run", twin_protocol, "--rig", twin_protocol.parent / "so101_twin.yaml", "--twin", "--unattended",
                 "--out", out)
    assert result.code == 0, result.err[-3000:]
    assert "2/2 trials done, 0 aborted" in result.out, result.out + result.err[-3000:]
    # what reads its store (report, bundle) in this process too: their fresh-process paths are
    # tested on every rig by their own files
    report = cli("report", out, "--format", "json")
    assert report.code == 0, report.err
    data = json.loads(report.out)
    assert data["campaign"]["complete"] is True and data["campaign"]["trials"] == 2
    assert data["campaign"]["simulated"] is True
    episodes = data["labels"]["episodes"] if "episodes" in data.get("labels", {}) else None
    assert {p: data["policies"][p]["trials"] for p in ("A", "B")} == {"A": 1, "B": 1}
    assert data["policies"]["A"]["unjudged"] == 0 and data["policies"]["B"]["unjudged"] == 0
    # the scripted pick succeeds through calibration, degrees and the bus; the random ACT does not
    assert data["policies"]["A"]["successes"] == 1, data["policies"]
    assert data["policies"]["B"]["successes"] == 0, data["policies"]
    del episodes
    # every step recorded each camera frame's age and repeats; the report summarises them per policy
    for label in ("A", "B"):
        loop = data["timing"][label]
        assert 0 <= loop["frame_age_p50_ms"] <= loop["frame_age_p95_ms"] < 500, loop
        assert 0 <= loop["frame_repeat_fraction"] < 1, loop
    text = cli("report", out)
    assert "camera frame age p50" in text.out, text.out
    # judging works unchanged: a blinded bundle of the twin campaign
    # ...of only the episodes the rater was unsure of and the audited one (the store read with sqlite3)
    with sqlite3.connect(out / "campaign.db") as conn:
        slots = dict(conn.execute("SELECT id, slot FROM episodes").fetchall())
        audited = {slot for (slot,) in conn.execute("SELECT slot FROM audit")}
        sure = {e for (e,) in conn.execute("SELECT episode_id FROM judgments WHERE judge = 'auto' AND retracted_at"
                                            " IS NULL AND label IN ('success', 'failure')")}
    conn.close()
    queue = {e for e, slot in slots.items() if slot in audited or e not in sure}
    assert len(slots) == 2 and len(audited) == 1 and 1 <= len(queue) <= 2, (slots, audited, sure)   # count guard
    bundle = cli("bundle", out, "--out", tmp_path / "bundle")
    assert bundle.code == 0, bundle.err
    assert f"{len(queue)} episode{'s' if len(queue) > 1 else ''}, {2 * len(queue)} videos" in bundle.out, bundle.out
    manifest = json.loads((tmp_path / "bundle" / "manifest.json").read_text())
    assert {e["id"] for e in manifest["episodes"]} == queue


def readme_rehearsal_block() -> list[str]:
    """The command lines of the README's twin rehearsal block (the one that uses what ships)."""
    text = (REPO / "README.md").read_text()
    start = text.index("Try it with what ships")
    block = text[text.index("```bash\n", start) + len("```bash\n"):text.index("```\n", text.index("```bash\n", start) + 8)]
    return [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]


def test_the_readmes_rehearsal_block_runs_as_written_to_the_first_prompt(tmp_path, monkeypatch, capsys):
    """The README's twin rehearsal, in a folder holding only what a fresh clone ships: the first
    line makes the tiny checkpoint (no download; its module's `main` in this process, in that
    folder: a fresh interpreter would import torch and LeRobot's policies again, 7-10 s, for
    nothing the line's own code does not do here), `doctor --twin` on the shipped protocol and
    profile passes (in this process as well) and states B's step time against the period; the run lines name shipped
    files and parse; the interactive run line, in tmux, reaches its first prompt ("press Enter")
    and `q` ends it. Every line that needs LeRobot runs it with the extra."""
    lines = readme_rehearsal_block()
    assert len(lines) == 5, lines
    assert all(line.startswith("uv run --extra lerobot ") for line in lines[:4]), lines
    assert lines[4].startswith("uv run orchestrator report ")
    for folder in ("protocols", "layouts", "hardware"):
        shutil.copytree(REPO / folder, tmp_path / folder)
    argv = [shlex.split(line.removeprefix("uv run --extra lerobot ").removeprefix("uv run ")) for line in lines]
    assert argv[0][:3] == ["python", "-m", "orchestrator.policies.tiny_act"]
    from orchestrator.policies import tiny_act

    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    code = tiny_act.main(argv[0][3:])
    made = capsys.readouterr()
    monkeypatch.undo()
    assert code == 0, made.err[-3000:]
    assert "tiny random ACT saved in checkpoints/tiny_act (cameras front 320x240, wrist 320x240" in made.out
    assert (tmp_path / "checkpoints" / "tiny_act" / "config.json").is_file()
    assert argv[1][0] == "orchestrator"
    # doctor in this process too: LeRobot's policies are imported here already (the line above), a
    # fresh interpreter imports them again (7-10 s of CPU idle, 28 s of 49 at load 21); doctor's
    # fresh-process path with a saved checkpoint is test_lerobot_cli_fresh's, `--twin`'s
    # test_doctor_faults'. One torch thread, as env() gives the fresh processes.
    import torch

    threads = torch.get_num_threads()
    monkeypatch.chdir(tmp_path)
    torch.set_num_threads(1)
    try:
        doctor = run_main(capsys, *argv[1][1:])
    finally:
        torch.set_num_threads(threads)
        monkeypatch.undo()
    assert doctor.code == 0, doctor.err[-3000:]
    assert "policy B: ../checkpoints/tiny_act loads (act on cpu, cameras front, wrist, 6 actions)" in doctor.out
    assert "calibration" in doctor.out and "ready:" in doctor.out
    step = [line for line in doctor.out.splitlines() if "policy B:" in line and "step time" in line]
    assert len(step) == 1 and "over 8 steps, against the protocol's 33.3 ms period (30 Hz)" in step[0], doctor.out
    from orchestrator.cli import build_parser

    parser = build_parser()
    for run in argv[2:4]:
        args = parser.parse_args(run[1:])
        assert args.verb == "run" and args.twin and (tmp_path / args.protocol).is_file() and (tmp_path / args.rig).is_file()
    assert [a.unattended for a in (parser.parse_args(argv[2][1:]), parser.parse_args(argv[3][1:]))] == [False, True]
    # the interactive line, in a real terminal, reaches its first prompt with the arm still; q ends it
    variables = {k: v for k, v in env().items() if k in ("MUJOCO_GL", "HF_HUB_OFFLINE", "OMP_NUM_THREADS", "PATH")}
    tmux = Tmux()
    try:
        tmux.start("op", shlex.join([sys.executable, "-m", *argv[2]]), tmp_path, variables)
        deadline = time.monotonic() + 240
        while not ("press Enter" in (screen := tmux.screen("op")) or "EXIT=" in screen):
            assert time.monotonic() < deadline, f"no first prompt in 240 s:\n{screen}"
            time.sleep(0.2)
        assert "EXIT=" not in screen, screen   # the run ended before its first prompt
        screen = tmux.wait_for("op", "Put the cube on mark M", timeout=30)   # the cue's panel, painted after
        assert "Traceback" not in screen, screen
        tmux("send-keys", "-t", "op", "q")
        screen = tmux.wait_for("op", "EXIT=", timeout=120)
        assert "Traceback" not in screen, screen
        # stopped with every trial left: exit 3 (resumable) and the command that resumes it
        assert "EXIT=3" in screen and "next: resume it with: orchestrator run " in " ".join(screen.split()), screen
    finally:
        tmux.kill()


@pytest.mark.off_clock
def test_unattended_needs_the_twin(twin_protocol, tmp_path):
    result = run_module("run", twin_protocol, "--rig", SHIPPED_TWIN_RIG, "--unattended", "--out", tmp_path / "c",
                        env=env())
    assert result.code == 2
    assert result.err.strip().splitlines()[-1].startswith("orchestrator: --unattended is only for --twin")
    assert not (tmp_path / "c").exists()
