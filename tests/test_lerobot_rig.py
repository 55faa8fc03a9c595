"""The LeRobot rig on a fake Feetech bus: LeRobot's own SOFollower, FeetechMotorsBus and
scservo_sdk run unchanged; only the serial port's bytes are answered by fake servos
(`fakes/feetech.py`). Cameras are video files (`rigs/so101/videocam.py`)."""

from __future__ import annotations

import builtins
import logging

import pytest

from fakes import feetech
from fakes.rigs import REST, plug_in_arm, write_rig, write_videos
from orchestrator.core.errors import BadInput
from orchestrator.rigs.base import Rig
from orchestrator.rigs.device_fault import DeviceFault
from orchestrator.rigs.profile import STATE_KEYS, load_rig
from orchestrator.rigs.so101.clamp_log import CLAMP_MESSAGE


@pytest.fixture
def no_stdin(monkeypatch):
    """LeRobot must never ask anything on stdin (it would hang a campaign)."""
    def refuse(*args, **kwargs):
        raise AssertionError(f"input() called: {args}")

    monkeypatch.setattr(builtins, "input", refuse)


@pytest.fixture
def setup(tmp_path, monkeypatch, no_stdin):
    port = str(tmp_path / "ttyACM0")
    open(port, "w").close()  # the device node exists
    arm = feetech.FakeFeetechArm(port, calibration=feetech.default_calibration())
    feetech.install(monkeypatch, arm)
    cal_dir = tmp_path / "calibration"
    feetech.write_calibration_file(cal_dir, "lab_arm")
    videos = write_videos(tmp_path / "videos")
    rig_path = write_rig(tmp_path / "so101.yaml", port, cal_dir, videos)
    return arm, rig_path, cal_dir, videos


def make_rig(rig_path, **kwargs):
    from orchestrator.rigs.so101.rig import LeRobotRig

    return LeRobotRig(load_rig(rig_path), rest_speed_deg_s=600.0, **kwargs)


def test_so_follower_runs_on_the_fake_bus(setup, caplog):
    arm, rig_path, _, _ = setup
    caplog.set_level(logging.WARNING)
    rig = make_rig(rig_path)
    assert isinstance(rig, Rig) and rig.realtime and rig.camera_names == ("front", "wrist")
    assert type(rig.robot).__name__ == "SOFollower" and rig.robot_type == "so_follower"
    rig.connect()
    try:
        obs = rig.observe()
        assert set(obs) == set(STATE_KEYS) | {"front", "wrist"}
        assert obs["front"].shape == (48, 64, 3) and obs["wrist"].shape == (24, 32, 3)
        assert obs["front"].dtype.name == "uint8"
        assert set(rig.observe(with_images=False)) == set(STATE_KEYS)

        rig.go_to_rest()
        here = rig.observe(with_images=False)
        for key, value in REST.items():
            assert here[key] == pytest.approx(value, abs=2.0), key

        # max_relative_target (3: tests/fakes/rigs.py's default, 90 deg/s at 30 fps) clips a 40-degree jump; act returns what was sent. LeRobot's
        # own per-step clamping warning (which the fast move to rest above also triggers) stays
        # off the terminal (the rig records the clamp); the filter is only in place inside the rig.
        sent = rig.act({"shoulder_pan.pos": here["shoulder_pan.pos"] + 40.0})
        assert not [r for r in caplog.records if r.getMessage().startswith(CLAMP_MESSAGE)]
        logging.warning(CLAMP_MESSAGE + " (outside the rig)")
        assert [r for r in caplog.records if r.getMessage().startswith(CLAMP_MESSAGE)]
        assert sent["shoulder_pan.pos"] == pytest.approx(here["shoulder_pan.pos"] + 3.0, abs=0.2)
        facts = rig.end_episode()
        assert facts.physics_success is None
        assert facts.extra["clipped_steps"] == {"shoulder_pan.pos": 1}
        assert facts.safety_events == ["target_clipped:shoulder_pan"]
        assert rig.end_episode().extra["steps"] == 0
        assert all(s.torque for s in arm.servos.values())
    finally:
        rig.disconnect()
    # torque off on exit (LeRobot's disable_torque_on_disconnect), port closed
    assert not any(s.torque for s in arm.servos.values())
    assert not arm.is_open
    rig.disconnect()  # twice is harmless


