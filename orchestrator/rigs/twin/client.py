"""Starting, talking to and stopping the twin process; the `--twin` profile swap.

`start_twin(loaded_rig, protocol=None, faults=None) -> Twin` starts `python -m
orchestrator.rigs.twin` in the background and waits for its pseudo-terminal. `Twin.rig` is the
user's rig profile with only its sources swapped: `robot.port` -> the twin's pseudo-terminal,
each camera -> a `twin` camera of the same name, width, height and fps, and
`robot.calibration_dir` -> a folder holding the servos' calibration file under the profile's
`id`: the user's own file for that id when there is one (`user_calibration`: the twin's
encoders are then mapped through it, `arm.py`), else the twin's shipped calibration; the user's
files are read, never written. A `front` camera without a `pose` gets the one the twin renders
it from (`sim.front_camera`), so the judges' zoom and the start-state check know it. Everything
else stays: id, max_relative_target, rest pose, any other LeRobot field.

Lifetime: the twin exits when its stdin closes, which happens when this process exits however
it exits (SIGKILL included: the kernel closes the pipe), and it also watches its parent's pid.
`Twin.close()` (or leaving the `with` block) asks it to quit and waits, then removes its files.
A twin killed outright cannot remove them; the next `start_twin` removes the folders of twins
that no longer run (`remove_dead_twins_files`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from orchestrator.core.errors import BadInput
from orchestrator.core.pids import process_running
from orchestrator.rigs.profile import LoadedRig, RigProfile
from orchestrator.rigs.twin.shared_frames import frames_root

# Cameras are rendered at most this size and scaled up by the camera (cheap on 2 cores).
MAX_RENDER = (320, 240)
START_TIMEOUT_S = 120.0
# The twin's folders (calibration home in the temp dir, frames in /dev/shm), each holding
# OWNER_FILE with the twin's pid so that a later start can remove a killed twin's folders.
HOME_PREFIX, FRAMES_PREFIX, OWNER_FILE = "orchestrator-twin-", "orchestrator-twin-frames-", "twin.pid"


def render_size(width: int, height: int, limit: tuple[int, int] = MAX_RENDER) -> tuple[int, int]:
    scale = min(1.0, limit[0] / width, limit[1] / height)
    return max(16, round(width * scale)), max(16, round(height * scale))


class TwinError(RuntimeError):
    """The twin process did not start or stopped answering."""


class Twin:
    """A running twin process (see the module docstring)."""

    def __init__(self, proc: subprocess.Popen, home: Path, ready: dict, loaded: LoadedRig):
        self.proc = proc
        assert proc.stdin is not None and proc.stdout is not None   # started with stdin=PIPE, stdout=PIPE
        self._stdin, self._stdout = proc.stdin, proc.stdout
        self.home = home
        self.port = ready["port"]
        self.frames_dir = Path(ready["frames_dir"])
        self.priority = ready.get("priority", "normal")            # the servos' process
        self.render_priority = ready.get("render_priority", "normal")   # the cameras' process
        self.render_pid = ready.get("render_pid")
        self.calibration_dir = home / "calibration"
        self.calibration = ready["calibration"]          # the servos' (the user's or the shipped)
        self.own_calibration = bool(ready.get("user_calibration"))
        self._lock = threading.Lock()
        self.rig = swap_sources(loaded, self)

    def request(self, op: str, **fields: Any) -> dict:
        """One control request; raises TwinError when the twin is gone."""
        with self._lock:
            try:
                self._stdin.write(json.dumps({"op": op, **fields}) + "\n")
                self._stdin.flush()
                line = self._stdout.readline()
            except (OSError, ValueError) as exc:
                raise TwinError(f"the twin process stopped ({exc})") from None
        if not line:
            raise TwinError(f"the twin process stopped (exit code {self.proc.poll()})")
        answer = json.loads(line)
        if not answer.get("ok"):
            raise TwinError(f"twin: {answer.get('error')}")
        return answer

    def stalls(self, min_s: float = 0.0) -> list[dict]:
        """The stalls the twin recorded (`stalls.py`: a servo at its torque limit, its joint not
        moving), those still going on last (`"ongoing": true`), each at least `min_s` long:
        `{"t": start (epoch s), "joint", "servo", "s": seconds, "load_nm", "load_pct", "ongoing"}`.
        "No joint at stall for more than 0.3 s without a stop" is `not twin.stalls(0.3)` (the
        gripper closed on the cube stalls by design: leave it out where a grasp is expected)."""
        return [stall for stall in self.request("state")["stalls"] if stall["s"] >= min_s]

    def power_cycle(self) -> None:
        """Switch the arm's power off and on: every servo restarts (torque off, alarms and an
        overload latch cleared; `TwinArm.power_cycle`)."""
        self.request("power_cycle")

    def restart(self, faults: dict | None = None, wire_log: str | Path | None = None) -> None:
        """This twin as if it had stopped and a new one had started on the same port and camera
        files (the server's `restart` op): a new arm at rest, the cube parked, `faults` (a
        `twin:` section or `--twin-faults` file's `{faults: [...], seed: N}`) from now on; the
        wire log gets its exit line and `wire_log` is the next one. Several runs can then share
        one twin process (tests/support/shared_twin.py). TwinError once the USB cable is pulled."""
        section = faults or {}
        self.request("restart", faults=section.get("faults") or [], seed=int(section.get("seed", 0)),
                     wire_log=str(Path(wire_log).absolute()) if wire_log is not None else None)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self._stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for stream in (self._stdout,):
            try:
                stream.close()
            except OSError:
                pass
        shutil.rmtree(self.home, ignore_errors=True)
        shutil.rmtree(self.frames_dir, ignore_errors=True)

    def __enter__(self) -> Twin:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def user_calibration(loaded: LoadedRig) -> dict | None:
    """The user's own LeRobot calibration file for the profile's `id` (in `robot.calibration_dir`,
    else LeRobot's default folder for so_follower robots); None when there is none. A file that
    is there but does not parse, or lacks a joint, is refused (BadInput): the rehearsal with the
    twin's own calibration instead would hide the fault the session on the arm will hit."""
    from orchestrator.rigs.so101.hardware_checks import unreadable_line
    from orchestrator.rigs.twin.arm import JOINTS

    robot = loaded.profile.robot
    if not robot.id:
        return None
    folder = (robot.model_extra or {}).get("calibration_dir")
    if folder:
        folder = Path(folder).expanduser()
        folder = folder if folder.is_absolute() else loaded.path.parent / folder
    else:
        try:
            from lerobot.utils.constants import HF_LEROBOT_CALIBRATION
        except ImportError:
            return None
        folder = Path(HF_LEROBOT_CALIBRATION) / "robots" / "so_follower"
    path = folder / f"{robot.id}.json"
    if not path.is_file():
        return None
    keys = ("id", "homing_offset", "range_min", "range_max")
    problem = f"not all of {', '.join(JOINTS)} with integer {', '.join(keys)}"
    try:
        data = json.loads(path.read_text())
        if all(isinstance(data[j][k], int) for j in JOINTS for k in keys):
            return data
    except (OSError, ValueError) as exc:
        problem = f"{type(exc).__name__}: {exc}"
    except (KeyError, TypeError):
        pass
    raise BadInput(f"{loaded.path}: calibration: {unreadable_line(path, problem, loaded.profile)}; "
                   "--twin refuses it rather than rehearse with the twin's own calibration")


def swap_sources(loaded: LoadedRig, twin: Twin) -> LoadedRig:
    """The profile with the twin's port, cameras and calibration (see the module docstring)."""
    profile = loaded.profile
    robot_id = profile.robot.id or "so101_twin"
    twin.calibration_dir.mkdir(parents=True, exist_ok=True)
    (twin.calibration_dir / f"{robot_id}.json").write_text(json.dumps(twin.calibration, indent=4))
    robot = {**profile.robot.model_dump(), "port": twin.port, "id": robot_id,
             "calibration_dir": str(twin.calibration_dir)}
    latency = (profile.twin or {}).get("camera_latency_ms")
    cameras = {name: {"type": "twin", "index_or_path": str(twin.frames_dir / f"{name}.frame"),
                      "width": cam.width, "height": cam.height, "fps": cam.fps,
                      **({"latency_ms": float(latency)} if latency is not None else {}),
                      **({"pose": cam.pose.model_dump()} if cam.pose is not None
                         else {"pose": _scene_front_pose()} if name == "front" else {})}
               for name, cam in profile.cameras.items()}
    swapped = RigProfile.model_validate({**profile.model_dump(), "robot": robot, "cameras": cameras})
    return dataclasses.replace(loaded, profile=swapped, kind="twin", twin=twin)


def _scene_front_pose() -> dict:
    """The twin renders its front camera from the simulator's scene: that camera's pose."""
    from orchestrator.sim.front_camera import front_camera_pose

    pose = front_camera_pose(0, 0)
    return {key: pose[key] for key in ("position", "target", "fovy_deg")}


def wire_log_path(loaded: LoadedRig, override: str | Path | None = None) -> Path | None:
    """The wire log file: `override` (`--twin-wire-log`, relative to the working directory),
    else the profile's `twin: {wire_log: FILE}` (relative to the profile's folder), else None."""
    if override is not None:
        return Path(override).absolute()
    name = (loaded.profile.twin or {}).get("wire_log")
    if not name:
        return None
    path = Path(name).expanduser()
    return path if path.is_absolute() else (loaded.path.parent / path).absolute()


def twin_config(loaded: LoadedRig, protocol=None, faults: dict | None = None,
                wire_log: str | Path | None = None) -> dict:
    """What the twin process is told: cameras, rest pose, physics rate, cube, success, faults,
    the wire log's path."""
    profile = loaded.profile
    cameras = {}
    for name, cam in profile.cameras.items():
        rw, rh = render_size(cam.width, cam.height)
        cameras[name] = {"fps": cam.fps, "render_width": rw, "render_height": rh}
    section = dict(faults if faults is not None else (profile.twin or {}))
    config: dict[str, Any] = {"cameras": cameras, "rest_pose": dict(profile.rest_pose),
                              "faults": section.get("faults") or [], "seed": int(section.get("seed", 0))}
    mine = user_calibration(loaded)
    if mine is not None:
        config["user_calibration"] = mine
    twin = loaded.profile.twin or {}
    for key in ("supply_v", "adapter_latency_ms"):
        if twin.get(key) is not None:
            config[key] = float(twin[key])
    log = wire_log_path(loaded, wire_log)
    if log is not None:
        config["wire_log"] = str(log)
    if protocol is not None:
        p = protocol.protocol
        config.update(fps=p.episode.fps, success=p.success.model_dump(exclude={"kind"}),
                      cube=protocol.layout.cube.model_dump())
    return config


def start_twin(loaded: LoadedRig, protocol=None, faults: dict | None = None,
               wire_log: str | Path | None = None) -> Twin:
    """Start the twin for a real-arm profile (BadInput for a simulated profile). `wire_log`:
    the file the twin logs every packet to (`wire_log.py`), instead of the profile's."""
    from orchestrator.sim.scene import KNOWN_CAMERAS

    if loaded.profile.simulated:
        raise BadInput(f"{loaded.path}: --twin takes a real-arm profile (robot.type so101_follower), "
                       "not the simulated rig")
    unknown = [n for n in loaded.profile.cameras if n not in KNOWN_CAMERAS]
    if unknown:
        raise BadInput(f"{loaded.path}: camera {unknown[0]!r}: the twin has cameras {', '.join(KNOWN_CAMERAS)}")
    remove_dead_twins_files()
    home = Path(tempfile.mkdtemp(prefix=HOME_PREFIX))
    frames = Path(tempfile.mkdtemp(prefix=FRAMES_PREFIX, dir=frames_root()))
    config = {**twin_config(loaded, protocol, faults, wire_log), "frames_dir": str(frames), "parent_pid": os.getpid(),
              "home": str(home)}
    env = {**os.environ}
    env.setdefault("MUJOCO_GL", "egl")
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator.rigs.twin", json.dumps(config)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None, text=True,
                            env=env, close_fds=True, start_new_session=True)
    for folder in (home, frames):
        (folder / OWNER_FILE).write_text(str(proc.pid))
    line = _first_line(proc)
    if not line:
        code = proc.wait()
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(frames, ignore_errors=True)
        raise TwinError(f"the twin process did not start (exit code {code}); see the lines above")
    return Twin(proc, home, json.loads(line), loaded)


def remove_dead_twins_files() -> None:
    """Remove the folders of twins that were killed (SIGKILL, power cut) before they could
    remove them: each folder names its twin's pid in `OWNER_FILE`; a folder whose twin is no
    longer running goes (a folder without that file, or of a live process, is left alone)."""
    for root, prefix in ((frames_root(), FRAMES_PREFIX), (Path(tempfile.gettempdir()), HOME_PREFIX)):
        for folder in root.glob(f"{prefix}*"):
            try:
                pid = int((folder / OWNER_FILE).read_text())
            except (OSError, ValueError):
                continue
            if not process_running(pid):
                shutil.rmtree(folder, ignore_errors=True)


def _first_line(proc: subprocess.Popen) -> str:
    result: list[str] = []
    stdout = proc.stdout
    assert stdout is not None   # stdout=PIPE
    reader = threading.Thread(target=lambda: result.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(START_TIMEOUT_S)
    if reader.is_alive():
        proc.kill()
        return ""
    return result[0] if result else ""
