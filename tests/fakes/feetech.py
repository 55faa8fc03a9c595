"""A fake Feetech STS3215 servo chain behind a fake serial port (test-only).

This is the lowest layer only: LeRobot's `SOFollower`, `FeetechMotorsBus` and the real
`scservo_sdk` (PortHandler, PacketHandler, GroupSyncRead/Write) all run unchanged; the bytes
they write to "the serial port" are parsed here as Feetech protocol-0 instruction packets and
answered with status packets from a per-servo register table, as the motors would.

`install(monkeypatch, arm)` makes `scservo_sdk.port_handler` open `arm` for `arm.port`
(any other port raises `serial.SerialException`, as pyserial does for a missing device).

Fault injection: `arm.unplug()` (every serial I/O raises `SerialException`, as when the USB
cable is pulled), `arm.mute()` (servos stop answering: the SDK times out), `arm.fail_after(n)`
(unplug after n more instruction packets), `arm.drop(n)` (the next n instruction packets get no
answer: a transient serial failure), `arm.corrupt_rate = p` (each status packet has one byte
flipped with probability p, seeded: what Feetech servos do when several joints move),
`arm.alarm(id)` (an overload: error bit in every status packet, Status set, torque off),
`arm.reset_servo(id)` (a brown-out: torque off, Status 0), `servo.blocked = True` (a hand holds
the joint: its position stops following the goal).

Register log: `arm.writes` holds `(perf_counter time, servo id, register address, value)` for every
write the servos accept (`goal_writes()` / `torque_writes()` filter it), so tests can assert when
the arm was commanded, and what every servo's Torque_Enable reads at the end.
"""

from __future__ import annotations

import json
import random
import threading
import time
import types
from pathlib import Path

import serial

from orchestrator.rigs.twin.feetech import (
    BROADCAST_ID,
    ERR_OVERLOAD,
    INST_PING,
    INST_READ,
    INST_SYNC_READ,
    INST_SYNC_WRITE,
    INST_WRITE,
    MODEL_STS3215,
    REG,
    checksum,
    status_packet,
)

# The packet layer and the register addresses are the twin's (orchestrator/rigs/twin/feetech.py,
# whose table tests/test_twin_servo.py checks against LeRobot's): one Feetech protocol here.
ADDR_FW_MAJOR, ADDR_FW_MINOR, ADDR_MODEL, ADDR_ID = (REG[n][0] for n in (
    "Firmware_Major_Version", "Firmware_Minor_Version", "Model_Number", "ID"))
ADDR_MIN_LIMIT, ADDR_MAX_LIMIT, ADDR_HOMING = (REG[n][0] for n in (
    "Min_Position_Limit", "Max_Position_Limit", "Homing_Offset"))
ADDR_TORQUE, ADDR_GOAL, ADDR_PRESENT, ADDR_STATUS = (REG[n][0] for n in (
    "Torque_Enable", "Goal_Position", "Present_Position", "Status"))

SO101_MOTORS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")


class FakeServo:
    """One STS3215: a 128-byte register table; the position follows the goal at `speed` ticks/s."""

    def __init__(self, servo_id: int, position: int = 2048, speed: float = 20000.0):
        self.regs = bytearray(128)
        self.regs[ADDR_FW_MAJOR], self.regs[ADDR_FW_MINOR] = 3, 10
        self._put(ADDR_MODEL, 2, MODEL_STS3215)
        self.regs[ADDR_ID] = servo_id
        self._put(ADDR_MAX_LIMIT, 2, 4095)
        self._put(ADDR_PRESENT, 2, position)
        self._put(ADDR_GOAL, 2, position)
        self.speed = speed
        self.error = 0          # the error byte of its status packets (scservo_sdk ERRBIT_*)
        self.blocked = False    # held back by a hand: the position does not follow the goal
        self._t = time.perf_counter()

    def _put(self, addr: int, n: int, value: int) -> None:
        self.regs[addr:addr + n] = int(value).to_bytes(n, "little")

    def _get(self, addr: int, n: int) -> int:
        return int.from_bytes(self.regs[addr:addr + n], "little")

    @property
    def position(self) -> int:
        return self._get(ADDR_PRESENT, 2)

    @property
    def goal(self) -> int:
        return self._get(ADDR_GOAL, 2)

    @property
    def torque(self) -> bool:
        return bool(self.regs[ADDR_TORQUE])

    def move_by_hand(self, position: int) -> None:
        """A person moves the limp joint to `position` (ticks); only with torque off."""
        assert not self.torque, "a torqued servo holds its goal: a hand cannot move it"
        self._put(ADDR_PRESENT, 2, position)

    def update(self) -> None:
        now = time.perf_counter()
        dt, self._t = now - self._t, now
        if not self.torque or self.blocked:
            return
        pos, goal = self.position, self.goal
        step = max(1, int(self.speed * dt))
        pos = goal if abs(goal - pos) <= step else pos + step * (1 if goal > pos else -1)
        self._put(ADDR_PRESENT, 2, pos)

    def read(self, addr: int, n: int) -> list[int]:
        self.update()
        return list(self.regs[addr:addr + n])

    def write(self, addr: int, data: list[int]) -> None:
        self.update()
        self.regs[addr:addr + len(data)] = bytes(data)


