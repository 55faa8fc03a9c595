"""The twin's `restart` control op, in this process (the server's object without its process and
loop; no camera, no wall clock): after faults that outlast a run (an overload latched, a silent
servo, an overheated one, a sagging supply) a restart makes the twin new on the same port, with
the restart's faults and wire log, and ends the old wire log with its exit line; once the USB
cable is pulled it is refused. The runs that share one twin this way are test_twin_faults.py's."""

from __future__ import annotations

import time

from orchestrator.rigs.twin.feetech import INST_PING, instruction_packet, status_packet
from orchestrator.rigs.twin.server import TwinServer
from orchestrator.rigs.twin.wire_log import read_wire_log

LASTING = [{"kind": "overload", "servo": "elbow_flex"}, {"kind": "servo_silent", "servo": 2},
           {"kind": "overheat", "servo": 4}, {"kind": "voltage_sag", "volts": 3.5}]
NEXT = [{"kind": "overload", "servo": 1, "at_step": 3}]


def _server(tmp_path) -> TwinServer:
    server = TwinServer({"frames_dir": str(tmp_path / "frames"), "cameras": {}, "wire_log": str(tmp_path / "a.jsonl")})
    server.t0, server.epoch0 = time.monotonic(), time.time()   # what `serve` sets before its loop
    return server


def _ask(server: TwinServer, op: str, **fields) -> dict:
    return server._answer({"op": op, **fields})


def test_a_restart_makes_the_twin_new_on_the_same_port_with_its_faults_and_wire_log(tmp_path):
    (tmp_path / "frames").mkdir()
    server = _server(tmp_path)
    try:
        port = server.port
        for fault in LASTING:
            assert _ask(server, "inject", fault=fault)["ok"], fault
        hurt = _ask(server, "state")
        # the control: each fault outlasts the run that met it
        assert hurt["overload_latched"][2] and hurt["status"][2] and hurt["status"][3], hurt["status"]
        assert server.arm.chain.handle(instruction_packet(2, INST_PING)) == b""   # servo 2 silent
        assert server.arm.servo(0).get("Present_Voltage") == 35
        assert _ask(server, "restart", faults=NEXT, seed=3, wire_log=str(tmp_path / "b.jsonl"))["ok"]
        new = _ask(server, "state")
        assert server.port == port
        assert new["status"] == [0] * 6 and new["overload_latched"] == [False] * 6 and new["torque"] == [False] * 6
        assert new["packets"] == 0 and new["temperature"] == [server.arm.temperature[0]] * 6
        assert server.arm.chain.handle(instruction_packet(2, INST_PING)) == status_packet(2, [])
        assert [server.arm.servo(i).get("Present_Voltage") for i in range(6)] == [120] * 6
        assert server.faults.faults == NEXT and server.faults.seed == 3 and server.faults.episode == 0
        old = read_wire_log(tmp_path / "a.jsonl")
        assert [line["fault"] for line in old if "fault" in line] == [f["kind"] for f in LASTING]
        assert old[-1]["exit"] is True and old[-1]["status"][2] != 0   # the registers as the restart found them
        assert (tmp_path / "b.jsonl").is_file() and server.wire_log.path == tmp_path / "b.jsonl"
        assert not _ask(server, "restart", faults=[{"kind": "melt"}])["ok"]   # bad faults: refused, as `inject`
        assert _ask(server, "inject", fault={"kind": "usb_unplug"})["ok"]
        refused = _ask(server, "restart")
        assert refused == {"ok": False, "error": "restart: the USB cable is unplugged (usb_unplug); start a new twin"}
    finally:
        server._close()
    assert read_wire_log(tmp_path / "b.jsonl")[-1]["exit"] is True
