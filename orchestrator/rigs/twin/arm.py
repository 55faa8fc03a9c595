"""The twin's six STS3215 servos driven by the MuJoCo SO-101 (`rigs.sim.SimRig`'s scene).

Encoder ticks. Each servo reports `Present_Position` in ticks (0-4095, 4096 a turn) after its
`Homing_Offset` (the STS3215 reports `raw - Homing_Offset`); the twin's calibration
(`so101_twin_calibration.json`, what `lerobot-calibrate` would have written for this arm) puts
the middle of each arm joint's calibrated range at the simulated joint's zero, so LeRobot's
degrees (`(ticks - mid) * 360 / 4095`, `MotorNormMode.DEGREES`) equal the simulated rig's
degrees, and the gripper's 0-100 spans the gripper joint's range as in the simulated rig.

Servo behaviour (STS3215, 12 V: stall torque 2.94 N m as in the Menagerie model's actuators,
no-load speed 0.222 s / 60 deg = 270 deg/s):
- `Goal_Position` (clamped to Min/Max_Position_Limit) is approached at `Goal_Velocity` ticks/s
  (0 = the no-load speed), the Menagerie position actuator following the moving target;
- torque is scaled by `min(Max_Torque_Limit, Torque_Limit) / 1000` and by supply voltage / 12 V;
- `Torque_Enable = 0` removes the actuator's force (gain and bias zero): the joint sags under
  gravity, and `Goal_Position` follows `Present_Position` as on the servo, so re-enabling holds;
- `Present_Load` (0.1 % of stall torque), `Present_Current` (6.5 mA units, 2.7 A at stall),
  `Present_Velocity` (ticks/s) come from the actuator force and joint velocity;
  `Present_Temperature` follows a first-order thermal model heated by load squared.
"""

from __future__ import annotations

import json
import math
from importlib import resources

import numpy as np

from orchestrator.rigs.twin.feetech import ERR_OVERHEAT, ERR_VOLTAGE, REG, ServoChain, sign_magnitude

JOINTS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
TICKS_PER_TURN = 4096
TICKS_PER_DEG = 4095 / 360          # LeRobot's DEGREES normalisation (max resolution 4095)
NO_LOAD_SPEED_DEG_S = 270.0         # 0.222 s / 60 deg
STALL_TORQUE_NM = 2.94
STALL_CURRENT_A = 2.7
CURRENT_UNIT_A = 0.0065
NOMINAL_VOLTAGE = 12.0
AMBIENT_C = 28.0
THERMAL_TAU_S = 240.0               # cooling time constant
HEAT_C_PER_S = 0.3                  # heating rate at stall torque (steady state: +72 C at stall)


def shipped_calibration() -> dict[str, dict[str, int]]:
    """The twin arm's calibration, in LeRobot's calibration-file format."""
    text = resources.files(__package__).joinpath("so101_twin_calibration.json").read_text()
    return json.loads(text)


