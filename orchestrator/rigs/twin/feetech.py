"""Feetech protocol 0 (STS/SMS series) as six STS3215 servos answer it, at the byte level.

An instruction packet is `FF FF id len inst params... checksum` with `len = len(params) + 2` and
`checksum = ~(id + len + inst + sum(params)) & 0xFF`; a status packet is
`FF FF id len error params... checksum` (Feetech STS/SMS user manual; `scservo_sdk`'s
`protocol_packet_handler.py`). Instructions handled: PING (1), READ (2), WRITE (3),
SYNC_READ (0x82), SYNC_WRITE (0x83); broadcast id 0xFE. Register addresses are the STS/SMS
control table (`lerobot/motors/feetech/tables.py`); each servo is a 128-byte register file.

`ServoChain.handle(packet) -> bytes` returns the status packets to send back (nothing for
SYNC_WRITE, for broadcasts other than PING, for a bad checksum, or for a servo that is mute).
The physical side is a callback: `refresh(id)` fills the Present_* registers before a read and
`written(id, addr, n)` hears every write. `wire_time_s(n_bytes)` is the time n bytes take on
a 1 Mbaud 8N1 link (10 bits a byte).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

INST_PING, INST_READ, INST_WRITE, INST_SYNC_READ, INST_SYNC_WRITE = 1, 2, 3, 0x82, 0x83
BROADCAST_ID = 0xFE
MODEL_STS3215 = 777
BAUD = 1_000_000
BITS_PER_BYTE = 10

# STS/SMS control table: (address, bytes).
REG = {
    "Firmware_Major_Version": (0, 1), "Firmware_Minor_Version": (1, 1), "Model_Number": (3, 2),
    "ID": (5, 1), "Baud_Rate": (6, 1), "Return_Delay_Time": (7, 1), "Response_Status_Level": (8, 1),
    "Min_Position_Limit": (9, 2), "Max_Position_Limit": (11, 2), "Max_Temperature_Limit": (13, 1),
    "Max_Voltage_Limit": (14, 1), "Min_Voltage_Limit": (15, 1), "Max_Torque_Limit": (16, 2),
    "Phase": (18, 1), "Unloading_Condition": (19, 1), "LED_Alarm_Condition": (20, 1),
    "P_Coefficient": (21, 1), "D_Coefficient": (22, 1), "I_Coefficient": (23, 1),
    "Protection_Current": (28, 2), "Homing_Offset": (31, 2), "Operating_Mode": (33, 1),
    "Protective_Torque": (34, 1), "Protection_Time": (35, 1), "Overload_Torque": (36, 1),
    "Torque_Enable": (40, 1), "Acceleration": (41, 1), "Goal_Position": (42, 2), "Goal_Time": (44, 2),
    "Goal_Velocity": (46, 2), "Torque_Limit": (48, 2), "Lock": (55, 1),
    "Present_Position": (56, 2), "Present_Velocity": (58, 2), "Present_Load": (60, 2),
    "Present_Voltage": (62, 1), "Present_Temperature": (63, 1), "Status": (65, 1), "Moving": (66, 1),
    "Present_Current": (69, 2), "Maximum_Acceleration": (85, 1),
}

# Error bits of a status packet (scservo_sdk: ERRBIT_*).
ERR_VOLTAGE, ERR_ANGLE, ERR_OVERHEAT, ERR_OVERCURRENT, ERR_OVERLOAD = 1, 2, 4, 8, 32

# Factory defaults of an STS3215 (12 V version), as read from a new servo.
DEFAULTS = {
    "Firmware_Major_Version": 3, "Firmware_Minor_Version": 10, "Model_Number": MODEL_STS3215,
    "Baud_Rate": 0, "Return_Delay_Time": 250, "Response_Status_Level": 1,
    "Min_Position_Limit": 0, "Max_Position_Limit": 4095, "Max_Temperature_Limit": 70,
    "Max_Voltage_Limit": 140, "Min_Voltage_Limit": 40, "Max_Torque_Limit": 1000,
    "Unloading_Condition": 44, "LED_Alarm_Condition": 47, "P_Coefficient": 32, "D_Coefficient": 32,
    "Protection_Current": 500, "Protective_Torque": 20, "Protection_Time": 200, "Overload_Torque": 80,
    "Acceleration": 0, "Torque_Limit": 1000, "Present_Voltage": 120, "Present_Temperature": 28,
    "Maximum_Acceleration": 254,
}


def checksum(body: Iterable[int]) -> int:
    return (~sum(body)) & 0xFF


def status_packet(servo_id: int, params: Sequence[int], error: int = 0) -> bytes:
    body = [servo_id, len(params) + 2, error, *params]
    return bytes([0xFF, 0xFF, *body, checksum(body)])


def instruction_packet(servo_id: int, inst: int, params: Sequence[int] = ()) -> bytes:
    body = [servo_id, len(params) + 2, inst, *params]
    return bytes([0xFF, 0xFF, *body, checksum(body)])


def wire_time_s(n_bytes: int) -> float:
    """Seconds `n_bytes` take on the bus (1 Mbaud, 8N1: 10 bits a byte)."""
    return n_bytes * BITS_PER_BYTE / BAUD


def split_packets(buffer: bytearray) -> list[bytes]:
    """Take every complete packet off the front of `buffer` (garbage before a header is dropped)."""
    packets: list[bytes] = []
    while True:
        start = buffer.find(b"\xff\xff")
        if start < 0:
            del buffer[:max(0, len(buffer) - 1)]
            return packets
        if start:
            del buffer[:start]
        if len(buffer) < 4:
            return packets
        length = buffer[3]
        total = 4 + length
        if length < 2:
            del buffer[:2]
            continue
        if len(buffer) < total:
            return packets
        packets.append(bytes(buffer[:total]))
        del buffer[:total]


def sign_magnitude(value: int, sign_bit: int) -> int:
    """Encode a signed int as Feetech sign-magnitude (the sign at `sign_bit`)."""
    magnitude = min(abs(int(value)), (1 << sign_bit) - 1)
    return magnitude | ((1 << sign_bit) if value < 0 else 0)


def from_sign_magnitude(raw: int, sign_bit: int) -> int:
    """Decode Feetech sign-magnitude (a Goal_Position of -400 is 400 | 1 << 15)."""
    magnitude = raw & ((1 << sign_bit) - 1)
    return -magnitude if raw & (1 << sign_bit) else magnitude


class Servo:
    """One STS3215's register file."""

    def __init__(self, servo_id: int):
        self.regs = bytearray(128)
        for name, value in DEFAULTS.items():
            self.put(name, value)
        self.put("ID", servo_id)
        self.error = 0          # error bits of its status packets
        self.mute = False       # stops answering (a dead servo or a broken daisy chain)

    def put(self, name: str, value: int) -> None:
        addr, n = REG[name]
        self.regs[addr:addr + n] = (int(value) & ((1 << (8 * n)) - 1)).to_bytes(n, "little")

    def get(self, name: str) -> int:
        addr, n = REG[name]
        return int.from_bytes(self.regs[addr:addr + n], "little")


