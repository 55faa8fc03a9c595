"""Rig profiles for tests: an SO-101 on the fake Feetech bus with video files as cameras."""

from __future__ import annotations

from pathlib import Path

import yaml

REST = {"shoulder_pan.pos": 0, "shoulder_lift.pos": -100, "elbow_flex.pos": 100,
        "wrist_flex.pos": 60, "wrist_roll.pos": 0, "gripper.pos": 30}  # gripper open at rest
CAMERAS = {"front": (48, 64), "wrist": (24, 32)}  # name: (height, width)


def write_videos(directory: Path, cameras: dict[str, tuple[int, int]] = CAMERAS, frames: int = 20) -> dict[str, Path]:
    from support.video import write_test_video

    return {name: write_test_video(Path(directory) / f"{name}.mp4", width=w, height=h, frames=frames)
            for name, (h, w) in cameras.items()}


def write_rig(path: Path, port: str, calibration_dir: Path, videos: dict[str, Path], *,
              cameras: dict[str, tuple[int, int]] = CAMERAS, fps: int = 30, robot_id: str = "lab_arm",
              max_relative_target: float | None = 3.0, camera_extra: dict | None = None) -> Path:
    """Write a rig profile YAML (video paths relative to the profile, as a user would)."""
    path = Path(path)
    robot = {"type": "so101_follower", "port": port, "id": robot_id, "calibration_dir": str(calibration_dir)}
    if max_relative_target is not None:
        robot["max_relative_target"] = max_relative_target
    cams = {}
    for name, (h, w) in cameras.items():
        cams[name] = {"type": "video", "index_or_path": str(Path(videos[name]).resolve().relative_to(path.parent.resolve())),
                      "width": w, "height": h, "fps": fps, **((camera_extra or {}).get(name, {}))}
    path.write_text(yaml.safe_dump({"robot": robot, "cameras": cams, "rest_pose": REST}, sort_keys=False))
    return path


def plug_in_arm(directory: Path, monkeypatch, robot_id: str = "lab_arm"):
    """A fake calibrated SO-101 on `<directory>/ttyACM0` (device node present), its calibration file
    in `<directory>/cal`: (arm, port, calibration dir)."""
    from fakes import feetech

    port = str(Path(directory) / "ttyACM0")
    open(port, "w").close()
    arm = feetech.FakeFeetechArm(port, calibration=feetech.default_calibration())
    feetech.install(monkeypatch, arm)
    cal_dir = Path(directory) / "cal"
    feetech.write_calibration_file(cal_dir, robot_id)
    return arm, port, cal_dir


def camera_rate_as_configured(monkeypatch) -> None:
    """For tests about what the arm is told, not about the camera preflight (tests/test_preflight.py
    and tests/test_twin_camera.py measure the rate): the preflight still opens every camera, but
    takes its frame rate as configured instead of counting frames for a second per camera (seconds
    of every run, and on a loaded machine the video decoder can fall under the 90 % bar)."""
    from orchestrator.rigs.so101 import hardware_checks

    monkeypatch.setattr(hardware_checks, "measure_camera", lambda camera, seconds: float(camera.fps))