class TwinArm:
    """Servo registers <-> the simulated arm (see the module docstring). `sim` is a connected
    `SimRig`; `step()` advances one physics step with the servos' present behaviour."""

    def __init__(self, sim, calibration: dict | None = None):
        self.sim = sim
        self.cal = calibration or shipped_calibration()
        self.model, self.data = sim.model, sim.data
        model = self.model
        self.act = np.array([model.actuator(j).id for j in JOINTS])
        self.qadr = np.array([model.joint(j).qposadr[0] for j in JOINTS])
        self.dadr = np.array([model.joint(j).dofadr[0] for j in JOINTS])
        self.range = np.array([model.joint(j).range for j in JOINTS], dtype=float)
        self.gain = model.actuator_gainprm[self.act, 0].copy()
        self.bias = model.actuator_biasprm[self.act, :3].copy()
        self.force = model.actuator_forcerange[self.act].copy()
        self.dt = float(model.opt.timestep)
        self.torque_on = np.zeros(6, dtype=bool)
        self.target = self.joint_rad().copy()
        self.goal = self.target.copy()
        self.temperature = np.full(6, AMBIENT_C)
        self.voltage = NOMINAL_VOLTAGE
        self.chain = ServoChain(range(1, 7), refresh=self._refresh, written=self._written)
        for i, name in enumerate(JOINTS):
            servo = self.chain.servos[i + 1]
            c = self.cal[name]
            servo.put("Homing_Offset", sign_magnitude(c["homing_offset"], 11))
            servo.put("Min_Position_Limit", c["range_min"])
            servo.put("Max_Position_Limit", c["range_max"])
        for i in range(6):
            self._apply_torque(i)

    # ------------------------------------------------------------ units
    def joint_rad(self) -> np.ndarray:
        return self.data.qpos[self.qadr].copy()

    def rad_to_ticks(self, i: int, q: float) -> float:
        """Calibrated ticks (what Present_Position reads) for joint `i` at `q` radians."""
        c = self.cal[JOINTS[i]]
        if JOINTS[i] == "gripper":
            lo, hi = self.range[i]
            return c["range_min"] + (q - lo) / (hi - lo) * (c["range_max"] - c["range_min"])
        return (c["range_min"] + c["range_max"]) / 2 + math.degrees(q) * TICKS_PER_DEG

    def ticks_to_rad(self, i: int, ticks: float) -> float:
        c = self.cal[JOINTS[i]]
        if JOINTS[i] == "gripper":
            lo, hi = self.range[i]
            return lo + (ticks - c["range_min"]) / (c["range_max"] - c["range_min"]) * (hi - lo)
        return math.radians((ticks - (c["range_min"] + c["range_max"]) / 2) / TICKS_PER_DEG)

    def ticks_per_rad(self, i: int) -> float:
        return abs(self.rad_to_ticks(i, 1.0) - self.rad_to_ticks(i, 0.0))

    # ------------------------------------------------------------ servo side
    def servo(self, i: int):
        return self.chain.servos[i + 1]

    def _written(self, servo_id: int, addr: int, n: int) -> None:
        i = servo_id - 1
        touched = set(range(addr, addr + n))
        if touched & {REG["Torque_Enable"][0]}:
            self.torque_on[i] = bool(self.servo(i).get("Torque_Enable"))
            if self.torque_on[i]:
                self.target[i] = self.joint_rad()[i]
            self._apply_torque(i)
        if touched & {REG["Goal_Position"][0], REG["Goal_Position"][0] + 1}:
            servo = self.servo(i)
            ticks = servo.get("Goal_Position") & 0x7FFF
            ticks = min(max(ticks, servo.get("Min_Position_Limit")), servo.get("Max_Position_Limit"))
            self.goal[i] = float(np.clip(self.ticks_to_rad(i, ticks), *self.range[i]))
        if touched & set(range(REG["Max_Torque_Limit"][0], REG["Max_Torque_Limit"][0] + 2)) \
                or touched & set(range(REG["Torque_Limit"][0], REG["Torque_Limit"][0] + 2)):
            self._apply_torque(i)

    def _apply_torque(self, i: int) -> None:
        """Actuator gain/bias/force range of joint `i` from its torque registers and the supply."""
        a = self.act[i]
        servo = self.servo(i)
        if not self.torque_on[i]:
            self.model.actuator_gainprm[a, 0] = 0.0
            self.model.actuator_biasprm[a, :3] = 0.0
            return
        self.model.actuator_gainprm[a, 0] = self.gain[i]
        self.model.actuator_biasprm[a, :3] = self.bias[i]
        limit = min(servo.get("Max_Torque_Limit"), servo.get("Torque_Limit"), 1000) / 1000.0
        scale = limit * min(1.0, self.voltage / NOMINAL_VOLTAGE)
        self.model.actuator_forcerange[a] = self.force[i] * scale

    def release(self, i: int) -> None:
        """The servo unloads (overheat, overload, brown-out): torque off, as its firmware does."""
        self.servo(i).put("Torque_Enable", 0)
        self.torque_on[i] = False
        self._apply_torque(i)

    def power_up(self, i: int) -> None:
        """Servo `i` restarts (a brown-out, the `servo_reset` fault): its SRAM registers take their
        power-up values: Torque_Enable 0, Torque_Limit loaded from Max_Torque_Limit, Acceleration
        0, Lock 1, Goal_Position the present position; Status 0 (the alarms are forgotten)."""
        servo = self.servo(i)
        servo.error = 0
        self.release(i)
        servo.put("Torque_Limit", servo.get("Max_Torque_Limit"))
        servo.put("Acceleration", 0)
        servo.put("Lock", 1)
        servo.put("Goal_Velocity", 0)
        self._refresh(i + 1)
        self.goal[i] = self.target[i] = self.joint_rad()[i]

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
            else:
                self._apply_torque(i)

    def _refresh(self, servo_id: int) -> None:
        i = servo_id - 1
        servo = self.servo(i)
        q = float(self.data.qpos[self.qadr[i]])
        present = int(round(self.rad_to_ticks(i, q))) % TICKS_PER_TURN
        servo.put("Present_Position", present)
        if not self.torque_on[i]:
            servo.put("Goal_Position", present)
        vel = float(self.data.qvel[self.dadr[i]]) * self.ticks_per_rad(i)
        servo.put("Present_Velocity", sign_magnitude(round(vel), 15))
        frac = float(self.data.actuator_force[self.act[i]]) / STALL_TORQUE_NM
        servo.put("Present_Load", sign_magnitude(round(frac * 1000), 10))
        servo.put("Present_Current", round(abs(frac) * STALL_CURRENT_A / CURRENT_UNIT_A))
        servo.put("Present_Temperature", round(self.temperature[i]))
        servo.put("Moving", int(abs(vel) > 20))
        servo.put("Status", servo.error)

    # ------------------------------------------------------------ physics
    def step(self) -> None:
        """One physics step: each enabled servo's target moves toward its goal at its speed."""
        for i in range(6):
            if not self.torque_on[i]:
                continue
            speed = self.servo(i).get("Goal_Velocity") & 0x7FFF
            ticks_s = speed if speed else NO_LOAD_SPEED_DEG_S * TICKS_PER_DEG
            max_step = ticks_s / self.ticks_per_rad(i) * self.dt
            delta = self.goal[i] - self.target[i]
            self.target[i] += max(-max_step, min(max_step, delta))
        self.data.ctrl[self.act] = self.target
        self.sim.step_physics(1)
        frac = self.data.actuator_force[self.act] / STALL_TORQUE_NM
        self.temperature += self.dt * (HEAT_C_PER_S * frac * frac - (self.temperature - AMBIENT_C) / THERMAL_TAU_S)
        for i in range(6):
            limit = self.servo(i).get("Max_Temperature_Limit")
            if self.temperature[i] >= limit and not self.servo(i).error & ERR_OVERHEAT:
                self.servo(i).error |= ERR_OVERHEAT
                self.release(i)