class ServoChain:
    """Servos on one bus (see the module docstring)."""

    def __init__(self, ids: Iterable[int], refresh: Callable[[int], None] = lambda i: None,
                 written: Callable[[int, int, int], None] = lambda i, a, n: None):
        self.servos = {i: Servo(i) for i in ids}
        self.refresh = refresh
        self.written = written

    def _reply(self, servo_id: int, params: Sequence[int] = ()) -> bytes:
        servo = self.servos.get(servo_id)
        if servo is None or servo.mute:
            return b""
        return status_packet(servo_id, params, servo.error)

    def _read(self, servo_id: int, addr: int, n: int) -> bytes:
        servo = self.servos.get(servo_id)
        if servo is None or servo.mute:
            return b""
        self.refresh(servo_id)
        return self._reply(servo_id, servo.regs[addr:addr + n])

    def _write(self, servo_id: int, addr: int, data: bytes | list[int]) -> None:
        servo = self.servos.get(servo_id)
        if servo is None or servo.mute:
            return
        servo.regs[addr:addr + len(data)] = bytes(data)
        self.written(servo_id, addr, len(data))

    def handle(self, packet: bytes) -> bytes:
        if len(packet) < 6 or packet[:2] != b"\xff\xff" or checksum(packet[2:-1]) != packet[-1]:
            return b""
        sid, inst, params = packet[2], packet[4], packet[5:-1]
        if inst == INST_PING:
            if sid == BROADCAST_ID:
                return b"".join(self._reply(i) for i in self.servos)
            return self._reply(sid)
        if inst == INST_READ and len(params) >= 2:
            return self._read(sid, params[0], params[1])
        if inst == INST_WRITE and params:
            targets = list(self.servos) if sid == BROADCAST_ID else [sid]
            for i in targets:
                self._write(i, params[0], params[1:])
            return b"" if sid == BROADCAST_ID else self._reply(sid)
        if inst == INST_SYNC_READ and len(params) >= 2:
            return b"".join(self._read(i, params[0], params[1]) for i in params[2:])
        if inst == INST_SYNC_WRITE and len(params) >= 2:
            addr, n, rest = params[0], params[1], params[2:]
            for k in range(0, len(rest) - n, n + 1):
                self._write(rest[k], addr, rest[k + 1:k + 1 + n])
        return b""
