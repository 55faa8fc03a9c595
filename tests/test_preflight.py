"""Preflight and `orchestrator doctor`: one-line problems, exit 2, nothing started."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fakes import feetech
from fakes.rigs import CAMERAS, write_rig, write_videos
from orchestrator.cli import main
from support.act import make_act_checkpoint

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def bench(tmp_path, monkeypatch):
    """A fake arm whose port exists, its calibration, video cameras; nothing opened yet."""
    port = str(tmp_path / "ttyACM0")
    open(port, "w").close()
    arm = feetech.FakeFeetechArm(port, calibration=feetech.default_calibration())
    feetech.install(monkeypatch, arm)
    cal = tmp_path / "cal"
    feetech.write_calibration_file(cal, "lab_arm")
    videos = write_videos(tmp_path)
    return arm, port, cal, videos


def write_protocol(tmp_path: Path, policy_a: dict) -> Path:
    path = tmp_path / "protocol.yaml"
    path.write_text(yaml.safe_dump({
        "name": "pick-cube-ab", "task": "Pick up the cube", "layout": str(REPO / "layouts" / "grid20.yaml"),
        "policies": {"A": policy_a, "B": {"type": "scripted", "aim_noise_mm": 3}},
        "seed": 1, "episode": {"fps": 30, "duration_s": 12}}, sort_keys=False))
    return path


def problems(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.strip()]


def test_doctor_missing_port_and_calibration(tmp_path, bench, capsys):
    arm, _, _, videos = bench
    rig = write_rig(tmp_path / "rig.yaml", "/dev/ttyNOPE7", tmp_path / "empty_cal", videos)
    assert main(["doctor", "--rig", str(rig), "--out", str(tmp_path), "--camera-seconds", "0.3"]) == 2
    out, err = capsys.readouterr()
    lines = problems(err)
    assert len(lines) == 2, lines
    assert lines[0].startswith("orchestrator: port /dev/ttyNOPE7: not found (serial ports present:")
    assert "`lerobot-find-port`" in lines[0]
    assert lines[1] == ("orchestrator: calibration: no calibration file for so101_follower id 'lab_arm' "
                        f"(looked for {tmp_path / 'empty_cal' / 'lab_arm.json'}); LeRobot would stop and ask on "
                        "stdin mid-campaign: calibrate first with lerobot-calibrate --robot.type=so101_follower "
                        f"--robot.port=/dev/ttyNOPE7 --robot.id=lab_arm --robot.calibration_dir={tmp_path / 'empty_cal'}")
    assert "ok    camera front: front.mp4 64x48 at" in out and "ok    disk:" in out
    assert arm.packets == 0 and not arm.is_open  # nothing started


def test_doctor_refuses_a_checkpoint_that_does_not_fit_the_rig(tmp_path, bench, capsys):
    arm, port, cal, videos = bench
    rig = write_rig(tmp_path / "rig.yaml", port, cal, videos)
    make_act_checkpoint(tmp_path / "ckpt_top", {"top": (48, 64), "wrist": (24, 32)})
    protocol = write_protocol(tmp_path, {"type": "lerobot", "path": "./ckpt_top"})
    assert main(["doctor", "--rig", str(rig), "--protocol", str(protocol), "--out", str(tmp_path),
                 "--camera-seconds", "0.3"]) == 2
    out, err = capsys.readouterr()
    assert problems(err) == ["orchestrator: policy A (./ckpt_top): expects cameras top, wrist but the rig has "
                             "front (64x48), wrist (32x24): neither set contains the other (lerobot-rollout refuses "
                             'this); map the names with rename_map: {"observation.images.<rig camera>": '
                             '"observation.images.<policy camera>"}']
    assert "ok    policy B: scripted" in out and "ok    calibration:" in out and f"ok    port {port}" in out
    assert "ok    rest pose: present shoulder_pan=" in out  # read on the bare bus...
    assert not arm.goal_writes() and not arm.torque_writes()  # ...nothing written


def test_doctor_ready_measures_cameras_and_loads_the_policy(tmp_path, bench, capsys):
    arm, port, cal, videos = bench
    rig = write_rig(tmp_path / "rig.yaml", port, cal, videos)
    make_act_checkpoint(tmp_path / "ckpt", CAMERAS)
    protocol = write_protocol(tmp_path, {"type": "lerobot", "path": "./ckpt", "device": "cpu"})
    assert main(["doctor", "--rig", str(rig), "--protocol", str(protocol), "--out", str(tmp_path),
                 "--camera-seconds", "1.0"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    fps = [float(line.split(" at ")[1].split()[0]) for line in out.splitlines() if line.startswith("ok    camera")]
    assert len(fps) == 2 and all(25 <= f <= 35 for f in fps), out
    assert "ok    policy A: ./ckpt loads (act on cpu, cameras front, wrist, 6 actions)" in out
    assert " MB of weights; warm-up forward pass " in out
    assert out.rstrip().endswith(f"checks passed for {rig}")
    assert not arm.goal_writes() and not arm.torque_writes()  # the present pose was read, nothing written


def test_camera_that_stops_delivering_fails_preflight(tmp_path, bench):
    from orchestrator.core.errors import BadInput
    from orchestrator.rigs.profile import load_rig
    from orchestrator.run.preflight import require_ready, run_preflight

    _, port, cal, videos = bench
    rig = write_rig(tmp_path / "rig.yaml", port, cal, videos, camera_extra={"wrist": {"stop_after_frames": 2}})
    checks = run_preflight(load_rig(rig), None, tmp_path, camera_seconds=0.3)
    with pytest.raises(BadInput) as err:
        require_ready(checks)
    (line,) = err.value.problems
    assert line.startswith("camera wrist: wrist.mp4 does not open or deliver frames (TimeoutError:")
    assert "lerobot-find-cameras opencv" in line


def test_disk_check(tmp_path):
    from orchestrator.run.preflight import check_disk

    assert check_disk(tmp_path / "not" / "yet").ok
    low = check_disk(tmp_path, need_bytes=1 << 60)
    assert not low.ok and " free at" in low.detail and "GB" in low.detail and "--out" in low.detail


def test_doctor_entry_point_bad_rig_file_exit_2(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "orchestrator", "doctor", "--rig", str(tmp_path / "nope.yaml")],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "nope.yaml" in proc.stderr


def test_hardware_modules_import_without_torch_and_sim_doctor_needs_none():
    code = ("import sys; import orchestrator.run.preflight, orchestrator.rigs.device_fault, orchestrator.run.console, "
            "orchestrator.run.console.prompt, orchestrator.rigs.so101.rig, orchestrator.policies.lerobot, "
            "orchestrator.commands.doctor; from orchestrator.cli import main; "
            "rc = main(['doctor', '--rig', 'hardware/sim.yaml', '--protocol', 'protocols/sim_demo.yaml']); "
            "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'lerobot', 'mujoco'}); "
            "print('RC', rc, 'HEAVY', heavy)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert "RC 0 HEAVY []" in proc.stdout, proc.stdout + proc.stderr


class _BareBusRig:
    """What `check_rest_pose` reads of a rig: a bare bus whose present-pose read
    (`hardware_checks.read_present_pose`, replaced by this class's) fails `fails` times."""

    def __init__(self, fails: int):
        from types import SimpleNamespace

        self.fails, self.reads = fails, 0
        self.robot = SimpleNamespace(bus=object())
        self.profile = SimpleNamespace(rest_pose={"shoulder_pan.pos": 0.0})
        self._connected = False

    def rest_pose_problems(self) -> list[str]:
        return []

    def read_present_pose(self) -> dict[str, float]:
        self.reads += 1
        if self.reads <= self.fails:
            raise ConnectionError("Could not connect on port '/dev/pts/0'.")
        return {"shoulder_pan.pos": 1.0}


@pytest.mark.parametrize("fails, ok", [(0, True), (2, True), (3, False)])
def test_the_present_pose_read_is_tried_three_times_before_the_check_fails(fails, ok, monkeypatch):
    from orchestrator.rigs.so101 import hardware_checks

    monkeypatch.setattr(hardware_checks.time, "sleep", lambda s: None)
    rig = _BareBusRig(fails)
    monkeypatch.setattr(hardware_checks, "read_present_pose", _BareBusRig.read_present_pose)
    (check,) = hardware_checks.check_rest_pose(rig)
    assert check.ok is ok and rig.reads == min(fails + 1, hardware_checks.PRESENT_POSE_TRIES)
    if not ok:
        assert "cannot read the arm's present pose" in check.detail and "3 tries" in check.detail
