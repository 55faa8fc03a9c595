"""The twin process: six STS3215 servos on a pseudo-terminal, the MuJoCo SO-101 behind them.

`python -m orchestrator.rigs.twin CONFIG_JSON` (started by `twin.client.start_twin`, never by
hand). It opens a pseudo-terminal (the slave path is the serial port LeRobot opens), builds the
simulated rig's scene (`rigs.sim.SimRig`), and serves, on one thread:
- the bus: Feetech instruction packets in, status packets out after the time they take on a
  1 Mbaud link plus the servo's Return_Delay_Time (`feetech.py`, `arm.py`);
- the physics, stepped to the wall clock (real time; if the machine falls behind by more than
  `MAX_LAG_S` the lost time is skipped and counted in `lag_s`);
- control requests on stdin, one JSON object a line, answered on stdout: `place` (cube on a
  mark), `begin` (episode time zero), `end` (the physics success test and events), `state`,
  `inject` (one fault of `fault_plan.py`, applied before the next packet), `hold` (a person's
  hand holds arm joints at given angles, `TwinArm.hold`; `{"joints": {}}` lets go),
  `power_cycle` (the arm's power off and on: every servo restarts, an overload latch cleared,
  `TwinArm.power_cycle`), `restart` (this twin as a new one on the same port and cameras, with
  the request's faults and wire log: several runs on one twin process), `quit`. `state` answers, besides the joints and torques, each servo's
  Status and overload latch, each joint's present stall (`stall_s`) and the recorded stalls
  (`stalls`: `stalls.py`, times in epoch seconds).
- the wire log's own lines besides the packets: each stall when it ends (and those still on when
  the twin stops), each overload unload and power cycle (`{"t", "event", ...}`).
A second process (`render.py`) renders every camera at its fps into shared frames
(`frames.py`) from the joint positions this one shares after every physics step.

It exits when stdin reaches end of file (the orchestrator closed it, exited or was killed),
when its parent process changes, on `quit`, and on SIGTERM; the frame files go with it.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
import tty
from pathlib import Path
from typing import Any

from orchestrator.rigs.twin.arm import JOINTS as ARM_JOINTS
from orchestrator.rigs.twin.fault_plan import FaultPlan, fault_problems, servo_id, servo_index
from orchestrator.rigs.twin.feetech import ERR_OVERHEAT, INST_SYNC_WRITE, REG, split_packets, wire_time_s
from orchestrator.rigs.twin.shared_frames import DISCONNECTED, FROZEN, LIVE, SceneState
from orchestrator.rigs.twin.wire_log import WireLog

MAX_LAG_S = 0.1
PARENT_CHECK_S = 0.5
REALTIME_PRIORITY = 10
PARKED_CUBE: dict[str, Any] = {"id": "parked", "x": 0.30, "y": 0.22, "yaw_deg": 0.0}
ADAPTER_LATENCY_MS = 0.0   # extra reply delay of the USB-serial adapter (`twin: {adapter_latency_ms: N}`)
ONE_SERVO = ("servo_silent", "overload", "calibration_offset_deg", "overheat")   # faults that need `servo`
SERVO_WIDE = ("servo_reset", "voltage_sag")   # faults that hit every servo unless one is named


class TwinServer:
    def __init__(self, config: dict):
        self.config = config
        self.frames_dir = Path(config["frames_dir"])
        cams = config["cameras"]
        self._power_on(list(config.get("faults") or []), int(config.get("seed", 0)))
        self.adapter_latency_s = float(config.get("adapter_latency_ms", ADAPTER_LATENCY_MS)) / 1000.0
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.master, self.slave = os.openpty()
        tty.setraw(self.slave)
        os.set_blocking(self.master, False)
        self.port = os.ttyname(self.slave)
        self.unplugged = False
        self.camera_names = list(cams)
        self.state = SceneState(self.frames_dir / "state.bin", self.sim.model.nq, len(cams), create=True)
        self.state.write_qpos(self.sim.data.qpos)
        self.lag_s = 0.0
        self.priority = "normal"
        self.steps = 0
        self.packets = 0
        self._rx = bytearray()
        self._ctrl = bytearray()
        self.wire_log = WireLog(config["wire_log"]) if config.get("wire_log") else None

    def _power_on(self, faults: list[dict], seed: int) -> None:
        """The scene, the arm and the fault plan as at the twin's start: the arm at its rest pose
        on new servos (EEPROM as shipped, the calibration of the config), the cube parked."""
        from orchestrator.design.protocol import Cube, Mark, Success
        from orchestrator.rigs.profile import RigProfile
        from orchestrator.rigs.sim import SimRig
        from orchestrator.rigs.twin.arm import TwinArm

        config = self.config
        profile = RigProfile.model_validate({
            "robot": {"type": "sim_so101"}, "rest_pose": config.get("rest_pose") or {},
            "cameras": {n: {"type": "sim", "width": c["render_width"], "height": c["render_height"],
                            "fps": c["fps"]} for n, c in config["cameras"].items()}})
        self.sim = SimRig(profile, fps=int(config.get("fps", 30)), success=Success(**config.get("success", {})))
        self.cube = Cube(**config.get("cube", {}))
        self.sim.place_cube(Mark(**PARKED_CUBE), self.cube)
        self.sim.go_to_rest()
        self.arm = TwinArm(self.sim, config.get("user_calibration"), supply_v=float(config.get("supply_v", 12.0)),
                           zero_at_homing=bool(config.get("user_calibration")))
        self.faults = FaultPlan(faults, seed)
        for fault in self.faults.from_start():     # a calibration error is there from power-up
            self.arm.set_calibration_error(servo_index(fault["servo"]), float(fault["deg"]))

    def _restart(self, request: dict) -> dict:
        """The `restart` op: this twin as if it had stopped and a new one had started on the same
        port and camera files (a new arm, scene and fault plan: `faults`, `seed`; the clock, the
        counters and the cameras' fault states from zero). The wire log gets its exit line, as
        when the twin stops, and `wire_log` (a path, or None) is the next one. Refused once the
        USB cable is pulled (`usb_unplug`: the port is gone)."""
        if self.unplugged:
            return {"ok": False, "error": "restart: the USB cable is unplugged (usb_unplug); start a new twin"}
        faults = list(request.get("faults") or [])
        problems = fault_problems(faults, tuple(self.camera_names))
        if problems:
            return {"ok": False, "error": f"restart: {problems[0]}"}
        self._close_wire_log()
        self._power_on(faults, int(request.get("seed", 0)))
        self.wire_log = WireLog(request["wire_log"]) if request.get("wire_log") else None
        for i in range(len(self.camera_names)):
            self.state.set_camera_state(i, LIVE)
            self.state.set_camera_fps(i, 0.0)
        self.state.write_qpos(self.sim.data.qpos)
        self._rx.clear()
        self.t0, self.epoch0 = time.monotonic(), time.time()
        self.steps, self.packets, self.lag_s = 0, 0, 0.0
        return {"ok": True}

    # ------------------------------------------------------------ main loop
    def serve(self) -> None:
        parent = int(self.config.get("parent_pid") or os.getppid())
        # A profile without cameras (the servo-only tests): no render process to start or to feed.
        self.renderer = self._start_renderer() if self.config["cameras"] else None
        self._say({"ready": True, "port": self.port, "pid": os.getpid(), "priority": self.priority,
                   "render_priority": self.render_priority if self.renderer else None,
                   "render_pid": self.renderer.pid if self.renderer else None,
                   "frames_dir": str(self.frames_dir), "calibration": self.arm.cal,
                   "user_calibration": bool(self.config.get("user_calibration"))})
        self.t0, self.epoch0 = time.monotonic(), time.time()
        next_parent_check = self.t0 + PARENT_CHECK_S
        try:
            while not self.stop.is_set():
                fds = [0] + ([] if self.unplugged else [self.master])
                ready, _, _ = select.select(fds, [], [], 0.002)
                self._advance()
                if self.master in ready and not self.unplugged:
                    self._serve_bus()
                if 0 in ready:
                    self._serve_control()
                now = time.monotonic()
                if now >= next_parent_check:
                    next_parent_check = now + PARENT_CHECK_S
                    if os.getppid() != parent:
                        break
        finally:
            self.stop.set()
            self._close()

    def _advance(self) -> None:
        dt = self.arm.dt
        due = int((time.monotonic() - self.t0) / dt)
        behind = due - self.steps
        if behind * dt > MAX_LAG_S:
            skipped = behind - int(MAX_LAG_S / dt)
            self.lag_s += skipped * dt
            self.steps += skipped
            self.arm.t_s += skipped * dt
            behind -= skipped
        if behind <= 0:
            return
        with self.lock:
            for _ in range(behind):
                self.arm.step()
            self.state.write_qpos(self.sim.data.qpos)
            self._log_events()
        self.steps += behind

    def _log_events(self) -> None:
        """The arm's overload unloads, power cycles and finished stalls into the wire log."""
        events = self.arm.take_events()
        if not self.wire_log:
            return
        for event in events:
            if "stall" in event:
                self.wire_log.line(event["stall"].line(self.epoch0))
            else:
                self.wire_log.line({"t": round(self.epoch0 + event.pop("t_s"), 6), **event})

    # ------------------------------------------------------------ the bus
    def _serve_bus(self) -> None:
        try:
            data = os.read(self.master, 4096)
        except BlockingIOError:
            return
        except OSError:
            return
        t_in, wall_in = time.monotonic(), time.time()
        self._rx += data
        for packet in split_packets(self._rx):
            self.packets += 1
            if self.wire_log:
                self.wire_log.received(packet, wall_in)
            if len(packet) > 5 and packet[4] == INST_SYNC_WRITE and packet[5] == REG["Goal_Position"][0]:
                self.faults.step += 1
            self._apply_faults()
            if self.unplugged:
                return
            with self.lock:
                reply = self.arm.chain.handle(packet)
            if not reply:
                continue
            reply = self._wire_faults(reply, packet)
            delay = self.arm.servo(packet[2] - 1).get("Return_Delay_Time") * 2e-6 if packet[2] <= 6 else 0.0
            due = t_in + wire_time_s(len(packet)) + delay + wire_time_s(len(reply)) + self.adapter_latency_s
            pause = due - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            try:
                os.write(self.master, reply)
            except OSError:
                continue
            if self.wire_log:
                self.wire_log.sent(reply, packet, time.time())

    def _wire_faults(self, reply: bytes, request: bytes) -> bytes:
        out = bytearray()
        for status in split_packets(bytearray(reply)):
            fate = self.faults.status_fate()
            if fate != "ok" and self.wire_log:
                self.wire_log.fault(f"{fate}_status", servo=[status[2]])
            if fate == "drop":
                continue
            if fate == "corrupt":
                status = status[:-1] + bytes([status[-1] ^ 0x5A])
            out += status
        return bytes(out)

    def _apply_faults(self, now: list[dict] | None = None) -> None:
        for fault in (self.faults.due() if now is None else now):
            kind, sid = fault["kind"], fault.get("servo_id")
            if self.wire_log:
                hit = {"servo": [sid] if sid else list(range(1, 7))} if "servo" in fault or kind in SERVO_WIDE else {}
                self.wire_log.fault(kind, **hit, **{k: v for k, v in fault.items()
                                                    if k not in ("kind", "servo", "servo_id")})
            with self.lock:
                if kind in ONE_SERVO:
                    self._servo_fault(kind, servo_index(fault["servo"]), fault)
                elif kind == "servo_reset":
                    for i in ([sid - 1] if sid else range(6)):
                        self.arm.power_up(i)
                elif kind == "voltage_sag":
                    self.arm.set_voltage(float(fault["volts"]))
                elif kind == "usb_unplug":
                    self._unplug()
                elif kind == "camera_slow" and fault["camera"] in self.camera_names:
                    self.state.set_camera_fps(self.camera_names.index(fault["camera"]), float(fault["fps"]))
                elif kind in ("camera_freeze", "camera_disconnect") and fault["camera"] in self.camera_names:
                    self.state.set_camera_state(self.camera_names.index(fault["camera"]),
                                                FROZEN if kind == "camera_freeze" else DISCONNECTED)

    def _servo_fault(self, kind: str, i: int, fault: dict) -> None:
        """A fault of one servo (`ONE_SERVO`), the `i`th (0-based)."""
        if kind == "servo_silent":
            self.arm.servo(i).mute = True
        elif kind == "overload":
            self.arm.overload_unload(i, cause="fault")
        elif kind == "calibration_offset_deg":
            self.arm.set_calibration_error(i, float(fault["deg"]))
        elif kind == "overheat":
            self.arm.temperature[i] = float(self.arm.servo(i).get("Max_Temperature_Limit"))
            self.arm.release(i)
            self.arm.servo(i).error |= ERR_OVERHEAT

    def _unplug(self) -> None:
        self.unplugged = True
        for fd in (self.master, self.slave):
            try:
                os.close(fd)
            except OSError:
                pass

    # ------------------------------------------------------------ control channel
    def _say(self, message: dict) -> None:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()

    def _serve_control(self) -> None:
        data = os.read(0, 65536)
        if not data:
            self.stop.set()
            return
        self._ctrl += data
        while b"\n" in self._ctrl:
            line, _, rest = bytes(self._ctrl).partition(b"\n")
            self._ctrl = bytearray(rest)
            try:
                request = json.loads(line)
                self._say(self._answer(request))
            except Exception as exc:  # noqa: BLE001 - the orchestrator gets the cause
                self._say({"ok": False, "error": f"{type(exc).__name__}: {exc}"})

    def _answer(self, request: dict) -> dict:
        from orchestrator.design.protocol import Cube, Mark

        op = request.get("op")
        if op == "inject":   # a fault now, before the next packet, whatever the step (tests, bench/safety_matrix.py)
            fault = dict(request["fault"])
            problems = fault_problems([fault], tuple(self.camera_names))
            if problems:
                return {"ok": False, "error": problems[0]}
            self._apply_faults([{**fault, "servo_id": servo_id(fault.get("servo"))}])
            return {"ok": True}
        with self.lock:
            if op == "place":
                self.cube = Cube(**request.get("cube", {}))
                self.sim.place_cube(Mark(**request["mark"]), self.cube)
                return {"ok": True}
            if op == "begin":
                self.sim.restart_episode_clock()
                self.faults.begin_episode()
                return {"ok": True, "episode": self.faults.episode}
            if op == "end":
                facts = self.sim.end_episode()
                return {"ok": True, "physics_success": facts.physics_success, "max_lift_m": facts.max_lift_m,
                        "time_to_success_s": facts.time_to_success_s, "safety_events": facts.safety_events,
                        "ladder": facts.ladder, "longest_hold_s": facts.longest_hold_s,
                        "extra": {**facts.extra, "twin_lag_s": round(self.lag_s, 4)}}
            if op == "state":
                return {"ok": True, "joints_deg": [float(v) for v in self.sim.joint_positions()],
                        "torque": [bool(t) for t in self.arm.torque_on], "lag_s": self.lag_s,
                        "sim_s": self.steps * self.arm.dt, "wall_s": time.monotonic() - self.t0,
                        "packets": self.packets, "cube": list(self.sim.cube_pose()),
                        "temperature": [float(t) for t in self.arm.temperature],
                        "torque_nm": [float(loop.torque_nm) for loop in self.arm.loops],
                        "protected": [bool(loop.protected) for loop in self.arm.loops],
                        "status": [int(self.arm.servo(i).error) for i in range(6)],
                        "overload_latched": [bool(b) for b in self.arm.latched],
                        **self._stall_state()}
            if op == "hold":   # a hand on the arm (tests): {"joints": {name: degrees or null}}; {} lets go
                joints = request.get("joints") or {}
                unknown = [n for n in joints if n not in ARM_JOINTS or n == "gripper"]
                if unknown:
                    return {"ok": False, "error": f"hold: no arm joint {unknown[0]!r}"}
                self.arm.hold(joints)
                return {"ok": True}
            if op == "power_cycle":
                self.arm.power_cycle()
                self._log_events()
                return {"ok": True}
            if op == "restart":
                return self._restart(request)
            if op == "quit":
                self.stop.set()
                return {"ok": True}
        return {"ok": False, "error": f"unknown op {op!r}"}

    def _stall_state(self) -> dict:
        """`stall_s` (each joint's present stall, seconds) and `stalls` (every recorded stall, the
        ones going on last, each as its wire-log line: `stalls.Stall.line`)."""
        arm = self.arm
        recorded = arm.stalls.finished + arm.stalls.ongoing(arm.t_s, arm.stall_nm)
        return {"stall_s": [round(s, 4) for s in arm.stalls.seconds_now(arm.t_s)],
                "stalls": [stall.line(self.epoch0) for stall in recorded]}

    # ------------------------------------------------------------ cameras
    def _start_renderer(self) -> subprocess.Popen:
        """The render process (`render.py`); returns once its frame files exist."""
        config = {"cameras": self.config["cameras"], "frames_dir": str(self.frames_dir),
                  "cube": self.cube.model_dump()}
        proc = subprocess.Popen([sys.executable, "-m", "orchestrator.rigs.twin.render", json.dumps(config)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, close_fds=True)
        assert proc.stdout is not None   # stdout=PIPE
        ready = proc.stdout.readline().split(maxsplit=1)
        if not ready or ready[0] != "ready":
            proc.wait()
            raise RuntimeError(f"the twin's camera process did not start (exit code {proc.returncode})")
        self.render_priority = ready[1].strip() if len(ready) > 1 else "normal"
        return proc

    def _close_wire_log(self) -> None:
        """The stalls still going on and the exit line (the registers now) into the wire log, which closes."""
        if self.wire_log:
            self._log_events()
            for stall in self.arm.stalls.ongoing(self.arm.t_s, self.arm.stall_nm):
                self.wire_log.line(stall.line(getattr(self, "epoch0", time.time())))
            self.wire_log.exit(**self.arm.registers_now())

    def _close(self) -> None:
        with self.lock:
            self._close_wire_log()
        if not self.unplugged:
            self._unplug()
        renderer = getattr(self, "renderer", None)
        if renderer is not None:
            renderer.stdin.close()
            try:
                renderer.wait(timeout=5)
            except subprocess.TimeoutExpired:
                renderer.kill()
        self.state.close()
        for path in [*self.frames_dir.glob("*.frame"), self.frames_dir / "state.bin"]:
            path.unlink(missing_ok=True)
        shutil.rmtree(self.frames_dir, ignore_errors=True)
        if self.config.get("home"):
            shutil.rmtree(self.config["home"], ignore_errors=True)


def prioritise() -> str:
    """Let the servos answer on time on a busy machine: LeRobot gives a reply ~34 ms (a write, a
    sync read) before it gives up, and a late reply then shifts every later one by a packet.
    Real servos have their own microcontrollers; the twin asks for a real-time round-robin
    priority (it sleeps in `select` between packets and uses a few percent of a core), else a
    higher nice level, else runs as it is (returns which)."""
    try:
        os.sched_setscheduler(0, os.SCHED_RR, os.sched_param(REALTIME_PRIORITY))
        return "realtime"
    except (PermissionError, AttributeError, OSError):
        pass
    try:
        os.nice(-10)
        return "nice -10"
    except (PermissionError, OSError):
        return "normal"


def main(argv: list[str]) -> int:
    config = json.loads(argv[0])
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C is the orchestrator's to handle
    server = TwinServer(config)
    server.priority = prioritise()
    server.serve()
    return 0
