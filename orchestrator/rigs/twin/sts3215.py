"""One STS3215's position loop, as its memory table describes it (no MuJoCo here: numbers in,
torque out). `arm.py` runs one `ServoLoop` per joint every physics step.

Sources: Feetech's STS memory table (SRAM/EEPROM addresses as in `feetech.REG`), the STS3215
datasheet (12 V: stall torque 30 kg.cm = 2.94 N m, stall current 2.7 A, no-load 0.222 s/60 deg;
7.4 V version: 19.5 kg.cm = 1.91 N m, about 35 % less) and LeRobot's SO-101 configuration
(`P_Coefficient` 16, `D_Coefficient` 32, `I_Coefficient` 0, `Acceleration` 254; the gripper's
`Max_Torque_Limit` 500, `Protection_Current` 250, `Overload_Torque` 25).

Per step, for an enabled servo (`step`):
1. Profile: the set point moves toward the goal at `Goal_Velocity` (ticks/s; 0 = the no-load
   speed, 270 deg/s) with `Acceleration` (100 ticks/s^2 a unit; 0 = no ramp) as a trapezoid:
   it accelerates, cruises and decelerates to stop on the goal.
2. Demand: `P/16 * 0.0588 N m a tick` of position error (P_Coefficient 16: 1.47 N m, half the
   stall torque, at 25 ticks = 2.2 degrees, as measured on real STS3215s under load) plus
   `D/32 * 2.73 N m s/rad` on the error's rate (the Menagerie SO-101's damping at D 32).
   I_Coefficient is not modelled (LeRobot writes 0).
3. Limits: the demand is clipped to the stall torque times the least of `Torque_Limit / 1000`,
   the current limit `Protection_Current * 6.5 mA / 2.7 A`, `Protective_Torque / 100` while the
   overload protection is on, and the supply voltage over the servo's nominal voltage.
4. Overload protection: while the demand (clipped to Torque_Limit) exceeds `Overload_Torque`
   percent of the stall torque, a timer runs; after `Protection_Time` (10 ms a unit, 200 = 2 s)
   the protection trips (`tripped` turns True for the step it happens; `arm.py` decides what
   follows from `Unloading_Condition`, below). With the overload bit of Unloading_Condition clear
   (`Registers.unload_on_overload` False) the protection limits the output to `Protective_Torque`
   percent, Status bit 5 set; assumption (the memory table does not say how that clears): it
   clears, with the bit, as soon as the demand falls back below `Overload_Torque` or torque is
   switched off; the timer restarts from zero then. With the bit set (the factory's 44) the
   servo unloads instead: `arm.py` switches its torque off and latches bit 5 until a power-up.
5. Backlash: the gear train has `BACKLASH_DEG` (1 degree) of play between the motor and the
   output shaft, where the encoder is. When the torque changes sign the motor side first
   crosses the play, transmitting nothing (`_through_play`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

NO_LOAD_SPEED_DEG_S = 270.0         # 0.222 s / 60 deg
STALL_TORQUE_NM = {12.0: 2.94, 7.4: 1.91}
STALL_CURRENT_A = 2.7
CURRENT_UNIT_A = 0.0065
KP_NM_PER_TICK_AT_P16 = 1.47 / 25    # half the stall torque at 25 ticks of error, P 16
KD_NM_S_PER_RAD_AT_D32 = 2.731       # the Menagerie SO-101 actuators' damping
ACCELERATION_UNIT = 100.0            # ticks/s^2 per unit of Acceleration
PROTECTION_TIME_UNIT_S = 0.01
BACKLASH_DEG = 1.0
ROTOR_INERTIA = 0.028               # kg m^2 at the output (the Menagerie joints' armature)


def stall_torque_nm(supply_v: float) -> float:
    """Stall torque of the STS3215 version for this supply (12 V or 7.4 V)."""
    return STALL_TORQUE_NM[12.0] if supply_v > 9.5 else STALL_TORQUE_NM[7.4]


@dataclass
class Registers:
    """What the loop reads from the servo's registers each step."""

    p: int = 16
    d: int = 32
    goal_velocity: int = 0           # ticks/s, 0 = no-load speed
    acceleration: int = 0            # 100 ticks/s^2 units, 0 = no ramp
    torque_limit: int = 1000         # 0.1 %
    protection_current: int = 500    # 6.5 mA
    overload_torque: int = 80        # %
    protection_time: int = 200       # 10 ms
    protective_torque: int = 20      # %
    unload_on_overload: bool = False  # Unloading_Condition bit 5 (overload): the servo unloads