def test_missing_calibration_refuses_with_the_calibrate_command(setup):
    arm, rig_path, cal_dir, _ = setup
    (cal_dir / "lab_arm.json").unlink()
    rig = make_rig(rig_path)
    with pytest.raises(BadInput) as err:
        rig.connect()
    (line,) = err.value.problems
    assert (f"lerobot-calibrate --robot.type=so101_follower --robot.port={arm.port} --robot.id=lab_arm "
            f"--robot.calibration_dir={cal_dir}") in line
    assert arm.packets == 0  # never touched the bus


def test_connect_refuses_a_missing_port_and_calibration_together(setup, tmp_path):
    arm, rig_path, cal_dir, _ = setup
    (cal_dir / "lab_arm.json").unlink()
    import os

    os.unlink(arm.port)  # the device node is gone (cable unplugged)
    with pytest.raises(BadInput) as err:
        make_rig(rig_path).connect()
    port_line, cal_line = err.value.problems
    assert f"port {arm.port}: not found" in port_line and "`lerobot-find-port`" in port_line
    assert "lerobot-calibrate --robot.type=so101_follower" in cal_line
    assert arm.packets == 0


def test_motors_with_another_calibration_are_refused(setup):
    arm, rig_path, _, _ = setup
    other = feetech.default_calibration()
    other["elbow_flex"]["range_min"] = 500
    arm.load_calibration(other)
    rig = make_rig(rig_path)
    with pytest.raises(BadInput, match="hold another calibration"):
        rig.connect()
    assert not arm.is_open


@pytest.mark.parametrize("fault", ["unplug", "mute"])
def test_bus_fault_mid_episode_is_a_device_fault(setup, fault):
    arm, rig_path, _, _ = setup
    rig = make_rig(rig_path)
    rig.connect()
    try:
        for step in range(6):
            obs = rig.observe()
            if step == 3:
                getattr(arm, fault)()
                with pytest.raises(DeviceFault) as err:
                    rig.act({k: obs[k] for k in STATE_KEYS})
                break
        fault_exc = err.value
        assert fault_exc.kind == "arm" and "\n" not in str(fault_exc)
        assert arm.port in str(fault_exc) and "USB cable" in fault_exc.check
        with pytest.raises(DeviceFault):
            rig.observe()
        rig.safe_stop()  # never raises
    finally:
        rig.disconnect()  # never raises, cameras released
    assert not any(cam.is_connected for cam in rig.robot.cameras.values())


def test_camera_that_stops_delivering_is_a_device_fault_and_the_arm_still_rests(tmp_path, monkeypatch, no_stdin):
    arm, port, cal = plug_in_arm(tmp_path, monkeypatch)
    rig_path = write_rig(tmp_path / "rig.yaml", port, cal, write_videos(tmp_path),
                         camera_extra={"wrist": {"stop_after_frames": 4}})
    rig = make_rig(rig_path)
    rig.connect()
    try:
        with pytest.raises(DeviceFault) as err:
            for _ in range(200):  # 4 frames at 30 fps, then stale after 0.5 s
                rig.observe()
                rig.robot.cameras["front"].async_read(timeout_ms=1000)
        assert err.value.kind == "camera" and err.value.device == "camera wrist"
        assert "no new frame for" in err.value.cause and "(frozen)" in err.value.cause and "\n" not in str(err.value)
        rig.safe_stop()  # holds where it is
        rig.go_to_rest()  # the bus alone: a frozen camera does not keep the arm from resting
        here = {f"{m}.pos": v for m, v in rig.robot.bus.sync_read("Present_Position").items()}
        assert here["shoulder_lift.pos"] == pytest.approx(REST["shoulder_lift.pos"], abs=2.0)
    finally:
        rig.disconnect()


