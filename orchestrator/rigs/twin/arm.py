"""The twin's six STS3215 servos driving the MuJoCo SO-101 (`rigs.sim.SimRig`'s scene).

Encoder ticks. Each servo's encoder sits on its output shaft and reads `raw` (0-4095, 4096 a
turn), fixed by how the arm was assembled: the twin's calibration (`so101_twin_calibration.json`,
what `lerobot-calibrate` would write for this arm) puts the middle of each arm joint's range at
the simulated joint's zero, and the gripper's range on the gripper joint's range, so LeRobot's
degrees (`(ticks - mid) * 360 / 4095`) equal the simulated rig's. With the user's own calibration
(`zero_at_homing`, `--twin` when the profile's id has a calibration file) tick 2047 is the
simulated joint's zero instead, as on the user's arm, where LeRobot's calibration made the pose
chosen as the middle read 2047: a pose in degrees is then the pose it is on that arm (the
gripper's 0-100 still spans the gripper joint's range). The servo reports
`Present_Position = raw - Homing_Offset` (mod 4096) with the `Homing_Offset` register as it is
now (write +500 and the reading drops by 500), and takes `Goal_Position` in the same frame.

Registers honoured (each through `feetech.ServoChain`'s register file; the loop: `sts3215.py`):
- `Goal_Position`: sign-magnitude (bit 15, as LeRobot encodes it), clamped to
  `Min/Max_Position_Limit`; approached with `Goal_Velocity` and `Acceleration`;
- `P_Coefficient`, `D_Coefficient` (stiffness, damping), `Torque_Limit` (the active limit; it is
  loaded from `Max_Torque_Limit` at power-up, so a `Max_Torque_Limit` write takes effect at the
  next power-up, `servo_reset`), `Protection_Current`, `Overload_Torque`, `Protection_Time`,
  `Protective_Torque` (the overload protection; Status bit 5);
- `Lock` (EEPROM addresses 0-39): written while Lock is 0 they are saved and survive a power-up;
  written while Lock is 1 they act at once but the power-up restores the saved values;
- the supply (`supply_v` 12 or 7.4: the STS3215 version's stall torque; a sag scales torque by
  volts / nominal, error bit 0 below `Min_Voltage_Limit` and the servo unloads);
- `Unloading_Condition` (19): which protections unload the servo, one bit each as in Status
  (Feetech's STS memory table: "the corresponding bit set to 1 enables the protection"; bit 0
  voltage, 2 temperature, 3 current, 5 overload; the factory value is 44, bits 2, 3 and 5, and
  LeRobot does not write it). Bit 5 set: when the overload protection trips (`sts3215.py`) the
  servo unloads, torque off and the joint limp, and Status bit 5 stays set until the servo powers
  up again (`power_cycle`, the `servo_reset` fault): a Torque_Enable 1 written meanwhile is
  refused (it reads back 0), as an SO-101 whose servo tripped needs its power cycled (a gripper
  flashing red that answers every packet with "Overload error" until then: the bug report
  "Identify overloads gripper", open-edge-platform/physical-ai-studio on GitHub). Bit 5 clear: the protection limits the output to `Protective_Torque` instead,
  until the load goes. Bit 2 set: an overheated servo unloads (clear: it only reports bit 2).
  The twin's gripper ships with 12 (bit 5 clear), its arm joints with the factory's 44 (an
  assumption: `docs/twin.md`);
- a calibration error (`calibration_offset_deg`, the fault plan): the joint stands that many
  degrees further than its encoder says (`set_calibration_error`).

A stall (the servo at its torque limit, the joint not moving: `stalls.py`) is recorded with its
start, length and load.

The torque-enable rule (one rule, the rig's resume code relies on nothing else): while torque
is off the servo drives nothing and `Goal_Position` reads the present position; switching
torque on holds the position the joint is at that moment (goal := present), whatever goal was
written before. A Goal_Position written while torque is off is overwritten by the next read.

Feedback: `Present_Load` (0.1 % of stall torque), `Present_Current` (6.5 mA units),
`Present_Velocity` (ticks/s), `Present_Temperature` (first-order thermal model heated by load
squared), `Status` (alarm bits).
"""

from __future__ import annotations

import json
import math
from importlib import resources

import numpy as np

