"""The twin's wire log: one JSON line per packet the bus saw, fault lines,
and an exit line written however the twin ends, also after the orchestrator was SIGKILLed;
and the `servo_reset` fault (a servo restarting as after a brown-out), read through LeRobot."""

from __future__ import annotations

import signal
import time

import pytest

from orchestrator.rigs.twin import feetech
from orchestrator.rigs.twin.wire_log import instruction_lines, status_lines
from support.repo import REPO
from support.wirelog import WireLog, wait_for_exit

SHIPPED_TWIN_RIG = REPO / "hardware" / "so101_twin.yaml"
KEYS = {"t", "dir", "id", "inst", "addr", "len", "data", "error"}


# ------------------------------------------------------------------ lines (no process)

@pytest.mark.off_clock
def test_a_sync_write_is_one_line_per_servo_and_a_status_packet_names_its_instruction():
    sync = feetech.instruction_packet(0xFE, feetech.INST_SYNC_WRITE, [42, 2, 1, 0x10, 0x01, 3, 0x20, 0x82])
    lines = instruction_lines(sync, 5.0)
    assert [set(line) for line in lines] == [KEYS, KEYS]
    assert [(l["id"], l["inst"], l["addr"], l["len"], l["data"], l["dir"]) for l in lines] == [
        (1, "SYNC_WRITE", 42, 2, [0x10, 0x01], "in"), (3, "SYNC_WRITE", 42, 2, [0x20, 0x82], "in")]
    read = feetech.instruction_packet(2, feetech.INST_READ, [56, 2])
    assert instruction_lines(read, 1.0) == [{"t": 1.0, "dir": "in", "id": 2, "inst": "READ", "addr": 56, "len": 2,
                                            "data": [], "error": 0}]
    reply = feetech.status_packet(2, [0xB8, 0x0B], error=32)
    assert status_lines(reply, read, 2.0) == [{"t": 2.0, "dir": "out", "id": 2, "inst": "READ", "addr": 56,
                                               "len": 2, "data": [0xB8, 0x0B], "error": 32}]
    sync_read = feetech.instruction_packet(0xFE, feetech.INST_SYNC_READ, [56, 2, 1, 2, 3])
    assert [l["id"] for l in instruction_lines(sync_read, 0.0)] == [1, 2, 3]
    corrupt = reply[:-1] + bytes([reply[-1] ^ 0x5A])
    assert status_lines(corrupt, read, 2.0)[0]["bad"] is True


@pytest.mark.off_clock
def test_wire_log_options_refuse_bad_input_in_one_line(tmp_path):
    from support.cli import run_module

    result = run_module("doctor", "--rig", SHIPPED_TWIN_RIG, "--twin-wire-log", tmp_path / "w.jsonl")
    assert result.code == 2 and result.err_lines == ["orchestrator: --twin-wire-log is only for --twin"], result.err
    rig = tmp_path / "rig.yaml"
    rig.write_text(SHIPPED_TWIN_RIG.read_text().replace("twin: {seed: 0, faults: []}", "twin: {wire_log: 3}"))
    result = run_module("doctor", "--rig", rig, "--twin")
    assert result.code == 2 and "wire_log must be a file path" in result.err and "Traceback" not in result.err
    faults = tmp_path / "faults.yaml"
    faults.write_text("faults: [{kind: servo_reset, servo: 9}]\n")
    result = run_module("doctor", "--rig", SHIPPED_TWIN_RIG, "--twin", "--twin-faults", faults)
    assert result.code == 2 and "servo must be 1-6" in result.err, result.err


# ------------------------------------------------------------------ the twin, through LeRobot


def _goal_steps(rig, target: dict[str, float], steps: int, fps: int = 30) -> None:
    for _ in range(steps):
        rig.act(target)
        time.sleep(1.0 / fps)   # the stimulus: goals at the loop's rate