def test_a_camera_whose_read_thread_ended_is_a_camera_fault_and_is_released(tmp_path, monkeypatch, no_stdin):
    """A decoder that keeps failing ends the read thread (more than ten failures in a row, as
    OpenCVCamera's). The camera stays connected, as OpenCVCamera does, so LeRobot's robot reads
    it and the fault names that camera with its last failure (a camera that called itself
    disconnected made LeRobot's robot say it was not connected: an arm fault), and the rig's
    disconnect releases it."""
    from orchestrator.rigs.so101 import videocam

    arm, port, cal = plug_in_arm(tmp_path, monkeypatch)
    real_decode = videocam.VideoCam._decode

    def decode(self):
        if self.path.name == "wrist.mp4" and self.frames_delivered >= 4:
            raise RuntimeError("decoder lost")
        return real_decode(self)

    monkeypatch.setattr(videocam.VideoCam, "_decode", decode)
    rig = make_rig(write_rig(tmp_path / "rig.yaml", port, cal, write_videos(tmp_path)))
    rig.connect()
    wrist = rig.robot.cameras["wrist"]
    try:
        with pytest.raises(DeviceFault) as err:
            for _ in range(200):
                rig.observe()
                rig.robot.cameras["front"].async_read(timeout_ms=1000)
        assert err.value.kind == "camera" and err.value.device == "camera wrist", err.value
        assert "read thread is not running" in err.value.cause and "decoder lost" in err.value.cause
        assert wrist.is_connected
    finally:
        rig.disconnect()
    assert not wrist.is_connected and wrist._cap is None


def test_video_camera_is_registered_loops_and_resizes(tmp_path):
    from lerobot.cameras import CameraConfig, make_cameras_from_configs

    from orchestrator.rigs.so101.videocam import VideoCam, VideoCamConfig
    from support.video import write_test_video

    clip = write_test_video(tmp_path / "clip.mp4", width=40, height=30, frames=5)
    assert CameraConfig.get_choice_class("video") is VideoCamConfig
    cfg = VideoCamConfig(index_or_path=clip, fps=120, width=20, height=16)
    cam = make_cameras_from_configs({"c": cfg})["c"]
    assert isinstance(cam, VideoCam)
    cam.connect()
    try:
        frames = [cam.async_read(timeout_ms=1000) for _ in range(12)]  # > 5: it looped
        assert all(f.shape == (16, 20, 3) for f in frames)
        assert cam.read_latest().shape == (16, 20, 3)
        cam.freeze()
        try:  # a frame delivered just before the freeze may still be waiting
            cam.async_read(timeout_ms=100)
        except TimeoutError:
            pass
        with pytest.raises(TimeoutError):
            cam.async_read(timeout_ms=100)
    finally:
        cam.disconnect()
    with pytest.raises(ConnectionError, match="not found"):
        VideoCam(VideoCamConfig(index_or_path=tmp_path / "missing.mp4", fps=30, width=8, height=8)).connect()


def test_profile_problems_are_one_line_bad_input(tmp_path):
    from orchestrator.rigs.profile import RigProfile
    from orchestrator.rigs.so101.rig import LeRobotRig

    def profile(robot, cameras=None):
        return RigProfile.model_validate({"robot": robot, "cameras": cameras or {}})

    with pytest.raises(BadInput, match="unknown LeRobot robot type 'so999_follower'.*so101_follower"):
        LeRobotRig(profile({"type": "so999_follower", "port": "/dev/x"}))
    with pytest.raises(BadInput, match="'torque_limit' is not a field of LeRobot's SOFollowerRobotConfig"):
        LeRobotRig(profile({"type": "so101_follower", "port": "/dev/x", "torque_limit": 3}))
    with pytest.raises(BadInput, match="camera top: type 'sim'"):
        LeRobotRig(profile({"type": "so101_follower", "port": "/dev/x"},
                           {"top": {"type": "sim", "width": 8, "height": 8, "fps": 30}}))
    rig = LeRobotRig(profile({"type": "so100_follower", "port": "/dev/x", "id": "a",
                              "disable_torque_on_disconnect": False},
                             {"top": {"type": "opencv", "index_or_path": 2, "width": 640, "height": 480,
                                      "fps": 30, "fourcc": "MJPG"}}))
    assert rig.config.type == "so100_follower" and rig.config.disable_torque_on_disconnect is False
    assert rig.config.cameras["top"].index_or_path == 2 and rig.config.cameras["top"].fourcc == "MJPG"
