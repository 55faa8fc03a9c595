"""SIGTERM sent by another process to `orchestrator run` at a real-arm profile.

The twin is started by the test (so it outlives the orchestrator and can be read after it);
`orchestrator run` drives it through LeRobot's real stack in a fresh process. During an episode
the test sends SIGTERM, as a service manager or `kill` would, then reads the twin's registers:
torque off on every servo, and not one more packet on the wire once the process is gone. The
stop may have been an emergency stop: it counts against the policy that ran (`operator_unanswered`,
the default rule), and the next `run` asks why before anything is connected or moved. The twin
has no cameras (`servo_rig`): what is asserted is the bus's, the exit and the store; without
them each run counts no camera's frames and no render process competes (84.7 s -> 62.2 s for
the two tests at load 9).
"""

from __future__ import annotations

import os
import queue
import shlex
import signal
import subprocess
import sys
import time

import pytest
import yaml

from orchestrator.rigs.profile import load_rig
from orchestrator.store.sqlite import CampaignStore
from support.campaign_files import env, servo_rig, two_mark_protocol
from support.operator_run import start_run, wait_for_line
from support.repo import REPO
from support.tmux import Tmux
from support.twin_time import wait_physics


def _start_run(protocol, rig, out, *extra) -> tuple[subprocess.Popen, queue.Queue]:
    return start_run(protocol, rig, out, *extra, env=env())


_wait_for = wait_for_line


def _console_episode(tmux: Tmux, protocol, rig, out, twin, answer: str | None = None) -> None:
    """`orchestrator run` under the operator console in a 110x32 tmux terminal, the first trial
    started with Enter, half a second into its episode. The pane prints EXIT=<code> when it ends.
    With `answer`: the session first asks why the last stop was made; the twin's wire is quiet
    while it asks (nothing connected, nothing moved), then `answer` is typed."""
    command = shlex.join([sys.executable, "-m", "orchestrator", "run", str(protocol), "--rig", str(rig),
                          "--out", str(out)])
    tmux.start("op", command, REPO, {k: v for k, v in env().items()
                                     if k in ("MUJOCO_GL", "HF_HUB_OFFLINE", "OMP_NUM_THREADS", "PATH")})
    if answer is not None:
        tmux.wait_for("op", "BEFORE ANYTHING MOVES", timeout=180)
        _twin_is_safe_and_quiet(twin)
        tmux("send-keys", "-t", "op", "-l", answer)
        tmux("send-keys", "-t", "op", "Enter")
    for _ in range(3):
        # a resumed session starts where the arm sagged with torque off (on the table, on the cube):
        # its first move to rest may stop as "blocked" and hold; the operator confirms, it tries again
        screen = _wait_for_either(tmux, "press Enter", "ARM STOPPED (holding)", timeout=180)
        if "press Enter" in screen:
            break
        tmux("send-keys", "-t", "op", "Enter")
        _wait_until_gone(tmux, "ARM STOPPED (holding)", timeout=30)   # a busy console repaints late
    else:
        raise AssertionError(f"the move to rest stopped three times:\n{screen}")
    tmux("send-keys", "-t", "op", "Enter")
    tmux.wait_for("op", "EPISODE RUNNING", timeout=60)
    wait_physics(twin, 0.5)   # inside the episode: the policy is moving the arm


def _wait_until_gone(tmux: Tmux, text: str, timeout: float) -> None:
    """Until `text` is off the screen: the console took the key (or `timeout` passed)."""
    deadline = time.monotonic() + timeout
    while text in tmux.screen("op") and time.monotonic() < deadline:
        time.sleep(0.2)