class FakeFeetechArm:
    """Six servos (ids 1-6) on one port, with the serial-port side the SDK talks to."""

    def __init__(self, port: str, ids=(1, 2, 3, 4, 5, 6), calibration: dict | None = None,
                 speed: float = 20000.0):
        self.port = port
        self.servos = {i: FakeServo(i, speed=speed) for i in ids}
        self._out = bytearray()
        self._lock = threading.Lock()
        self.unplugged = False
        self.muted = False
        self._fail_countdown: int | None = None
        self._drop = 0
        self._late: dict[int, float] = {}
        self._stale: set[int] = set()
        self.corrupt_rate = 0.0
        self.corrupted = 0
        self._rng = random.Random(0)
        self.writes: list[tuple[float, int, int, int]] = []
        self.packets = 0
        self.is_open = False
        if calibration:
            self.load_calibration(calibration)

    # -------------------------------------------------------- test controls
    def load_calibration(self, calibration: dict) -> None:
        """Write a LeRobot calibration dict {motor: {id, homing_offset, range_min, range_max}}."""
        from lerobot.motors.encoding_utils import encode_sign_magnitude

        for cal in calibration.values():
            servo = self.servos[cal["id"]]
            servo._put(ADDR_HOMING, 2, encode_sign_magnitude(cal["homing_offset"], 11))
            servo._put(ADDR_MIN_LIMIT, 2, cal["range_min"])
            servo._put(ADDR_MAX_LIMIT, 2, cal["range_max"])

    def unplug(self) -> None:
        self.unplugged = True

    def alarm(self, servo_id: int, bits: int = ERR_OVERLOAD) -> None:
        """Servo `servo_id` raises an alarm (default overload): its status packets carry `bits`,
        its Status register reads them, and it unloads (Torque_Enable 0), as an STS3215 does."""
        servo = self.servos[servo_id]
        servo.error = bits
        servo.regs[ADDR_STATUS] = bits
        servo.regs[ADDR_TORQUE] = 0

    def reset_servo(self, servo_id: int) -> None:
        """Servo `servo_id` browns out and restarts: torque off, no alarm (Status 0)."""
        servo = self.servos[servo_id]
        servo.error = 0
        servo.regs[ADDR_STATUS] = 0
        servo.regs[ADDR_TORQUE] = 0

    def mute(self) -> None:
        self.muted = True

    def fail_after(self, packets: int) -> None:
        self._fail_countdown = packets

    def drop(self, packets: int) -> None:
        self._drop = packets

    def answer_late(self, servo_id: int, after_s: float) -> None:
        """Servo `servo_id`'s replies reach the port `after_s` after the request (past
        scservo_sdk's ~34 ms timeout: a reply the process was too late to read)."""
        self._late[servo_id] = after_s

    def stale_ping_reply(self, servo_id: int) -> None:
        """Servo `servo_id`'s next reply to a ping comes right after the reply to an earlier ping
        (an empty status packet the SDK gave up on, as under load): the SDK takes the stale one as
        the ping's reply and the ping's own as the reply to its model-number read."""
        self._stale.add(servo_id)

    def _put_out(self, reply: bytes) -> None:
        with self._lock:
            self._out += reply

    def positions(self) -> dict[int, int]:
        return {i: s.position for i, s in self.servos.items()}

    def torque_enabled(self) -> dict[int, int]:
        """Torque_Enable as each servo's register reads now."""
        return {i: s.regs[ADDR_TORQUE] for i, s in self.servos.items()}

    def goal_writes(self, since: float = 0.0) -> list[tuple[float, int, int]]:
        """(time, servo id, goal ticks) of every Goal_Position write after `since`."""
        return [(t, i, v) for t, i, a, v in self.writes if a == ADDR_GOAL and t > since]

    def goal_write_times(self, since: float = 0.0) -> list[float]:
        """Distinct times at which Goal_Position was written (one per sync write)."""
        return sorted({t for t, _, _ in self.goal_writes(since)})

    def torque_writes(self, since: float = 0.0) -> list[tuple[float, int, int]]:
        return [(t, i, v) for t, i, a, v in self.writes if a == ADDR_TORQUE and t > since]

    def _log(self, t: float, servo_id: int, addr: int, data: list[int]) -> None:
        if addr == ADDR_GOAL and len(data) >= 2:
            self.writes.append((t, servo_id, ADDR_GOAL, data[0] | data[1] << 8))
        elif addr == ADDR_TORQUE and data:
            self.writes.append((t, servo_id, ADDR_TORQUE, data[0]))

    # -------------------------------------------------------- pyserial side
    def _check(self) -> None:
        if self.unplugged:
            raise serial.SerialException(
                "device reports readiness to read but returned no data (device disconnected or "
                "multiple access on port?)")

    @property
    def in_waiting(self) -> int:
        self._check()
        return len(self._out)

    def read(self, size: int = 1) -> bytes:
        self._check()
        with self._lock:
            data = bytes(self._out[:size])
            del self._out[:size]
        return data

    def write(self, data) -> int:
        self._check()
        packet = list(data)
        self.packets += 1
        if self._fail_countdown is not None:
            self._fail_countdown -= 1
            if self._fail_countdown <= 0:
                self.unplugged = True
                self._check()
        if self._drop > 0:
            self._drop -= 1
        elif not self.muted:
            reply = self._handle(packet)
            if reply and self.corrupt_rate and self._rng.random() < self.corrupt_rate:
                reply = bytearray(reply)
                reply[-1] ^= 0x5A  # a bad checksum: the SDK reports COMM_RX_CORRUPT
                reply = bytes(reply)
                self.corrupted += 1
            if reply and len(packet) > 4 and packet[4] == INST_PING and packet[2] in self._stale:
                self._stale.discard(packet[2])
                reply = self._status(packet[2], []) + reply
            late_s = self._late.get(packet[2]) if reply and len(packet) > 2 else None
            if late_s:
                threading.Timer(late_s, self._put_out, (reply,)).start()
            else:
                self._put_out(reply)
        return len(packet)

    def flush(self) -> None:
        self._check()

    def reset_input_buffer(self) -> None:
        with self._lock:
            self._out.clear()

    def reset_output_buffer(self) -> None:
        pass

    def close(self) -> None:
        self.is_open = False

    # -------------------------------------------------------- protocol
    def _status(self, servo_id: int, params: list[int]) -> bytes:
        servo = self.servos.get(servo_id)
        return status_packet(servo_id, params, servo.error if servo else 0)

    def _handle(self, p: list[int]) -> bytes:
        if len(p) < 6 or p[0] != 0xFF or p[1] != 0xFF or checksum(p[2:-1]) != p[-1]:
            return b""
        sid, inst, params = p[2], p[4], p[5:-1]
        now = time.perf_counter()
        if inst == INST_PING:
            if sid == BROADCAST_ID:
                return b"".join(self._status(i, []) for i in self.servos)
            return self._status(sid, []) if sid in self.servos else b""
        if inst == INST_READ:
            servo = self.servos.get(sid)
            return self._status(sid, servo.read(params[0], params[1])) if servo else b""
        if inst == INST_WRITE:
            targets = self.servos.values() if sid == BROADCAST_ID else [self.servos.get(sid)]
            for servo in targets:
                if servo:
                    servo.write(params[0], params[1:])
                    self._log(now, servo.regs[ADDR_ID], params[0], params[1:])
            return self._status(sid, []) if sid in self.servos else b""
        if inst == INST_SYNC_READ:
            addr, n, ids = params[0], params[1], params[2:]
            return b"".join(self._status(i, self.servos[i].read(addr, n)) for i in ids if i in self.servos)
        if inst == INST_SYNC_WRITE:
            addr, n, rest = params[0], params[1], params[2:]
            for k in range(0, len(rest), n + 1):
                servo = self.servos.get(rest[k])
                if servo:
                    servo.write(addr, rest[k + 1:k + 1 + n])
                    self._log(now, rest[k], addr, rest[k + 1:k + 1 + n])
            return b""
        return b""