def test_what_lerobot_wrote_is_in_the_log_and_servo_reset_drops_torque_with_status_zero(tmp_path):
    """LeRobot's bus on the twin with a wire log and a `servo_reset` of the gripper at step 5:
    the goals LeRobot sync-wrote are in the log, servo by servo; after the reset the gripper
    reads Torque_Enable 0 and Status 0 through LeRobot while the other five still hold; the
    fault line is in the log; a hand on the elbow pushed 15 degrees is a `stall` line, the
    `power_cycle` op a `power_cycle` line; closing the twin writes the exit line with torque off
    (LeRobot's disconnect turned it off) and the last goal each servo received."""
    from orchestrator.rigs.factory import make_rig
    from orchestrator.rigs.profile import load_rig
    from orchestrator.rigs.twin.client import start_twin

    log_path = tmp_path / "wire.jsonl"
    faults = {"seed": 0, "faults": [{"kind": "servo_reset", "servo": "gripper", "at_step": 5}]}
    twin = start_twin(load_rig(SHIPPED_TWIN_RIG), faults=faults, wire_log=log_path)
    try:
        rig = make_rig(twin.rig)
        rig.connect()
        try:
            twin.request("begin")
            t0 = time.time()
            obs = rig.observe(with_images=False)
            target = {k: v for k, v in obs.items() if k.endswith(".pos")}
            _goal_steps(rig, target, 4)
            bus = rig.robot.bus
            assert bus.sync_read("Torque_Enable", normalize=False, num_retry=3) == dict.fromkeys(bus.motors, 1)
            _goal_steps(rig, target, 3)
            torque = bus.sync_read("Torque_Enable", normalize=False, num_retry=3)
            status = bus.sync_read("Status", normalize=False, num_retry=3)
            assert torque == {**dict.fromkeys(bus.motors, 1), "gripper": 0}, torque
            assert status["gripper"] == 0
            assert twin.request("state")["torque"] == [True] * 5 + [False]
            twin.request("hold", joints={"elbow_flex": None})
            deadline = time.monotonic() + 10.0
            while twin.request("state")["stall_s"][2] < 0.2:
                # 15 degrees on, written on the bus (the profile's max_relative_target, 3, would
                # clip rig.act to 3 degrees: too little error to push at the torque limit)
                bus.write("Goal_Position", "elbow_flex", target["elbow_flex.pos"] - 15.0)
                assert time.monotonic() < deadline
                time.sleep(1.0 / 30)
            twin.request("hold", joints={})
            twin.power_cycle()
        finally:
            rig.disconnect()
    finally:
        twin.close()
    log = WireLog.read(log_path)
    goals = log.goals(after=t0)
    assert {servo for _, servo, _ in goals} == set(range(1, 7))
    assert len(goals) >= 6 * 7, len(goals)
    assert [f["servo"] for f in log.faults("servo_reset")] == [[6]]
    reset_t = log.faults("servo_reset")[0]["t"]
    assert sum(t < reset_t for t, _, _ in goals) >= 6 * 4   # the reset came at the 5th step
    assert all(line["t"] >= t0 - 60 for line in log.packets) and log.packets[0]["dir"] == "in"
    assert all(set(line) - {"bad"} == KEYS for line in log.packets)
    assert any(l["dir"] == "out" and l["inst"] == "SYNC_READ" and l["addr"] == 65 for l in log.packets)
    end = log.exit
    assert end is not None and end["torque"] == [0] * 6, end
    stalls = log.stalls(0.2)
    assert [s["joint"] for s in stalls] == ["elbow_flex"] and stalls[0]["load_pct"] > 95, log.events()
    assert [e["servo"] for e in log.events("power_cycle")] == [[1, 2, 3, 4, 5, 6]]
    assert stalls[0]["t"] + stalls[0]["s"] <= log.events("power_cycle")[0]["t"] + 0.05   # it ended at the power cycle
    last = {servo: value for _, servo, value in goals}
    for servo in range(1, 6):
        # torque off: Goal_Position follows the present position (rule: arm.py's docstring)
        assert abs(end["goal"][servo - 1] - end["present"][servo - 1]) <= 1
    assert len(last) == 6 and len(end["status"]) == 6


@pytest.mark.slow
def test_the_exit_line_is_written_after_the_orchestrator_is_sigkilled(tmp_path):
    """`orchestrator run --twin --twin-wire-log FILE` SIGKILLed during an episode: nobody turned
    torque off (a SIGKILL cannot be caught), and the twin, seeing its pipe close, writes the
    exit line: torque on, each servo's Goal_Position the last goal the log shows it received.
    The twin has no cameras (what is asserted is the bus's; without them no render process and
    no camera preflight: 2 s of frame counting, and their CPU, saved)."""
    from support.campaign_files import env, servo_rig, two_mark_protocol
    from support.operator_run import start_run, wait_for_line

    protocol = two_mark_protocol(tmp_path, "{type: scripted, aim_noise_mm: 3}", duration_s=4.0, fps=15)
    log_path = tmp_path / "logs" / "wire.jsonl"
    proc, lines = start_run(protocol, servo_rig(tmp_path), tmp_path / "campaign", "--twin", "--unattended",
                            "--twin-wire-log", log_path, env=env())
    try:
        wait_for_line(lines, "trial 1/", timeout_s=240)
        started = time.time()
        deadline = time.monotonic() + 60
        while len(WireLog.read(log_path).goals(after=started)) < 6 * 15 and time.monotonic() < deadline:
            time.sleep(0.2)   # the episode's goals are on the wire (the rest pose's came before)
        killed_at = time.time()
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    log = wait_for_exit(log_path, timeout_s=20)
    end = log.exit
    assert end["t"] >= killed_at
    assert end["torque"] == [1] * 6, end
    goals = log.goals()
    assert len(goals) >= 6 * 10, len(goals)
    last = {servo: value for _, servo, value in goals}
    assert [last[i] for i in range(1, 7)] == end["goal"], (last, end)
    assert not [l for l in log.packets if l["t"] > end["t"]]
