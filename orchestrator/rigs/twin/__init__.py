"""The rehearsal twin: a simulated SO-101 that LeRobot cannot tell from a real one.

A background process (`server.py`) answers Feetech packets for six STS3215 servos on a
pseudo-terminal (`feetech.py`), driven by the MuJoCo SO-101 scene of the simulated rig
(`arm.py`: registers <-> joints; `sts3215.py`: each servo's position loop and protections), and
renders the scene's cameras into shared frames (`shared_frames.py`, `render.py`) that a LeRobot
camera type, `twin` (`twincamera.py`, a name LeRobot's device-class lookup finds), reads.
`client.py` starts and stops it and swaps a real-arm rig profile's port and camera sources for
the twin's (`--twin`). Wire faults: `fault_plan.py`; what the bus saw: `wire_log.py`; LeRobot's
own commands on a standalone twin: `lerobot_entry.py` (with `orchestrator twin`).
"""
