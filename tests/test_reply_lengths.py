"""A late status packet of another length is never a read's answer (rigs/so101/reply_lengths.py).

LeRobot's whole stack (SOFollower, FeetechMotorsBus, scservo_sdk) on the twin's servos in this
process, on a simulated clock (tests/fakes/twin_bus.py). The twin answers a read with a late
reply of another request in front of its own, as on the twin's wire log under load: a retried
Torque_Enable read's reply, still on its way when `act` emptied the buffer, arrives ahead of the
answer to `send_action`'s Present_Position read. scservo_sdk took it (six 1-byte packets read
as 2-byte positions, -31233 ticks), LeRobot's `max_relative_target` clipped every goal to that
'present' plus 10 degrees, and the arm swung 47 degrees off in 0.2 s."""

from __future__ import annotations

from fakes.twin_bus import twin_rig
from orchestrator.rigs.twin.feetech import INST_READ, INST_SYNC_READ, REG, instruction_packet

TORQUE_READ = instruction_packet(0xFE, INST_SYNC_READ, [REG["Torque_Enable"][0], 1, 1, 2, 3, 4, 5, 6])


def plant_late_reply(monkeypatch, twin, register: str) -> list[bytes]:
    """The twin answers the next read of `register` (sync or single) with the six Torque_Enable
    replies in front of its own; returns the list the planted bytes go in once sent (the
    positive control)."""
    answer, planted = twin.arm.chain.handle, []

    def late_first(packet: bytes) -> bytes:
        reply = answer(packet)
        if not planted and packet[4] in (INST_SYNC_READ, INST_READ) and packet[5] == REG[register][0]:
            planted.append(answer(TORQUE_READ))
            return planted[0] + reply
        return reply

    monkeypatch.setattr(twin.arm.chain, "handle", late_first)
    return planted


def test_a_late_torque_reply_is_not_taken_for_the_present_position_that_clips_the_goal(tmp_path, monkeypatch):
    rig, twin = twin_rig(tmp_path, monkeypatch)
    try:
        hold = {k: v for k, v in rig.observe(with_images=False).items() if k.endswith(".pos")}
        planted = plant_late_reply(monkeypatch, twin, "Present_Position")
        since = twin.now
        sent = rig.act(hold)                 # hold where it is: LeRobot reads Present_Position, clips, writes
        observed = rig.observe(with_images=False)
    finally:
        rig.disconnect()
    assert len(planted) == 1 and len(planted[0]) == 6 * 7     # six 1-byte status packets went out first
    leads = twin.goal_leads_deg(since)
    assert len(leads) == 5, leads                               # one goal for each arm joint
    assert max(lead for _, _, lead in leads) < 1.0, leads       # each goal where its joint was (was -2700 deg)
    assert max(abs(sent[k] - hold[k]) for k in hold) < 1.0, (sent, hold)
    assert max(abs(observed[k] - hold[k]) for k in hold) < 1.0, (observed, hold)


def test_a_sync_read_still_takes_its_own_answer_after_skipping_a_late_one(tmp_path, monkeypatch):
    """The skip reads on within the read's timeout: a Present_Position read behind a late
    Torque_Enable reply gets the servos' positions on its first try (no retry: `num_retry=0`)."""
    rig, twin = twin_rig(tmp_path, monkeypatch)
    try:
        planted = plant_late_reply(monkeypatch, twin, "Present_Position")
        bus = rig.robot.bus
        present = bus.sync_read("Present_Position", normalize=False, num_retry=0)
        now = {name: twin.arm.present_ticks(i) for i, name in enumerate(bus.motors)}   # ~1 ms later
    finally:
        rig.disconnect()
    assert planted
    assert max(abs(present[name] - now[name]) for name in now) <= 2, (present, now)


def test_a_single_read_skips_a_late_reply_of_another_length_too(tmp_path, monkeypatch):
    """LeRobot's single `read` (scservo_sdk's `txRxPacket`) behind the same late reply: the
    elbow's own 1-byte Torque_Enable packet is among the six and has the read's servo id."""
    rig, twin = twin_rig(tmp_path, monkeypatch)
    try:
        planted = plant_late_reply(monkeypatch, twin, "Present_Position")
        elbow = rig.robot.bus.read("Present_Position", "elbow_flex", normalize=False, num_retry=0)
        now = twin.arm.present_ticks(2)
    finally:
        rig.disconnect()
    assert planted
    assert abs(elbow - now) <= 2, (elbow, now)


def test_a_ping_behind_a_late_ping_reply_reads_the_model_number(tmp_path, monkeypatch):
    """scservo_sdk's `ping` reads the model number (2 bytes at address 3) after the ping's status
    packet. A late empty reply of an earlier ping in front of the read's answer was taken for it:
    `IndexError: list index out of range` (rigs/so101/robot_faults.stale_reply_servo), a connect
    or a `run` that ended with exit 1 before its first trial. Now the read skips it."""
    from orchestrator.rigs.twin.feetech import INST_PING

    rig, twin = twin_rig(tmp_path, monkeypatch)
    answer, planted = twin.arm.chain.handle, []

    def late_ping_first(packet: bytes) -> bytes:
        reply = answer(packet)
        if not planted and packet[4] == INST_READ and packet[5] == 3:     # the model number's read
            planted.append(answer(instruction_packet(3, INST_PING)))
            return planted[0] + reply
        return reply

    try:
        monkeypatch.setattr(twin.arm.chain, "handle", late_ping_first)
        bus = rig.robot.bus
        model, result, _ = bus.packet_handler.ping(bus.port_handler, 3)
    finally:
        rig.disconnect()
    assert len(planted) == 1 and len(planted[0]) == 6                     # an empty status packet went first
    assert (model, result) == (777, 0), (model, result)                   # the STS3215's model number
