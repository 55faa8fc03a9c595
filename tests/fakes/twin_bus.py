"""The twin's servos and scene in this process, behind scservo_sdk's serial port, on a simulated clock.

`InProcessTwin` is the twin without its process and its pseudo-terminal: the same `TwinArm`
(six STS3215 position loops, `rigs/twin/sts3215.py`, driving the MuJoCo SO-101 of `rigs.sim`)
answers the Feetech instruction packets that LeRobot's `SOFollower` / `FeetechMotorsBus` and the
real `scservo_sdk` write (`TwinArm.chain.handle`, as `rigs/twin/server.py` does). Nothing runs on
the wall clock: every instruction packet takes `PACKET_S` of simulated time (a USB adapter's
round trip and the bytes at 1 Mbaud), and `clock.sleep(s)` steps the physics by `s`
(`install` puts the clock where the guarded motion and the servo-alarm reads take their time).
So a test's outcome does not depend on the machine's load.

What it records, for assertions on what the arm was told and what it did:
- `packets`: (simulated time, instruction packet bytes) of every packet written;
- `goals`: (time, {servo id: Goal_Position ticks}, {servo id: Present_Position ticks}) of every
  Goal_Position write, with where each servo was at that moment;
- `stall_s`: per servo, the longest stretch it pushed at its torque limit without moving
  (`STALL_FRACTION` of the cap, under `STALL_RAD_S`), and `stalls`: each such stretch;
- `hold(joint)` (a person's hand on a joint, `TwinArm.hold`), `overload(joint)` (the twin's
  `overload` fault: Status bit 5, the servo unloads), each stamped in `events`.
"""

from __future__ import annotations

import math
import threading
import types
from pathlib import Path

import numpy as np
import serial
import yaml

from orchestrator.rigs.twin.arm import JOINTS
from orchestrator.rigs.twin.feetech import INST_SYNC_WRITE, INST_WRITE, REG, from_sign_magnitude

PACKET_S = 0.001          # an instruction packet and its reply: a USB adapter's round trip, ~1 ms
STALL_FRACTION = 0.8      # pushing at >= 80 % of the servo's torque cap...
STALL_RAD_S = 0.05        # ...while moving slower than this is a stall
TWIN_REST = {"shoulder_pan.pos": 0, "shoulder_lift.pos": -94, "elbow_flex.pos": 90, "wrist_flex.pos": 50,
             "wrist_roll.pos": 0, "gripper.pos": 30}   # hardware/so101_twin.yaml
GOAL = REG["Goal_Position"][0]


class SimClock:
    """`time` for the code under test: `perf_counter`/`monotonic`/`time` read the twin's simulated
    time, `sleep` steps its physics."""

    def __init__(self, twin: InProcessTwin):
        self.twin = twin

    def perf_counter(self) -> float:
        return self.twin.now

    monotonic = perf_counter
    time = perf_counter

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            self.twin.advance(seconds)


