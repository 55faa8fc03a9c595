"""Reading the twin's wire log in tests (the format: `orchestrator/rigs/twin/wire_log.py`).

`WireLog.read(path)` parses a log; its queries answer "what did the bus see?":
- `goals(after=t)`: Goal_Position writes the servos received after `t` (epoch seconds), as
  `(t, servo id, raw value)`, sync writes and single writes alike;
- `torque_writes(after=t)`: Torque_Enable writes `(t, servo id, value)`;
- `presents(after=t)`: the Present_Position values the servos reported `(t, servo id, raw value)`;
- `writes(addr, after=t)`: any register's writes;
- `faults(kind=None)`: the fault lines;
- `events(kind=None)`: the twin's own lines (`stall`, `overload_unload`, `power_cycle`);
  `stalls(min_s=0)`: the stall lines at least `min_s` long (`rigs/twin/stalls.py`);
- `exit`: the last line (`{"exit": true, "torque": [6], ...}`) or None when the twin did not
  write it; `wait_for_exit(path, timeout_s)` polls the file until it appears.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from orchestrator.rigs.twin.feetech import REG
from orchestrator.rigs.twin.wire_log import read_wire_log

GOAL_ADDR = REG["Goal_Position"][0]
PRESENT_ADDR = REG["Present_Position"][0]
TORQUE_ADDR = REG["Torque_Enable"][0]


@dataclass
class WireLog:
    lines: list[dict]

    @classmethod
    def read(cls, path: str | Path) -> WireLog:
        return cls(read_wire_log(path))

    @property
    def packets(self) -> list[dict]:
        return [line for line in self.lines if "dir" in line]

    def writes(self, addr: int, after: float = float("-inf")) -> list[tuple[float, int, int]]:
        """(t, id, value) of every write that starts at `addr`, received after `after` (the
        value is the little-endian integer of the bytes written)."""
        out = []
        for line in self.packets:
            if (line["dir"] == "in" and line["inst"] in ("WRITE", "SYNC_WRITE") and line["addr"] == addr
                    and line["t"] > after and not line.get("bad")):
                out.append((line["t"], line["id"], int.from_bytes(bytes(line["data"]), "little")))
        return out

    def goals(self, after: float = float("-inf")) -> list[tuple[float, int, int]]:
        return [(t, i, v & 0xFFFF) for t, i, v in self.writes(GOAL_ADDR, after)]

    def presents(self, after: float = float("-inf")) -> list[tuple[float, int, int]]:
        """(t, id, raw value) of every Present_Position a servo reported: its status reply to a
        read (or sync read) that starts at that register."""
        return [(line["t"], line["id"], int.from_bytes(bytes(line["data"][:2]), "little") & 0x7FFF)
                for line in self.packets
                if (line["dir"] == "out" and line["inst"] in ("READ", "SYNC_READ") and line["addr"] == PRESENT_ADDR
                    and line["t"] > after and len(line["data"]) >= 2 and not line.get("bad"))]

    def torque_writes(self, after: float = float("-inf")) -> list[tuple[float, int, int]]:
        return [(t, i, v & 0xFF) for t, i, v in self.writes(TORQUE_ADDR, after)]

    def faults(self, kind: str | None = None) -> list[dict]:
        return [line for line in self.lines if "fault" in line and (kind is None or line["fault"] == kind)]

    def events(self, kind: str | None = None) -> list[dict]:
        return [line for line in self.lines if "event" in line and (kind is None or line["event"] == kind)]

    def stalls(self, min_s: float = 0.0) -> list[dict]:
        return [line for line in self.events("stall") if line["s"] >= min_s]

    @property
    def exit(self) -> dict | None:
        return self.lines[-1] if self.lines and self.lines[-1].get("exit") else None


def wait_for_exit(path: str | Path, timeout_s: float = 15.0) -> WireLog:
    """The log once its exit line is written (AssertionError after `timeout_s`)."""
    deadline = time.monotonic() + timeout_s
    while True:
        log = WireLog.read(path) if Path(path).exists() else WireLog([])
        if log.exit is not None:
            return log
        if time.monotonic() > deadline:
            raise AssertionError(f"{path}: no exit line within {timeout_s} s ({len(log.lines)} lines)")
        time.sleep(0.1)
