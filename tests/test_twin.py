"""The rehearsal twin at the wire: Feetech packets, LeRobot's bus on the pseudo-terminal, the
servos' physics (calibration, torque off), and the process's lifetime."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from orchestrator.core.pids import process_running
from orchestrator.rigs.twin import feetech
from support.campaign_files import servo_rig
from support.repo import REPO
from support.twin_time import wait_physics

SHIPPED_TWIN_RIG = REPO / "hardware" / "so101_twin.yaml"


# ------------------------------------------------------------------ packets (no process)

def test_status_packet_checksum_is_the_feetech_one():
    # PING reply of servo 1 from the Feetech manual's example: FF FF 01 02 00 FC
    assert feetech.status_packet(1, []) == bytes([0xFF, 0xFF, 0x01, 0x02, 0x00, 0xFC])
    # READ of Present_Position (addr 56, 2 bytes) from servo 1: FF FF 01 04 02 38 02 BE
    assert feetech.instruction_packet(1, feetech.INST_READ, [56, 2]) == bytes(
        [0xFF, 0xFF, 0x01, 0x04, 0x02, 0x38, 0x02, 0xBE])


def test_chain_answers_reads_writes_and_sync_reads_and_drops_bad_packets():
    writes = []
    chain = feetech.ServoChain(range(1, 4), written=lambda i, a, n: writes.append((i, a, n)))
    chain.servos[2].put("Present_Position", 3000)
    reply = chain.handle(feetech.instruction_packet(2, feetech.INST_READ, [56, 2]))
    assert reply == feetech.status_packet(2, list((3000).to_bytes(2, "little")))
    sync = feetech.instruction_packet(0xFE, feetech.INST_SYNC_WRITE, [42, 2, 1, 0x10, 0x01, 3, 0x20, 0x02])
    assert chain.handle(sync) == b"" and writes == [(1, 42, 2), (3, 42, 2)]
    assert chain.servos[3].get("Goal_Position") == 0x0220
    buf = bytearray(feetech.instruction_packet(0xFE, feetech.INST_SYNC_READ, [42, 2, 1, 3]))
    packets = feetech.split_packets(buf)
    replies = chain.handle(packets[0])
    assert feetech.split_packets(bytearray(replies)) == [
        feetech.status_packet(1, [0x10, 0x01]), feetech.status_packet(3, [0x20, 0x02])]
    bad = bytearray(feetech.instruction_packet(1, feetech.INST_PING))
    bad[-1] ^= 1
    assert chain.handle(bytes(bad)) == b""
    chain.servos[1].mute = True
    assert chain.handle(feetech.instruction_packet(1, feetech.INST_PING)) == b""
    # 1 Mbaud, 10 bits a byte
    assert feetech.wire_time_s(100) == pytest.approx(1e-3)


# ------------------------------------------------------------------ LeRobot on the twin



@pytest.fixture
def twin_rig():
    from orchestrator.rigs.factory import make_rig
    from orchestrator.rigs.profile import load_rig
    from orchestrator.rigs.twin.client import start_twin

    twin = start_twin(load_rig(SHIPPED_TWIN_RIG))
    rig = make_rig(twin.rig)
    try:
        yield twin, rig
    finally:
        rig.disconnect()
        twin.close()


def _move(twin, rig, target: dict[str, float], seconds: float, fps: int = 30) -> None:
    """`rig.act(target)` once every 1/fps of the twin's physics, for `seconds` of it."""
    for _ in range(round(seconds * fps)):
        rig.act(target)
        wait_physics(twin, 1.0 / fps)


def test_lerobot_reads_calibrated_degrees_and_torque_off_lets_the_arm_sag(twin_rig):
    twin, rig = twin_rig
    assert twin.port.startswith("/dev/pts/") and rig.robot.bus.port == twin.port
    rig.connect()   # LeRobot's SOFollower: handshake, calibration check, configure, torque on
    wait_physics(twin, 1.5)  # the arm, released at power-on, settles on its servos
    before = twin.request("state")
    obs = rig.observe()
    state = twin.request("state")
    assert np.allclose(before["joints_deg"], state["joints_deg"], atol=0.2), "the arm is still moving"
    assert state["torque"] == [True] * 6
    joints = [obs[f"{j}.pos"] for j in ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll")]
    # LeRobot's degrees (ticks -> calibrated degrees) are the simulated joints' degrees
    assert np.allclose(joints, state["joints_deg"][:5], atol=0.2), (joints, state["joints_deg"])
    assert obs["front"].shape == (240, 320, 3) and obs["front"].dtype == np.uint8 and obs["front"].std() > 5
    # raise the upper arm to horizontal, hold, then torque off (LeRobot's disconnect)
    raised = {**{k: v for k, v in obs.items() if k.endswith(".pos")}, "shoulder_lift.pos": -20.0,
              "elbow_flex.pos": 0.0, "wrist_flex.pos": 0.0}
    _move(twin, rig, raised, 4.0)
    held = twin.request("state")["joints_deg"]
    assert abs(held[1] - -20.0) < 4 and abs(held[2]) < 4, held
    rig.robot.bus.disable_torque()
    wait_physics(twin, 1.5)
    sagged = twin.request("state")
    assert sagged["torque"] == [False] * 6
    # released, the raised arm falls forward onto the table under gravity (it held with torque on)
    assert sagged["joints_deg"][1] > held[1] + 15, (held, sagged["joints_deg"])


def test_twin_and_its_camera_process_go_when_the_orchestrator_is_sigkilled(tmp_path):
    code = ("import sys, time, json; from orchestrator.rigs.profile import load_rig; "
            "from orchestrator.rigs.twin.client import start_twin; t = start_twin(load_rig(sys.argv[1])); "
            "print(json.dumps([t.proc.pid, t.port, str(t.frames_dir)]), flush=True); time.sleep(600)")   # the child: alive until the test kills it
    proc = subprocess.Popen([sys.executable, "-c", code, str(SHIPPED_TWIN_RIG)], stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")})
    import json

    twin_pid, port, frames = json.loads(proc.stdout.readline())
    children = subprocess.run(["pgrep", "-P", str(twin_pid)], capture_output=True, text=True).stdout.split()
    assert children, "the twin has no camera process"
    assert process_running(twin_pid) and os.path.exists(port) and os.path.isdir(frames)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (process_running(twin_pid) or any(process_running(int(c)) for c in children)):
        time.sleep(0.1)
    assert not process_running(twin_pid), "the twin outlived the orchestrator"
    assert not any(process_running(int(c)) for c in children), "the twin's camera process outlived it"
    assert not os.path.exists(frames)


def test_the_next_twin_removes_the_folders_a_killed_twin_left(tmp_path):
    """A twin killed outright (SIGKILL) cannot remove its frame files in /dev/shm nor its
    calibration folder; the next start of a twin does (their owner pid is no longer running),
    and leaves a running twin's folders alone. (Twins without cameras: the folders are the
    client's, made with or without a render process; three twin starts without one.)"""
    from orchestrator.rigs.profile import load_rig
    from orchestrator.rigs.twin.client import start_twin

    loaded = load_rig(servo_rig(tmp_path))
    with start_twin(loaded) as running:
        killed = start_twin(loaded)
        left = [killed.frames_dir, killed.home]
        os.kill(killed.proc.pid, signal.SIGKILL)
        killed.proc.wait()
        assert all(folder.is_dir() for folder in left)
        with start_twin(loaded):
            assert not any(folder.exists() for folder in left)
            assert running.frames_dir.is_dir() and running.home.is_dir()
            assert running.request("state")["ok"]
        killed.close()
