"""A read takes only a status packet of the length it asked for.

scservo_sdk (Feetech's SDK under LeRobot's `FeetechMotorsBus`) takes the first status packet from
the addressed servo as the answer to a read, whatever its length: `readRx` (each servo's answer
to a sync read) and `txRxPacket` (a single read, write or ping) check the servo's id and the
checksum, never the packet's LENGTH byte, and a read then copies the bytes it asked for from
wherever the packet's parameters start. The answer to another request (a reply that came late,
`servo_alarms.drop_stale_replies`) is then read as this one's: a 1-byte `Torque_Enable` reply
(`FF FF 01 03 00 01 FA`) taken for a 2-byte `Present_Position` gives the position 0xFA01, the
data byte and the checksum, -31233 ticks in Feetech's sign-magnitude.

Found on the twin's wire log under load: the alarm check's `Torque_Enable` read timed out and
LeRobot retried it; the retry took the first attempt's late reply, and the retry's own reply was
still on its way when `act` emptied the input buffer, so LeRobot's next read, the
`Present_Position` that `max_relative_target` clips the goal to, took it. Every joint's goal went
out as that 'present' plus 10 degrees (-31119 ticks): the arm swung 47 degrees in 0.2 s.

`check_reply_lengths(robot)` makes the robot's Feetech packet handler skip a status packet whose
LENGTH is not the one its request implies (data bytes + 2: the error byte and the checksum; 2
for a write or a ping), as the SDK already skips another servo's packet: it reads on until the
right one comes or the read times out (LeRobot then retries it). The method is replaced on the
bus's own handler instance, the one its `GroupSyncRead` also calls (as LeRobot replaces its port
handler's `setPacketTimeout`). A same-length answer to an earlier request is not caught here:
such a late reply is emptied by `drop_stale_replies` before each transaction, and its values
are those of a few milliseconds before.
"""

from __future__ import annotations

import types
from typing import Any

# scservo_sdk/protocol_packet_handler.py and scservo_def.py
PKT_ID, PKT_LENGTH, PKT_INSTRUCTION, PKT_ERROR, PKT_PARAMETER0 = 2, 3, 4, 4, 5
INST_READ, BROADCAST_ID, COMM_SUCCESS = 2, 0xFE, 0
STATUS_OVERHEAD = 2   # a status packet's LENGTH: its data bytes + the error byte + the checksum


def check_reply_lengths(robot: Any) -> None:
    """Install the length check of the module docstring on `robot`'s Feetech bus (nothing for
    another robot)."""
    bus = getattr(robot, "bus", None)
    if bus is None or type(bus).__name__ != "FeetechMotorsBus":
        return
    handler = bus.packet_handler
    handler.readRx = types.MethodType(read_rx, handler)
    handler.txRxPacket = types.MethodType(tx_rx_packet, handler)


def read_rx(handler: Any, port: Any, servo_id: int, length: int) -> tuple[list[int], int, int]:
    """scservo_sdk's `readRx`: (data, result, error) of servo `servo_id`'s status packet carrying
    `length` data bytes; another servo's packet or one of another length is skipped."""
    while True:
        packet, result = handler.rxPacket(port)
        if result != COMM_SUCCESS:
            return [], result, 0
        if packet[PKT_ID] == servo_id and packet[PKT_LENGTH] == length + STATUS_OVERHEAD:
            return list(packet[PKT_PARAMETER0:PKT_PARAMETER0 + length]), result, packet[PKT_ERROR]


def tx_rx_packet(handler: Any, port: Any, txpacket: list[int]) -> tuple[list[int] | None, int, int]:
    """scservo_sdk's `txRxPacket`: send `txpacket`, then (status packet, result, error) of the
    addressed servo's answer of the length the instruction implies (a read's data bytes + 2,
    else 2); other packets are skipped."""
    result = handler.txPacket(port, txpacket)
    if result != COMM_SUCCESS:
        return None, result, 0
    if txpacket[PKT_ID] == BROADCAST_ID:    # no status packet comes back
        port.is_using = False
        return None, result, 0
    data_length = txpacket[PKT_PARAMETER0 + 1] if txpacket[PKT_INSTRUCTION] == INST_READ else 0
    port.setPacketTimeout(data_length + 6)   # as the SDK: HEADER0 HEADER1 ID LENGTH ERROR CHECKSUM + data
    while True:
        packet, result = handler.rxPacket(port)
        if result != COMM_SUCCESS:
            return packet, result, 0
        if packet[PKT_ID] == txpacket[PKT_ID] and packet[PKT_LENGTH] == data_length + STATUS_OVERHEAD:
            return packet, result, packet[PKT_ERROR]