from orchestrator.rigs.twin import sts3215
from orchestrator.rigs.twin.feetech import (
    ERR_OVERHEAT,
    ERR_OVERLOAD,
    ERR_VOLTAGE,
    REG,
    ServoChain,
    from_sign_magnitude,
    sign_magnitude,
)
from orchestrator.rigs.twin.stalls import StallRecorder

JOINTS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
TICKS_PER_TURN = 4096
TICKS_PER_DEG = 4095 / 360          # LeRobot's DEGREES normalisation (max resolution 4095)
AMBIENT_C = 28.0
THERMAL_TAU_S = 240.0               # cooling time constant
HEAT_C_PER_S = 0.3                  # heating rate at stall torque (steady state: +72 C at stall)
HALF_TURN = 2047                    # LeRobot's set_half_turn_homings: the calibration pose reads this
UNLOAD_OVERHEAT, UNLOAD_OVERLOAD = ERR_OVERHEAT, ERR_OVERLOAD   # Unloading_Condition's bits are Status's
GRIPPER_UNLOADING = 44 & ~UNLOAD_OVERLOAD   # the twin's gripper: its overload protection limits, not unloads
EEPROM_END = 40                     # addresses below are EEPROM (saved while Lock is 0)
LOOP_REGISTERS = {"p": "P_Coefficient", "d": "D_Coefficient", "goal_velocity": "Goal_Velocity",
                  "acceleration": "Acceleration", "torque_limit": "Torque_Limit",
                  "protection_current": "Protection_Current", "overload_torque": "Overload_Torque",
                  "protection_time": "Protection_Time", "protective_torque": "Protective_Torque"}


def shipped_calibration() -> dict[str, dict[str, int]]:
    """The twin arm's calibration, in LeRobot's calibration-file format."""
    text = resources.files(__package__).joinpath("so101_twin_calibration.json").read_text()
    return json.loads(text)