@dataclass
class ServoLoop:
    """The dynamic state of one servo's loop (radians at the output shaft)."""

    ticks_per_rad: float
    stall_nm: float = STALL_TORQUE_NM[12.0]
    goal: float = 0.0
    setpoint: float = 0.0
    setpoint_v: float = 0.0
    gap: float = 0.0                 # motor side minus output inside the play, [-h, h]
    gap_v: float = 0.0               # its rate while the motor side crosses the play
    over_s: float = 0.0              # time the demand has been above Overload_Torque
    protected: bool = False
    torque_nm: float = 0.0           # the torque transmitted last step
    cap_nm: float = 0.0              # the least of the output limits last step (N m)
    tripped: bool = False            # the overload protection tripped on the last step

    def hold(self, q: float) -> None:
        """Goal and set point := the present position, at rest (torque switched on, or off)."""
        self.goal = self.setpoint = q
        self.setpoint_v = 0.0
        self.over_s, self.protected, self.torque_nm, self.tripped = 0.0, False, 0.0, False

    def _profile(self, regs: Registers, dt: float) -> None:
        vmax = (regs.goal_velocity or NO_LOAD_SPEED_DEG_S * 4095 / 360) / self.ticks_per_rad
        d = self.goal - self.setpoint
        if regs.acceleration <= 0:
            v = math.copysign(min(vmax, abs(d) / dt), d)
        else:
            a = regs.acceleration * ACCELERATION_UNIT / self.ticks_per_rad
            v_want = math.copysign(min(vmax, math.sqrt(2.0 * a * abs(d))), d)
            v = self.setpoint_v + max(-a * dt, min(a * dt, v_want - self.setpoint_v))
        step = v * dt
        if abs(step) >= abs(d) and (d == 0 or step * d >= 0):
            self.setpoint, self.setpoint_v = self.goal, 0.0
        else:
            self.setpoint += step
            self.setpoint_v = v

    def step(self, regs: Registers, q: float, qdot: float, dt: float, volts_ratio: float = 1.0) -> float:
        """Advance the loop by `dt` for the output at `q` rad, `qdot` rad/s; the torque (N m)."""
        self._profile(regs, dt)
        kp = regs.p / 16.0 * KP_NM_PER_TICK_AT_P16 * self.ticks_per_rad
        kd = regs.d / 32.0 * KD_NM_S_PER_RAD_AT_D32
        demand = kp * (self.setpoint - q) + kd * (self.setpoint_v - qdot)
        scale = max(0.0, min(1.0, volts_ratio))
        limited = min(regs.torque_limit, 1000) / 1000.0 * self.stall_nm * scale
        output = max(-limited, min(limited, demand))
        self.tripped = False
        if abs(output) > regs.overload_torque / 100.0 * self.stall_nm * scale:
            self.over_s += dt
            if self.over_s >= regs.protection_time * PROTECTION_TIME_UNIT_S and not self.protected:
                self.protected = self.tripped = True
        else:
            self.over_s, self.protected = 0.0, False
        cap = limited
        cap = min(cap, regs.protection_current * CURRENT_UNIT_A / STALL_CURRENT_A * self.stall_nm)
        if self.protected:
            cap = min(cap, regs.protective_torque / 100.0 * self.stall_nm * scale)
        self.cap_nm = cap
        torque = max(-cap, min(cap, demand))
        self.torque_nm = self._through_play(torque, dt)
        return self.torque_nm

    def _through_play(self, torque: float, dt: float) -> float:
        """The torque that reaches the output: all of it while the gears touch on the side it
        pushes; nothing while the motor side crosses the play, accelerated by that torque
        through the rotor's inertia reflected at the output (`ROTOR_INERTIA`): 1 degree takes
        ~20 ms at full torque and ~60 ms at a tenth of it."""
        half = math.radians(BACKLASH_DEG) / 2.0
        if torque == 0.0:
            return 0.0
        side = math.copysign(half, torque)
        if self.gap == side:
            self.gap_v = 0.0
            return torque
        self.gap_v += torque / ROTOR_INERTIA * dt
        self.gap += self.gap_v * dt
        if (self.gap - side) * side >= 0.0:
            self.gap, self.gap_v = side, 0.0
            return torque
        self.gap = max(-half, min(half, self.gap))
        return 0.0

    def current_a(self) -> float:
        return abs(self.torque_nm) / self.stall_nm * STALL_CURRENT_A
