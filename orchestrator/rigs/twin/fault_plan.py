"""Seeded wire faults of the twin: what a real SO-101 does wrong, on demand.

A fault list comes from the rig profile's `twin: {faults: [...], seed: N}` section or from
`--twin-faults FILE` (a YAML file with the same `faults:` / `seed:` keys). Each fault is a
mapping with a `kind`; `at_step` counts the control steps (Goal_Position sync writes) of the
twin's `episode` (1-based count of episodes this twin process has run; default 1):

| kind                | fields                          | what the wire shows                            |
|---------------------|---------------------------------|------------------------------------------------|
| `corrupt_status`    | `rate`                          | a status packet with a wrong checksum          |
| `drop_status`       | `rate`                          | a status packet never sent (the SDK times out) |
| `servo_silent`      | `servo` (1-6 or name), `at_step`| that servo stops answering                     |
| `overload`          | `servo`, `at_step`              | error bit 5 (overload), the servo unloads      |
| `overheat`          | `servo`, `at_step`              | temperature at its limit, error bit 2, unloads |
| `usb_unplug`        | `at_step`                       | the serial device vanishes                     |
| `camera_freeze`     | `camera`, `at_step`             | no new frames (the device stays open)          |
| `camera_disconnect` | `camera`, `at_step`             | the camera is gone                             |
| `voltage_sag`       | `volts`, `at_step`              | Present_Voltage drops, torque scales with it,  |
|                     |                                 | error bit 0 below Min_Voltage_Limit            |
| `camera_slow`       | `camera`, `fps`, `at_step`      | the camera delivers `fps` frames a second      |
| `servo_reset`       | `at_step`, `servo` (default all)| the servo restarts, as after a brown-out:      |
|                     |                                 | Torque_Enable 0, Status 0, SRAM at power-up    |
| `calibration_offset_deg` | `servo`, `deg`             | from the twin's start: the joint stands `deg`  |
|                     |                                 | degrees further than its encoder reads (a     |
|                     |                                 | calibration that is off; no `at_step`)         |

Rates apply from `at_step` (default 0) of that episode on, drawn from `random.Random(seed)`.
A `calibration_offset_deg` fault holds from the twin's start (`FaultPlan.from_start`); injected
(the `inject` control op) it shifts the encoder then, as a horn that slipped a tooth would.
On a real SO-101 a few degrees at the shoulder put the jaws about a centimetre off (3 degrees
times the ~0.3 m from the shoulder_lift axis to the jaw tips: 1.6 cm).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

KINDS = {
    "corrupt_status": {"rate"}, "drop_status": {"rate"}, "servo_silent": {"servo"},
    "overload": {"servo"}, "overheat": {"servo"}, "usb_unplug": set(),
    "camera_freeze": {"camera"}, "camera_disconnect": {"camera"}, "voltage_sag": {"volts"},
    "servo_reset": set(), "camera_slow": {"camera", "fps"}, "calibration_offset_deg": {"servo", "deg"},
}
OPTIONAL = {"at_step", "episode"}
FROM_START = ("calibration_offset_deg",)   # no step: there from the twin's start
MAX_OFFSET_DEG = 30
KIND_OPTIONAL = {"servo_reset": {"servo"}}
SECTION_KEYS = ("faults", "seed", "wire_log", "supply_v", "adapter_latency_ms", "camera_latency_ms")
SUPPLIES_V = (12, 7.4)
SERVO_NAMES = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")


def fault_problems(faults: Any, cameras: tuple[str, ...] = (), where: str = "twin") -> list[str]:
    """One line per bad fault entry (empty when the list is usable)."""
    if faults is None:
        return []
    if not isinstance(faults, list):
        return [f"{where}: faults must be a list of mappings with a `kind`"]
    problems = []
    for n, fault in enumerate(faults, 1):
        at = f"{where}: fault {n}"
        if not isinstance(fault, dict) or fault.get("kind") not in KINDS:
            problems.append(f"{at}: kind must be one of {', '.join(KINDS)}")
            continue
        need = KINDS[fault["kind"]]
        missing = need - set(fault)
        optional = set() if fault["kind"] in FROM_START else OPTIONAL
        unknown = set(fault) - need - optional - KIND_OPTIONAL.get(fault["kind"], set()) - {"kind"}
        if missing:
            problems.append(f"{at} ({fault['kind']}): missing {', '.join(sorted(missing))}")
        if unknown:
            problems.append(f"{at} ({fault['kind']}): unknown field {', '.join(sorted(unknown))}")
        if "rate" in fault and not (isinstance(fault["rate"], (int, float)) and 0 <= fault["rate"] <= 1):
            problems.append(f"{at}: rate must be between 0 and 1")
        if "servo" in fault and servo_id(fault["servo"]) is None:
            problems.append(f"{at}: servo must be 1-6 or one of {', '.join(SERVO_NAMES)}")
        if "camera" in fault and cameras and fault["camera"] not in cameras:
            problems.append(f"{at}: camera {fault['camera']!r} is not in the profile ({', '.join(cameras)})")
        for key in ("at_step", "episode"):
            if key in fault and not (isinstance(fault[key], int) and fault[key] >= (0 if key == "at_step" else 1)):
                problems.append(f"{at}: {key} must be a whole number")
        if "fps" in fault and not (isinstance(fault["fps"], (int, float)) and 0 < fault["fps"] <= 120):
            problems.append(f"{at}: fps must be a frame rate above 0")
        if "deg" in fault and not (isinstance(fault["deg"], (int, float)) and not isinstance(fault["deg"], bool)
                                   and abs(fault["deg"]) <= MAX_OFFSET_DEG):
            problems.append(f"{at}: deg must be a number of degrees between -{MAX_OFFSET_DEG} and {MAX_OFFSET_DEG}")
        if "volts" in fault and not (isinstance(fault["volts"], (int, float)) and 0 <= fault["volts"] <= 14):
            problems.append(f"{at}: volts must be between 0 and 14")
    return problems


def section_problems(section: Any, cameras: tuple[str, ...], where: str,
                     keys: tuple[str, ...] = SECTION_KEYS) -> list[str]:
    """Problems of a `twin:` section or `--twin-faults` file: `{faults: [...], seed: N}` (the
    profile's section also takes `wire_log: FILE`, `supply_v: 12 | 7.4` and
    `adapter_latency_ms: N`, `camera_latency_ms: N`; a faults file has `keys` ("faults", "seed"))."""
    if not isinstance(section, dict):
        return [f"{where}: expected a mapping with faults: and seed:"]
    unknown = set(section) - set(keys)
    problems = [f"{where}: unknown key {k!r} (expected {', '.join(keys)})" for k in sorted(unknown, key=str)]
    if "seed" in section and not isinstance(section["seed"], int):
        problems.append(f"{where}: seed must be a whole number")
    if "wire_log" in section and not (isinstance(section["wire_log"], str) and section["wire_log"].strip()):
        problems.append(f"{where}: wire_log must be a file path")
    if "supply_v" in section and section["supply_v"] not in SUPPLIES_V:
        problems.append(f"{where}: supply_v must be 12 or 7.4 (the STS3215's two versions)")
    for key, top in (("adapter_latency_ms", 50), ("camera_latency_ms", 1000)):
        value = section.get(key, 0)
        if not (isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= top):
            problems.append(f"{where}: {key} must be a number of milliseconds between 0 and {top}")
    return problems + fault_problems(section.get("faults"), cameras, where)


def servo_id(value: Any) -> int | None:
    if isinstance(value, int) and 1 <= value <= 6:
        return value
    if isinstance(value, str) and value in SERVO_NAMES:
        return SERVO_NAMES.index(value) + 1
    return None


def servo_index(value: Any) -> int:
    """The 0-based index of a fault's servo (`servo_id` - 1); ValueError for one `fault_problems`
    would have refused."""
    sid = servo_id(value)
    if sid is None:
        raise ValueError(f"not a servo: {value!r} (1-6 or one of {', '.join(SERVO_NAMES)})")
    return sid - 1


@dataclass
class FaultPlan:
    """The faults of one twin process, consulted by the server as the episode runs."""

    faults: list[dict]
    seed: int = 0
    episode: int = 0            # episodes begun (the first is 1)
    step: int = 0               # Goal_Position sync writes in this episode
    fired: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def begin_episode(self) -> None:
        self.episode += 1
        self.step = 0

    def _active(self, fault: dict) -> bool:
        return fault.get("episode", 1) == self.episode and self.step >= fault.get("at_step", 0)

    def due(self) -> list[dict]:
        """One-shot faults whose step has come (each returned once)."""
        out = []
        for n, fault in enumerate(self.faults):
            if n in self.fired or fault["kind"] in ("corrupt_status", "drop_status", *FROM_START):
                continue
            if self._active(fault):
                self.fired.add(n)
                out.append({**fault, "servo_id": servo_id(fault.get("servo"))})
        return out

    def from_start(self) -> list[dict]:
        """The faults that hold from the twin's start (`FROM_START`: a calibration error)."""
        return [fault for fault in self.faults if fault["kind"] in FROM_START]

    def status_fate(self) -> str:
        """What happens to the next status packet: `ok`, `corrupt` or `drop`."""
        for fault in self.faults:
            if fault["kind"] in ("corrupt_status", "drop_status") and self._active(fault):
                if self.rng.random() < float(fault["rate"]):
                    return "corrupt" if fault["kind"] == "corrupt_status" else "drop"
        return "ok"
