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
    # the step time against the protocol's period (30 Hz: 33.3 ms), over two chunks of 4 (8 steps)
    step = [line for line in out.splitlines() if "step time" in line]
    assert len(step) == 1 and step[0].startswith("ok    policy A: ") and "over 8 steps" in step[0], out
    assert "against the protocol's 33.3 ms period (30 Hz)" in step[0], step
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


def test_the_step_time_against_the_period_warns_a_policy_slower_than_it():
    """`doctor` states the policy's step time against the protocol's period, and warns when a step
    is slower (a tiny ACT on a loaded machine: worst steps of 383-421 ms at 30 Hz lost 2 of 3 steps)."""
    from types import SimpleNamespace

    from orchestrator.run.preflight import _step_time_check

    asked = []

    def policy(times_ms, chunk):
        def step_times(n):
            asked.append(n)
            return [t / 1000 for t in times_ms]
        return SimpleNamespace(action_chunk_steps=chunk, step_times=step_times)

    fast = _step_time_check("A", policy([30.0, 2.0, 2.0, 3.0], 4), 30)
    assert fast.ok and fast.detail == ("step time 2 ms median, 30 ms worst over 4 steps, against the protocol's "
                                     "33.3 ms period (30 Hz)")
    slow = _step_time_check("B", policy([421.0, 3.0, 3.0, 383.0, 3.0], 100), 30)
    assert slow.ok and slow.detail.startswith("warning: step time 3 ms median, 421 ms worst over 5 steps, against the "
                                            "protocol's 33.3 ms period (30 Hz): slower than the period")
    assert asked == [8, 32]   # two chunks of 4 (at least 8); two chunks of 100 capped at 32


def test_a_failed_handshake_is_closed_so_the_next_try_connects_again():
    """LeRobot's `connect` opens the port before its handshake; a handshake that fails left it
    open, and every retry of the present-pose read then failed with DeviceAlreadyConnectedError
    (doctor --twin under load: "cannot read the arm's present pose (... already connected; 3 tries)")."""
    from types import SimpleNamespace

    from orchestrator.rigs.so101.hardware_checks import read_present_pose

    class Bus:
        def __init__(self):
            self.is_connected, self.connects, self.disconnects = False, 0, 0

        def connect(self):
            if self.is_connected:
                raise RuntimeError("FeetechMotorsBus is already connected.")
            self.is_connected = True   # the port opens, then the handshake runs
            self.connects += 1
            if self.connects == 1:
                raise ConnectionError("motor check failed")

        def sync_read(self, register, num_retry=0):
            return {"shoulder_pan": 1.5}

        def disconnect(self, disable_torque=True):
            assert disable_torque is False
            self.is_connected = False
            self.disconnects += 1

    bus = Bus()
    rig = SimpleNamespace(robot=SimpleNamespace(bus=bus), _retries=0)
    with pytest.raises(ConnectionError):
        read_present_pose(rig)
    assert not bus.is_connected and bus.disconnects == 1
    assert read_present_pose(rig) == {"shoulder_pan.pos": 1.5}
    assert (bus.connects, bus.disconnects, bus.is_connected) == (2, 2, False)