def install(monkeypatch, *arms: FakeFeetechArm) -> None:
    """Route `scservo_sdk`'s serial port opening to the fake arms (by port name)."""
    import scservo_sdk.port_handler as ph

    by_port = {arm.port: arm for arm in arms}

    def fake_serial(port=None, **kwargs):
        arm = by_port.get(port)
        if arm is None:
            raise serial.SerialException(
                f"[Errno 2] could not open port {port}: [Errno 2] No such file or directory: '{port}'")
        arm.is_open = True
        return arm

    shim = types.SimpleNamespace(Serial=fake_serial, EIGHTBITS=serial.EIGHTBITS,
                                 SerialException=serial.SerialException)
    monkeypatch.setattr(ph, "serial", shim)


def default_calibration() -> dict:
    """A plausible SO-101 calibration: full 0-4095 range, no homing offset."""
    return {name: {"id": i + 1, "drive_mode": 0, "homing_offset": 0, "range_min": 0, "range_max": 4095}
            for i, name in enumerate(SO101_MOTORS)}


def write_calibration_file(directory: Path, robot_id: str, calibration: dict | None = None) -> Path:
    """Write `<directory>/<id>.json` as `lerobot-calibrate` would (directory = the robot's
    calibration dir: `$HF_LEROBOT_CALIBRATION/robots/<robot name>` or `robot.calibration_dir`)."""
    path = Path(directory) / f"{robot_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(calibration or default_calibration(), indent=4))
    return path