def _wait_for_either(tmux: Tmux, first: str, second: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        screen = tmux.screen("op")
        if first in screen or second in screen:
            return screen
        if "EXIT=" in screen:   # the run ended instead: say how (the pane closes 60 s later)
            raise AssertionError(f"the run ended before {first!r} or {second!r}:\n{screen}")
        time.sleep(0.2)
    raise AssertionError(f"neither {first!r} nor {second!r} appeared on the screen:\n{screen}")


def _twin_is_safe_and_quiet(twin) -> None:
    """Torque_Enable 0 on all six servos, and not one packet on the wire for half a second of the
    twin's time."""
    state = twin.request("state")
    assert state["torque"] == [False] * 6
    wait_physics(twin, 0.5)
    assert twin.request("state")["packets"] == state["packets"]


@pytest.mark.slow
def test_sigterm_from_another_process_leaves_torque_off_and_the_wire_quiet_then_run_resumes(tmp_path):
    """Both ways an operator runs a real arm: plain terminal prompts (`--no-console`, stdin is a
    pipe), then the resumed campaign under the operator console in a real terminal (tmux)."""
    from orchestrator.rigs.twin.client import start_twin

    protocol = two_mark_protocol(tmp_path, "{type: scripted, aim_noise_mm: 3}", duration_s=2.0, fps=15)
    out = tmp_path / "campaign"
    tmux = Tmux()
    with start_twin(load_rig(servo_rig(tmp_path))) as twin:
        rig = tmp_path / "attached.yaml"  # the profile as --twin swaps it: the twin's port and cameras
        rig.write_text(yaml.safe_dump(twin.rig.profile.model_dump(mode="json", exclude_none=True)))

        # 1. --no-console: SIGTERM during the first episode
        proc, lines = _start_run(protocol, rig, out)
        try:
            _wait_for(lines, "EPISODE RUNNING", timeout_s=180)
            wait_physics(twin, 0.5)  # inside the episode: the policy is moving the arm
            assert twin.request("state")["torque"] == [True] * 6
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
        err = proc.stderr.read()
        assert code == 130, err[-2000:]
        assert "Traceback" not in err
        assert err.strip().splitlines()[-1].startswith("orchestrator: interrupted: arm made safe")
        assert "the next run asks why it was stopped" in err.strip().splitlines()[-1]
        _twin_is_safe_and_quiet(twin)
        with CampaignStore.open_readonly(out) as store:
            attempts = store.attempts()
            assert [a["status"] for a in attempts] == ["aborted"]
            assert store.sessions()[-1]["outcome"].startswith("interrupted")
            # SIGTERM may have been an emergency stop: counted against the policy (the default rule)
            assert (attempts[0]["abort_class"], attempts[0]["settles"]) == ("operator_unanswered", "failure")
        # The operator takes the cube from under the sagged arm before resuming (else the first
        # move to rest can stop on it twice and offer hand-guiding, tests/test_twin_hand_guide.py).
        twin.request("place", mark={"id": "aside", "x": 0.75, "y": 0.6, "yaw_deg": 0.0})

        # 2. the operator console resumes: it asks why first, then the next trial; SIGTERM during its episode
        try:
            _console_episode(tmux, protocol, rig, out, twin, answer="1 it swung at the camera")
            with CampaignStore.open_readonly(out) as store:
                (running,) = [s for s in store.sessions() if s["ended_at"] is None]
            os.kill(running["pid"], signal.SIGTERM)
            screen = tmux.wait_for("op", "EXIT=", timeout=60)
        finally:
            tmux.kill()
        assert "EXIT=130" in screen and "Traceback" not in screen, screen
        assert "orchestrator: interrupted: arm made safe" in screen
        _twin_is_safe_and_quiet(twin)
    with CampaignStore.open_readonly(out) as store:
        attempts = store.attempts()
        assert [(a["status"], a["abort_class"]) for a in attempts] == [("aborted", "operator_unanswered")] * 2
        assert [a["operator_answer"] for a in attempts] == ["unsafe motion: it swung at the camera", None]
        assert len({a["slot"] for a in attempts}) == 2                      # the stopped trial is not re-run
        assert [s["outcome"][:11] for s in store.sessions()] == ["interrupted"] * 2


@pytest.mark.slow
def test_closing_the_terminal_while_the_arm_is_held_ends_the_process_with_torque_off(tmp_path):
    """The operator's terminal goes away (tmux kill-server: SIGHUP, then a dead pty) while the arm
    holds after a stop. The runner made the arm safe, then Textual's shutdown blocked writing to
    the dead terminal and the process lived on, holding the campaign (seen by a helper; measured:
    alive after 10 s, torque off, wire quiet). Now it exits within the console's grace period and
    the next run resumes with the stopped trial."""
    from orchestrator.rigs.twin.client import start_twin
    from orchestrator.run.console.wedge import GRACE_S

    protocol = two_mark_protocol(tmp_path, "{type: scripted, aim_noise_mm: 3}", duration_s=4.0, fps=15)
    out = tmp_path / "campaign"
    tmux = Tmux()
    with start_twin(load_rig(servo_rig(tmp_path))) as twin:
        rig = tmp_path / "attached.yaml"
        rig.write_text(yaml.safe_dump(twin.rig.profile.model_dump(mode="json", exclude_none=True)))
        pid = None
        try:
            _console_episode(tmux, protocol, rig, out, twin)
            tmux("send-keys", "-t", "op", "Space")          # stop: the arm holds, torque on
            tmux.wait_for("op", "Why?", timeout=30)          # it asks why: the prompt phase
            assert twin.request("state")["torque"] == [True] * 6
            with CampaignStore.open_readonly(out) as store:
                (running,) = [s for s in store.sessions() if s["ended_at"] is None]
            pid = running["pid"]
        finally:
            tmux.kill()                                    # the terminal goes away
        deadline = time.monotonic() + GRACE_S + 20
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.2)
        alive = _alive(pid)
        if alive:
            os.kill(pid, signal.SIGKILL)
        assert not alive, f"orchestrator run (pid {pid}) still alive {GRACE_S + 20:.0f} s after its terminal closed"
        _twin_is_safe_and_quiet(twin)
        # the next run is not refused as a second runner; it asks why the stop was made, first
        proc, lines = start_run(protocol, rig, out, env=env(), enters=0)
        try:
            try:
                _wait_for(lines, "BEFORE ANYTHING MOVES", timeout_s=180)
            except AssertionError:
                proc.kill()
                raise AssertionError(proc.stderr.read()[-3000:]) from None
            proc.stdin.write("3 my terminal closed\n" + "\n" * 10)
            proc.stdin.flush()
            _wait_for(lines, "EPISODE RUNNING", timeout_s=180)
        finally:
            proc.kill()
            proc.wait(timeout=30)
    with CampaignStore.open_readonly(out) as store:
        first = store.attempts()[0]
    assert (first["status"], first["abort_class"], first["abort_cause"]) == (
        "aborted", "operator_unanswered", "emergency stop")           # the stop key, the question cut short
    assert first["operator_answer"] == "other: my terminal closed"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:   # a zombie (exited, not reaped by tmux's dead shell) is gone
        return stat.read().split(") ")[-1][0] != "Z"