class InProcessTwin:
    """See the module docstring. `pose` (LeRobot units, STATE_KEYS order) is where the arm
    starts; the cube starts at `cube_xy` (m); `supply_v` is the servos' supply (12 or 7.4 V: the
    STS3215 version's stall torque, `TwinArm`'s, as the twin profile's `supply_v`)."""

    def __init__(self, port: str, pose: list[float] | None = None, cube_xy: tuple[float, float] = (0.30, 0.22),
                 supply_v: float = 12.0):
        from orchestrator.design.protocol import Cube, Mark
        from orchestrator.rigs.profile import RigProfile
        from orchestrator.rigs.sim import SimRig
        from orchestrator.rigs.twin.arm import TwinArm

        self.port = port
        self.sim = SimRig(RigProfile.model_validate({"robot": {"type": "sim_so101"}, "cameras": {},
                                                     "rest_pose": TWIN_REST}), fps=30)
        self.sim.place_cube(Mark(id="cube", x=cube_xy[0], y=cube_xy[1]), Cube())
        self.sim._set_arm(np.array(pose if pose is not None else list(TWIN_REST.values()), dtype=float))
        self.arm = TwinArm(self.sim, supply_v=supply_v)
        self.now, self._debt = 0.0, 0.0
        self.packets: list[tuple[float, bytes]] = []
        self.goals: list[tuple[float, dict[int, int], dict[int, int]]] = []
        self.events: list[tuple[float, str]] = []
        self.stalls: list[tuple[str, float, float]] = []   # (joint, from, to)
        self._stall_from: dict[int, float] = {}
        self._out = bytearray()
        self._lock = threading.Lock()
        self.is_open = False

    # -------------------------------------------------------- time and physics
    def advance(self, seconds: float) -> None:
        self._debt += seconds
        while self._debt >= self.arm.dt:
            self._debt -= self.arm.dt
            self.arm.step()
            self.now += self.arm.dt
            self._watch_stalls()

    def _watch_stalls(self) -> None:
        from orchestrator.rigs.twin import sts3215

        qvel = self.sim.data.qvel[self.arm.dadr]
        for i, loop in enumerate(self.arm.loops):
            regs = self.arm._loop_registers(i)
            cap = loop.stall_nm * min(min(regs.torque_limit, 1000) / 1000.0,
                                      regs.protection_current * sts3215.CURRENT_UNIT_A / sts3215.STALL_CURRENT_A)
            stalled = bool(self.arm.torque_on[i]) and abs(loop.torque_nm) >= STALL_FRACTION * cap \
                and abs(float(qvel[i])) < STALL_RAD_S
            if stalled:
                self._stall_from.setdefault(i, self.now)
            elif i in self._stall_from:
                self.stalls.append((JOINTS[i], self._stall_from.pop(i), self.now))

    def stall_s(self) -> dict[str, float]:
        """The longest stall of each servo so far (one still going counts up to now)."""
        out = dict.fromkeys(JOINTS, 0.0)
        spans = self.stalls + [(JOINTS[i], t, self.now) for i, t in self._stall_from.items()]
        for joint, t0, t1 in spans:
            out[joint] = max(out[joint], t1 - t0)
        return out

    # -------------------------------------------------------- what a person or a fault does
    def hold(self, joint: str) -> None:
        """A hand holds `joint` where it is (the twin's `hold` op)."""
        self.arm.hold({joint: None})
        self.events.append((self.now, f"hold:{joint}"))

    def overload(self, joint: str) -> None:
        """The twin's `overload` fault on `joint` (`TwinArm.overload_unload`, as the twin's server
        applies it): the servo unloads, Status bit 5 set."""
        self.arm.overload_unload(JOINTS.index(joint), cause="fault")
        self.events.append((self.now, f"overload:{joint}"))

    def degrees(self) -> dict[str, float]:
        return {f"{j}.pos": float(v) for j, v in zip(JOINTS, self.sim.joint_positions(), strict=True)}

    # -------------------------------------------------------- the serial port scservo_sdk opens
    @property
    def in_waiting(self) -> int:
        return len(self._out)

    def read(self, size: int = 1) -> bytes:
        with self._lock:
            data = bytes(self._out[:size])
            del self._out[:size]
        return data

    def write(self, data) -> int:
        packet = bytes(data)
        self.advance(PACKET_S)
        self.packets.append((self.now, packet))
        if len(packet) > 6 and packet[4] in (INST_SYNC_WRITE, INST_WRITE) and packet[5] == GOAL:
            self._log_goals(packet)
        reply = self.arm.chain.handle(packet)
        with self._lock:
            self._out += reply
        return len(packet)

    def _log_goals(self, packet: bytes) -> None:
        params = packet[5:-1]
        if packet[4] == INST_SYNC_WRITE:
            n, rest = params[1], params[2:]
            pairs = [(rest[k], rest[k + 1] | rest[k + 2] << 8) for k in range(0, len(rest) - n, n + 1)]
        else:
            pairs = [(packet[2], params[1] | params[2] << 8)]
        goals = {sid: from_sign_magnitude(v, 15) for sid, v in pairs}
        present = {sid: self.arm.present_ticks(sid - 1) for sid in goals}
        self.goals.append((self.now, goals, present))

    def flush(self) -> None:
        return None

    def reset_input_buffer(self) -> None:
        with self._lock:
            self._out.clear()

    def reset_output_buffer(self) -> None:
        return None

    def close(self) -> None:
        self.is_open = False

    # -------------------------------------------------------- what the assertions read
    def goal_leads_deg(self, since: float = 0.0) -> list[tuple[float, str, float]]:
        """(time, joint, degrees) of how far each arm joint's goal was from where it was, for
        every Goal_Position write after `since` (the gripper's 0-100 is left out)."""
        from orchestrator.rigs.twin.arm import TICKS_PER_DEG

        return [(t, JOINTS[sid - 1], abs(goal - present[sid]) / TICKS_PER_DEG)
                for t, goals, present in self.goals if t > since
                for sid, goal in goals.items() if JOINTS[sid - 1] != "gripper"]


def install(monkeypatch, twin: InProcessTwin) -> SimClock:
    """scservo_sdk opens `twin` for `twin.port`; the guarded motion and the servo-alarm reads take
    their time from the twin's clock. Returns the clock."""
    import scservo_sdk.port_handler as ph

    from orchestrator.rigs import guarded_motion
    from orchestrator.rigs.so101 import servo_alarms

    def fake_serial(port=None, **kwargs):
        if port != twin.port:
            raise serial.SerialException(f"[Errno 2] could not open port {port}")
        twin.is_open = True
        return twin

    monkeypatch.setattr(ph, "serial", types.SimpleNamespace(Serial=fake_serial, EIGHTBITS=serial.EIGHTBITS,
                                                            SerialException=serial.SerialException))
    clock = SimClock(twin)
    monkeypatch.setattr(guarded_motion, "time", clock)
    monkeypatch.setattr(servo_alarms, "time", clock)
    return clock


def twin_rig(directory: Path, monkeypatch, pose: list[float] | None = None, **twin_options):
    """A `LeRobotRig` (LeRobot's whole stack) on an `InProcessTwin`, connected: (rig, twin). The
    profile is hardware/so101_twin.yaml's arm without cameras, the twin's shipped calibration."""
    import json

    from orchestrator.rigs.profile import load_rig
    from orchestrator.rigs.so101.rig import LeRobotRig
    from orchestrator.rigs.twin.arm import shipped_calibration

    directory = Path(directory)
    port = str(directory / "ttyTWIN")
    open(port, "w").close()
    twin = InProcessTwin(port, pose, **twin_options)
    install(monkeypatch, twin)
    (directory / "cal").mkdir(parents=True, exist_ok=True)
    (directory / "cal" / "twin_arm.json").write_text(json.dumps(shipped_calibration()))
    profile = directory / "twin_arm.yaml"
    profile.write_text(yaml.safe_dump({
        "robot": {"type": "so101_follower", "port": port, "id": "twin_arm", "calibration_dir": str(directory / "cal"),
                  "max_relative_target": 10.0, "num_read_retries": 5},
        "cameras": {}, "rest_pose": TWIN_REST}, sort_keys=False))
    rig = LeRobotRig(load_rig(profile))
    rig.connect()
    return rig, twin


def degrees_between(a: dict[str, float], b: dict[str, float]) -> float:
    return max(abs(a[k] - b[k]) for k in a if k in b and k != "gripper.pos") if a else math.nan