class TwinArm:
    """Servo registers <-> the simulated arm (see the module docstring). `sim` is a connected
    `SimRig`; `step()` advances one physics step with the servos' present behaviour."""

    def __init__(self, sim, calibration: dict | None = None, supply_v: float = 12.0, zero_at_homing: bool = False):
        self.sim = sim
        self.cal = calibration or shipped_calibration()
        self.zero_at_homing = zero_at_homing
        self.model, self.data = sim.model, sim.data
        model = self.model
        self.act = np.array([model.actuator(j).id for j in JOINTS])
        self.qadr = np.array([model.joint(j).qposadr[0] for j in JOINTS])
        self.dadr = np.array([model.joint(j).dofadr[0] for j in JOINTS])
        self.range = np.array([model.joint(j).range for j in JOINTS], dtype=float)
        # the actuators become torque motors: the servos' loops compute the torque
        model.actuator_gainprm[self.act, 0] = 1.0
        model.actuator_biasprm[self.act, :3] = 0.0
        model.actuator_ctrllimited[self.act] = 0
        model.actuator_forcerange[self.act] = [-10.0, 10.0]
        self.dt = float(model.opt.timestep)
        self.supply_v = float(supply_v)
        self.voltage = self.supply_v
        self.torque_on = np.zeros(6, dtype=bool)
        self.hand: dict[int, float] = {}   # joint index -> radians a person's hand holds it at (`hold`)
        self.temperature = np.full(6, AMBIENT_C)
        self.cal_error = np.zeros(6)        # radians the joint stands beyond what its encoder reads
        self.latched = np.zeros(6, dtype=bool)   # an overload unloaded the servo: until it powers up
        self.t_s = 0.0                      # the twin's clock: physics steps (and skipped time), seconds
        self.stalls = StallRecorder(JOINTS)
        self.events: list[dict] = []        # overload unloads and power cycles, for the wire log
        stall = sts3215.stall_torque_nm(self.supply_v)
        self.stall_nm = stall
        self.loops = [sts3215.ServoLoop(self.ticks_per_rad(i), stall) for i in range(6)]
        self.chain = ServoChain(range(1, 7), refresh=self._refresh, written=self._written)
        self._regs_cache: list[sts3215.Registers | None] = [None] * 6
        q = self.joint_rad()
        for i, name in enumerate(JOINTS):
            servo = self.servo(i)
            c = self.cal[name]
            servo.put("Homing_Offset", sign_magnitude(c["homing_offset"], 11))
            servo.put("Min_Position_Limit", c["range_min"])
            servo.put("Max_Position_Limit", c["range_max"])
            servo.put("Present_Voltage", round(self.supply_v * 10))
            if name == "gripper":
                servo.put("Unloading_Condition", GRIPPER_UNLOADING)
            self.loops[i].hold(float(q[i]))
        self.saved = [bytes(self.servo(i).regs[:EEPROM_END]) for i in range(6)]
        for i in range(6):
            self.power_up(i)

    # ------------------------------------------------------------ units
    def joint_rad(self) -> np.ndarray:
        return self.data.qpos[self.qadr].copy()

    def rad_to_ticks(self, i: int, q: float) -> float:
        """Calibrated ticks (Present_Position with the calibration's Homing_Offset) at `q` rad
        (minus the joint's calibration error: the encoder reads it that much short)."""
        c = self.cal[JOINTS[i]]
        q = q - self.cal_error[i]
        if JOINTS[i] == "gripper":
            lo, hi = self.range[i]
            return c["range_min"] + (q - lo) / (hi - lo) * (c["range_max"] - c["range_min"])
        return self._zero_ticks(c) + math.degrees(q) * TICKS_PER_DEG

    def ticks_to_rad(self, i: int, ticks: float) -> float:
        c = self.cal[JOINTS[i]]
        if JOINTS[i] == "gripper":
            lo, hi = self.range[i]
            return lo + (ticks - c["range_min"]) / (c["range_max"] - c["range_min"]) * (hi - lo) + self.cal_error[i]
        return math.radians((ticks - self._zero_ticks(c)) / TICKS_PER_DEG) + self.cal_error[i]

    def set_calibration_error(self, i: int, degrees: float) -> None:
        """Joint `i` stands `degrees` further than its encoder reads (and a goal of x degrees
        takes it to x + `degrees`): a calibration that is off, or a horn that slipped a tooth."""
        self.cal_error[i] = math.radians(float(degrees))

    def _zero_ticks(self, c: dict) -> float:
        """Calibrated ticks at the simulated joint's zero: the middle of the calibrated range (the
        twin's own calibration), or 2047 with a user's (LeRobot's calibration sets Homing_Offset
        so that the pose the user chose as the middle reads 2047: taken as the model's zero)."""
        return HALF_TURN if self.zero_at_homing else (c["range_min"] + c["range_max"]) / 2

    def ticks_per_rad(self, i: int) -> float:
        return abs(self.rad_to_ticks(i, 1.0) - self.rad_to_ticks(i, 0.0))

    def _offset_shift(self, i: int) -> int:
        """Homing_Offset register minus the calibration's: what a user's write changed."""
        return from_sign_magnitude(self.servo(i).get("Homing_Offset"), 11) - self.cal[JOINTS[i]]["homing_offset"]

    def present_ticks(self, i: int) -> int:
        return int(round(self.rad_to_ticks(i, float(self.data.qpos[self.qadr[i]])) - self._offset_shift(i))) \
            % TICKS_PER_TURN

    # ------------------------------------------------------------ servo side
    def servo(self, i: int):
        return self.chain.servos[i + 1]

    def _written(self, servo_id: int, addr: int, n: int) -> None:
        i = servo_id - 1
        servo = self.servo(i)
        self._regs_cache[i] = None
        touched = set(range(addr, addr + n))
        if addr < EEPROM_END and servo.get("Lock") == 0:
            end = min(addr + n, EEPROM_END)
            self.saved[i] = self.saved[i][:addr] + bytes(servo.regs[addr:end]) + self.saved[i][end:]
        if REG["Torque_Enable"][0] in touched:
            if servo.get("Torque_Enable") and self.latched[i]:
                servo.put("Torque_Enable", 0)       # refused until the servo powers up
            elif servo.get("Torque_Enable"):
                if not self.torque_on[i]:
                    self.torque_on[i] = True
                    self.loops[i].hold(float(self.data.qpos[self.qadr[i]]))   # the torque-enable rule
                    servo.put("Goal_Position", self.present_ticks(i))
            else:
                self._torque_off(i)
        goal_addr = REG["Goal_Position"][0]
        if touched & {goal_addr, goal_addr + 1} and self.torque_on[i]:
            self.loops[i].goal = self.goal_rad(i, servo.get("Goal_Position"))

    def goal_rad(self, i: int, raw: int) -> float:
        """Joint radians of a Goal_Position register value: sign-magnitude, clamped to the limits."""
        servo = self.servo(i)
        ticks = from_sign_magnitude(raw, 15)
        ticks = min(max(ticks, servo.get("Min_Position_Limit")), servo.get("Max_Position_Limit"))
        return float(np.clip(self.ticks_to_rad(i, ticks + self._offset_shift(i)), *self.range[i]))

    def _torque_off(self, i: int) -> None:
        if self.loops[i].protected and not self.latched[i]:
            self.servo(i).error &= ~ERR_OVERLOAD
        self.torque_on[i] = False
        self.loops[i].hold(float(self.data.qpos[self.qadr[i]]))
        self.data.ctrl[self.act[i]] = 0.0

    def release(self, i: int) -> None:
        """The servo unloads (overheat, overload, brown-out): torque off, as its firmware does
        (the overload protection's Status bit goes with the torque, unless it is latched)."""
        if self.loops[i].protected and not self.latched[i]:
            self.servo(i).error &= ~ERR_OVERLOAD
        self.servo(i).put("Torque_Enable", 0)
        self.torque_on[i] = False
        self.loops[i].hold(float(self.data.qpos[self.qadr[i]]))
        self.data.ctrl[self.act[i]] = 0.0

    def power_up(self, i: int) -> None:
        """Servo `i` (re)starts (the twin's start; a brown-out, the `servo_reset` fault): EEPROM
        as last saved; SRAM at its power-up values: Torque_Enable 0, Torque_Limit loaded from
        Max_Torque_Limit, Acceleration 0, Goal_Velocity 0, Lock 1, Goal_Position the present
        position; Status 0 (the alarms are forgotten)."""
        servo = self.servo(i)
        servo.regs[:EEPROM_END] = self.saved[i]
        self._regs_cache[i] = None
        servo.error = 0
        self.latched[i] = False
        self.release(i)
        servo.put("Torque_Limit", servo.get("Max_Torque_Limit"))
        servo.put("Acceleration", 0)
        servo.put("Goal_Velocity", 0)
        servo.put("Lock", 1)
        self._refresh(i + 1)

    def overload_unload(self, i: int, cause: str = "protection") -> None:
        """Servo `i` unloads on an overload (its protection tripped with Unloading_Condition bit 5
        set, or the `overload` fault): torque off, Status bit 5 latched until it powers up."""
        self.latched[i] = True
        self.servo(i).error |= ERR_OVERLOAD
        self.release(i)
        self.events.append({"event": "overload_unload", "joint": JOINTS[i], "servo": i + 1, "t_s": self.t_s,
                            "cause": cause})

    def power_cycle(self) -> None:
        """The arm's power switched off and on (the twin's `power_cycle` control op): every servo
        powers up (`power_up`): torque off, alarms and the overload latch forgotten."""
        for i in range(6):
            self.power_up(i)
        self.events.append({"event": "power_cycle", "servo": list(range(1, 7)), "t_s": self.t_s})

    def take_events(self) -> list[dict]:
        """Overload unloads, power cycles and finished stalls since the last call (`t_s`: the
        twin's clock; a stall as `stalls.Stall`)."""
        events, self.events = self.events, []
        return events + [{"stall": stall} for stall in self.stalls.take_fresh()]

    def hold(self, joints_deg: dict[str, float | None]) -> None:
        """A person's hand on the arm: each named joint is held at the given angle (degrees, the
        model's and LeRobot's; None: where it is now) whatever its servo does, until `hold({})`
        lets go. The servo still pushes against the hand (its load and current show it)."""
        self.hand = {}
        for name, deg in joints_deg.items():
            i = JOINTS.index(name)
            q = float(self.data.qpos[self.qadr[i]]) if deg is None else math.radians(float(deg))
            self.hand[i] = float(np.clip(q, *self.range[i]))

    def registers_now(self) -> dict[str, list[int]]:
        """Torque_Enable, Goal_Position, Present_Position and Status of servos 1-6, refreshed."""
        out: dict[str, list[int]] = {"torque": [], "goal": [], "present": [], "status": []}
        for i in range(6):
            self._refresh(i + 1)
            servo = self.servo(i)
            for key, reg in (("torque", "Torque_Enable"), ("goal", "Goal_Position"),
                             ("present", "Present_Position"), ("status", "Status")):
                out[key].append(servo.get(reg))
        return out

    def set_voltage(self, volts: float) -> None:
        self.voltage = float(volts)
        for i in range(6):
            self.servo(i).put("Present_Voltage", round(volts * 10))
            low = volts * 10 < self.servo(i).get("Min_Voltage_Limit")
            self.servo(i).error = (self.servo(i).error | ERR_VOLTAGE) if low else (self.servo(i).error & ~ERR_VOLTAGE)
            if low:
                self.release(i)      # brown-out: the servo drops its torque

    def _refresh(self, servo_id: int) -> None:
        i = servo_id - 1
        servo = self.servo(i)
        present = self.present_ticks(i)
        servo.put("Present_Position", present)
        if not self.torque_on[i]:
            servo.put("Goal_Position", present)
        vel = float(self.data.qvel[self.dadr[i]]) * self.ticks_per_rad(i)
        servo.put("Present_Velocity", sign_magnitude(round(vel), 15))
        loop = self.loops[i]
        frac = loop.torque_nm / loop.stall_nm if self.torque_on[i] else 0.0
        servo.put("Present_Load", sign_magnitude(round(frac * 1000), 10))
        servo.put("Present_Current", round(loop.current_a() / sts3215.CURRENT_UNIT_A) if self.torque_on[i] else 0)
        servo.put("Present_Temperature", round(self.temperature[i]))
        servo.put("Moving", int(abs(vel) > 20))
        servo.put("Status", servo.error)

    # ------------------------------------------------------------ physics
    def _loop_registers(self, i: int) -> sts3215.Registers:
        """The loop's registers of servo `i` (decoded again only after a write or a power-up)."""
        cached = self._regs_cache[i]
        if cached is None:
            servo = self.servo(i)
            regs = {field: servo.get(name) for field, name in LOOP_REGISTERS.items()}
            regs["goal_velocity"] &= 0x7FFF
            unload = bool(servo.get("Unloading_Condition") & UNLOAD_OVERLOAD)
            cached = self._regs_cache[i] = sts3215.Registers(**regs, unload_on_overload=unload)
        return cached

    def step(self) -> None:
        """One physics step: each enabled servo's loop sets its joint's torque."""
        q, qdot = self.data.qpos[self.qadr], self.data.qvel[self.dadr]
        ratio = self.voltage / self.supply_v
        for i in range(6):
            if not self.torque_on[i]:
                self.data.ctrl[self.act[i]] = 0.0
                continue
            loop, regs = self.loops[i], self._loop_registers(i)
            was = loop.protected
            self.data.ctrl[self.act[i]] = loop.step(regs, float(q[i]), float(qdot[i]), self.dt, ratio)
            if loop.tripped and regs.unload_on_overload:
                self.overload_unload(i)
            elif loop.protected != was and not self.latched[i]:
                servo = self.servo(i)
                servo.error = servo.error | ERR_OVERLOAD if loop.protected else servo.error & ~ERR_OVERLOAD
        self.sim.step_physics(1)
        self.t_s += self.dt
        for i, loop in enumerate(self.loops):
            stalled = self.stalls.at_stall(bool(self.torque_on[i]), loop.torque_nm, loop.cap_nm, float(qdot[i]))
            self.stalls.update(i, stalled, self.t_s, loop.torque_nm, self.stall_nm)
        for i, q in self.hand.items():   # a hand holds these joints where it put them
            self.data.qpos[self.qadr[i]] = q
            self.data.qvel[self.dadr[i]] = 0.0
        frac = np.array([loop.torque_nm / loop.stall_nm for loop in self.loops]) * self.torque_on
        self.temperature += self.dt * (HEAT_C_PER_S * frac * frac - (self.temperature - AMBIENT_C) / THERMAL_TAU_S)
        for i in range(6):
            limit = self.servo(i).get("Max_Temperature_Limit")
            if self.temperature[i] >= limit and not self.servo(i).error & ERR_OVERHEAT:
                self.servo(i).error |= ERR_OVERHEAT
                if self.servo(i).get("Unloading_Condition") & UNLOAD_OVERHEAT:
                    self.release(i)
