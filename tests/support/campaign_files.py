"""Campaign files the tests write: a two-mark copy of the shipped simulated protocol with a
policy of the test's choosing as B, the shipped twin profile with small cameras, and the
environment of a fresh `orchestrator` process."""

from __future__ import annotations

import os
from pathlib import Path

from support.act import TWIN_CAMERA
from support.repo import GRID20, REPO, SIM_PROTOCOL

SHIPPED_TWIN_RIG = REPO / "hardware" / "so101_twin.yaml"
# Where a twin test's cube goes (test_twin_grasp, test_twin_safety, test_rtc_stop): clear of the
# gripper at the twin's rest pose however far the arm sagged before torque came on
# (tests/test_rest_clearance.py; (0.16, 0) is inside it at rest).
TWIN_GRASP_MARK_XY = (0.19, 0.0)
CAMERA = TWIN_CAMERA   # (height, width) of the test profile's cameras and the ACT's inputs


def sim_protocol_on_marks(folder: Path, marks: tuple[str, ...], policy_b: str, *, policy_a: str | None = None,
                         duration_s: float = 1.0, fps: int = 10) -> Path:
    """A copy of protocols/sim_demo.yaml on grid20's `marks` (its layout `layout<N>.yaml`, N the
    number of marks), with `policy_b` as B (and `policy_a` as A when given)."""
    name = f"layout{len(marks)}.yaml"
    layout = [line for line in GRID20.read_text().splitlines()
              if not line.lstrip().startswith("- {id: M") or line.lstrip().startswith(tuple(f"- {{id: {m}" for m in marks))]
    (folder / name).write_text("\n".join(layout) + "\n")
    text = SIM_PROTOCOL.read_text()
    edits = [("../layouts/grid20.yaml", name), ("B: {type: scripted, aim_noise_mm: 12}", f"B: {policy_b}"),
             ("episode: {fps: 30, duration_s: 12}", f"episode: {{fps: {fps}, duration_s: {duration_s}}}")]
    if policy_a is not None:
        edits.append(("A: {type: scripted, aim_noise_mm: 3}", f"A: {policy_a}"))
    for old, new in edits:
        assert old in text
        text = text.replace(old, new)
    path = folder / "protocol.yaml"
    path.write_text(text)
    return path


def two_mark_protocol(folder: Path, policy_b: str, *, duration_s: float = 1.0, fps: int = 10) -> Path:
    """protocols/sim_demo.yaml on grid20's first two marks, with `policy_b` as B."""
    return sim_protocol_on_marks(folder, ("M01", "M02"), policy_b, duration_s=duration_s, fps=fps)


def one_mark_protocol(folder: Path, policy_a: str, policy_b: str, *, duration_s: float = 3, fps: int = 15) -> Path:
    """protocols/sim_demo.yaml on grid20's first mark, with policies `policy_a` and `policy_b`."""
    return sim_protocol_on_marks(folder, ("M01",), policy_b, policy_a=policy_a, duration_s=duration_s, fps=fps)


SHIPPED_MAX_RELATIVE_TARGET = "max_relative_target: 3.0"   # hardware/so101_twin.yaml's (90 deg/s at 30 fps)
_KEEP = object()


def twin_rig(folder, fps: int = 15, *, max_relative_target: object = _KEEP):
    """hardware/so101_twin.yaml with small cameras at `fps`: the twin renders and a tiny ACT
    keep up on a busy 2-core machine while other tests run (the shipped 320x240 at 30 fps is
    what bench/control_loop.py measures). `max_relative_target`: a number, or None for no
    clipping (the YAML's null); left out, the shipped profile's 3.0."""
    text = with_max_relative_target(SHIPPED_TWIN_RIG.read_text(), max_relative_target)
    old = "width: 320, height: 240, fps: 30"
    assert text.count(old) == 2
    path = folder / "so101_twin.yaml"
    path.write_text(text.replace(old, f"width: {CAMERA[1]}, height: {CAMERA[0]}, fps: {fps}"))
    return path


def without_cameras(text: str) -> str:
    """A twin profile's text with `cameras: {}`: a twin without cameras starts no render process
    (its start and its CPU saved) and doctor checks no frame rate, for tests of the bus alone."""
    start, end = text.index("cameras:\n"), text.index("# The rest pose")
    return text[:start] + "cameras: {}\n" + text[end:]


def servo_rig(folder) -> Path:
    """hardware/so101_twin.yaml without its cameras (`without_cameras`): for tests that read and
    write servo registers only."""
    path = Path(folder) / "so101_twin_servos.yaml"
    path.write_text(without_cameras(SHIPPED_TWIN_RIG.read_text()))
    return path


def with_max_relative_target(text: str, value: object = _KEEP) -> str:
    """The shipped twin profile's text with its `max_relative_target` replaced (None: null)."""
    if value is _KEEP:
        return text
    assert text.count(SHIPPED_MAX_RELATIVE_TARGET) == 1, "the shipped twin profile's max_relative_target moved"
    return text.replace(SHIPPED_MAX_RELATIVE_TARGET, f"max_relative_target: {'null' if value is None else value}")


def env() -> dict[str, str]:
    # One torch thread: on a loaded 2-core machine, torch's default two threads wait on each
    # other for seconds per model call (measured: 0.8 s single vs 2.6-6.7 s with two).
    return {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl"), "HF_HUB_OFFLINE": "1",
            "OMP_NUM_THREADS": "1"}
