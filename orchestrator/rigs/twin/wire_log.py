"""The twin's wire log: what the bus saw, one JSON object a line (`twin: {wire_log: FILE}` in
the rig profile, or `--twin-wire-log FILE`).

Lines, in the order they happened (`t` is seconds since the Unix epoch, `time.time()`, so that
another process can compare it with its own clock):
- a packet: `{"t", "dir", "id", "inst", "addr", "len", "data", "error"}`. `dir` is `"in"` for
  an instruction packet the twin received and `"out"` for a status packet it sent. `inst` is
  the instruction's name (`PING`, `READ`, `WRITE`, `SYNC_READ`, `SYNC_WRITE`, or `INST_0xNN`);
  a status packet carries the name of the instruction it answers. `addr` is the register
  address (0 for PING), `len` the number of data bytes (read: how many were asked; write: how
  many were written; status: how many it carries), `data` those bytes (a READ instruction has
  none), `error` the status packet's error byte (0 on instruction lines). A SYNC_WRITE or
  SYNC_READ is logged as one line per servo it addresses, with that servo's `id`; a broadcast
  PING or WRITE has `id` 254. A packet with a bad checksum is logged with `"bad": true` (an
  instruction the servos ignore, or a status packet corrupted by the `corrupt_status` fault).
- a fault the twin injected: `{"t", "fault": kind, ...}` (`servo`: the servo ids it hit).
- what the servos did by themselves: `{"t", "event": kind, ...}`: `stall` (`stalls.py`: a joint
  at its torque limit that did not move; `t` is its start, `s` its length, `load_nm` and
  `load_pct` its peak), `overload_unload` (a servo's overload protection switched its torque
  off, `cause` "protection" or "fault"; Status bit 5 latched), `power_cycle` (the `power_cycle`
  control op: every servo restarted).
- the last line, written whenever the twin ends (normal end, SIGTERM, the orchestrator killed
  or closing the pipe): `{"t", "exit": true, "torque": [6], "goal": [6], "present": [6],
  "status": [6]}`: Torque_Enable, Goal_Position (raw register, sign bit included),
  Present_Position and Status of servos 1-6 as they were when the twin stopped.

`read_wire_log(path)` parses a log (a last line cut short by a kill is dropped).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import IO

from orchestrator.rigs.twin.feetech import (
    INST_PING,
    INST_READ,
    INST_SYNC_READ,
    INST_SYNC_WRITE,
    INST_WRITE,
    checksum,
    split_packets,
)

INST_NAMES = {INST_PING: "PING", INST_READ: "READ", INST_WRITE: "WRITE", INST_SYNC_READ: "SYNC_READ",
              INST_SYNC_WRITE: "SYNC_WRITE", 0x06: "RESET", 0x05: "ACTION", 0x04: "REG_WRITE"}


def inst_name(inst: int) -> str:
    return INST_NAMES.get(inst, f"INST_0x{inst:02X}")


def instruction_lines(packet: bytes, t: float) -> list[dict]:
    """The log lines of one instruction packet (see the module docstring)."""
    sid, inst, params = packet[2], packet[4], list(packet[5:-1])
    bad = checksum(packet[2:-1]) != packet[-1]
    base = {"t": t, "dir": "in", "inst": inst_name(inst)}
    extra = {"bad": True} if bad else {}
    if inst in (INST_SYNC_WRITE, INST_SYNC_READ) and len(params) >= 2:
        addr, n, rest = params[0], params[1], params[2:]
        if inst == INST_SYNC_READ:
            return [{**base, "id": i, "addr": addr, "len": n, "data": [], "error": 0, **extra} for i in rest]
        return [{**base, "id": rest[k], "addr": addr, "len": n, "data": rest[k + 1:k + 1 + n], "error": 0, **extra}
                for k in range(0, len(rest) - n, n + 1)]
    if inst == INST_READ and len(params) >= 2:
        return [{**base, "id": sid, "addr": params[0], "len": params[1], "data": [], "error": 0, **extra}]
    if inst == INST_WRITE and params:
        return [{**base, "id": sid, "addr": params[0], "len": len(params) - 1, "data": params[1:], "error": 0,
                 **extra}]
    return [{**base, "id": sid, "addr": params[0] if params else 0, "len": max(0, len(params) - 1),
             "data": params[1:], "error": 0, **extra}]


def status_lines(reply: bytes, request: bytes, t: float) -> list[dict]:
    """The log lines of the status packets in `reply`, sent in answer to `request`."""
    inst = request[4] if len(request) > 4 else 0
    addr = request[5] if inst in (INST_READ, INST_WRITE, INST_SYNC_READ) and len(request) > 6 else 0
    lines = []
    for status in split_packets(bytearray(reply)):
        line = {"t": t, "dir": "out", "id": status[2], "inst": inst_name(inst), "addr": addr,
                "len": len(status) - 6, "data": list(status[5:-1]), "error": status[4]}
        if checksum(status[2:-1]) != status[-1]:
            line["bad"] = True
        lines.append(line)
    return lines


class WireLog:
    """Writes the lines of the module docstring to `path` (truncated at start). Every batch of
    packets is flushed, so a reader sees it while the twin runs. A write that fails (disk full,
    folder removed) stops the log with one line on stderr; the twin goes on."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[str] | None = self.path.open("w", encoding="utf-8")

    def _write(self, lines: list[dict]) -> None:
        if self._file is None or not lines:
            return
        try:
            self._file.write("".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines))
            self._file.flush()
        except (OSError, ValueError) as exc:
            print(f"twin: wire log {self.path}: {exc}; no more lines are written", file=sys.stderr)
            self._file = None

    def received(self, packet: bytes, t: float) -> None:
        self._write(instruction_lines(packet, t))

    def sent(self, reply: bytes, request: bytes, t: float) -> None:
        self._write(status_lines(reply, request, t))

    def fault(self, kind: str, **fields) -> None:
        self._write([{"t": time.time(), "fault": kind, **fields}])

    def line(self, line: dict) -> None:
        """One line of the twin's own (an `event` line), as it is."""
        self._write([line])

    def exit(self, torque: list[int], goal: list[int], present: list[int], status: list[int]) -> None:
        self._write([{"t": time.time(), "exit": True, "torque": torque, "goal": goal, "present": present,
                      "status": status}])
        self.close()

    def close(self) -> None:
        if self._file is not None:
            try:
                self._file.close()
            except OSError:
                pass
            self._file = None


def read_wire_log(path: str | Path) -> list[dict]:
    """The lines of a wire log, parsed; a last line cut short (the twin killed mid-write) is dropped."""
    lines = []
    for text in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            lines.append(json.loads(text))
        except json.JSONDecodeError:
            continue
    return lines

