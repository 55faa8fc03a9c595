"""`orchestrator camera calibrate-wrist` on the twin, through LeRobot's real stack (a fresh
process, the operator's Enter on stdin, the twin's hand on the arm between prompts).

The bus must see: torque on every servo until the operator's first Enter (starting the command is
not a go-ahead), then torque off and never on again, and no goal position written after it (the
arm never moves by itself). The hand holds the arm at each of the simulated poses over the sheet
(`sim.calibration_poses`); the twin renders the model's wrist camera, so the geometry written must
be the model's (the joints read through the servos' 4096 steps a turn and LeRobot's calibration).
About 40 s of wall clock at load 20, most of it the twin's and LeRobot's start.
"""

from __future__ import annotations

import math
import subprocess
import sys
import time

import cv2
import numpy as np
import yaml

from orchestrator.rigs.profile import load_rig
from support.campaign_files import SHIPPED_TWIN_RIG, env
from support.operator_run import press_enter, wait_for_line
from support.repo import REPO
from support.twin_time import wait_physics
from support.wirelog import WireLog

VIEWS = 6
JOINTS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll")


def test_the_operator_guides_the_arm_with_torque_off_and_the_models_mount_is_measured(tmp_path):
    import queue
    import threading

    from orchestrator.rigs.twin.client import start_twin
    from orchestrator.sim.calibration_poses import calibration_poses
    from orchestrator.vision.wrist_geometry import load_geometry, model_geometry

    poses = calibration_poses(VIEWS, seed=0)
    log = tmp_path / "wire.log"
    with start_twin(load_rig(SHIPPED_TWIN_RIG), wire_log=log) as twin:
        profile = twin.rig.profile.model_dump(mode="json", exclude_none=True)
        profile["cameras"]["wrist"]["geometry"] = "wrist_geometry.yaml"
        rig = tmp_path / "attached.yaml"
        rig.write_text(yaml.safe_dump(profile))
        proc = subprocess.Popen([sys.executable, "-m", "orchestrator", "camera", "calibrate-wrist", "--rig", str(rig),
                                 "--views", str(VIEWS)], cwd=REPO, env=env(), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()
        seen: list[str] = []
        try:
            twin.request("hold", joints=dict(zip(JOINTS, poses[0], strict=True)))
            wait_for_line(lines, "hold the arm (torque goes off", 90, seen)
            assert twin.request("state")["torque"] == [True] * 6        # connected, held until the go-ahead
            go_ahead = time.time()                                       # the wire log's clock
            press_enter(proc)
            for k, pose in enumerate(poses):
                wait_for_line(lines, f"view {k + 1} of {VIEWS}", 60, seen)
                assert twin.request("state")["torque"] == [False] * 6
                twin.request("hold", joints=dict(zip(JOINTS, pose, strict=True)))
                wait_physics(twin, 0.5)
                press_enter(proc)
                wait_for_line(lines, "fiducials seen", 60, seen)
            wait_for_line(lines, "lay the arm down", 60, seen)
            twin.request("hold", joints={})
            press_enter(proc)
            proc.wait(timeout=120)
        except AssertionError as exc:
            proc.kill()
            raise AssertionError(f"{exc}\nstderr: {proc.stderr.read()[-3000:]}") from None
        finally:
            if proc.poll() is None:
                proc.kill()
        err = proc.stderr.read()
        assert proc.returncode == 0, (err, "".join(seen))
    wire = WireLog.read(log)
    assert not [w for w in wire.torque_writes() if w[0] > go_ahead and w[2] != 0]   # never on again
    assert {servo for t, servo, value in wire.torque_writes(after=go_ahead) if value == 0} >= set(range(1, 7)) \
        or [t for t, servo, value in wire.torque_writes(after=go_ahead) if value == 0 and servo == 0xFE]
    assert not wire.goals(after=go_ahead)                                       # the arm never moved by itself
    truth = model_geometry(320, 240)
    found = load_geometry(tmp_path / "wrist_geometry.yaml")
    moved_mm = 1000.0 * float(np.linalg.norm(found.position - truth.position))
    turned = math.degrees(float(np.linalg.norm(cv2.Rodrigues(found.rotation @ truth.rotation.T)[0])))
    # measured at load 20: 0.41 mm, 0.31 degrees, f +0.24 % (6 views, the intrinsics calibrated);
    # the simulated rig's bounds (tests/test_calibrate_wrist_cli.py)
    assert moved_mm < 1.5 and turned < 1.0, (moved_mm, turned, "".join(seen))
    assert abs(found.f_px / truth.f_px - 1.0) < 0.01
