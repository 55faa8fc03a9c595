"""`doctor` and `run` on the twin refuse what would drive the arm dangerously, one line each with
the flag that accepts it, before anything moves (the twin's wire log: no goal written, torque
never on): a tiny ACT whose statistics are in radians, one whose actions are NaN, one whose first
action lies far from the rest pose, and `max_relative_target: 1000`. Both in this process
(LeRobot's policies imported once: a fresh process pays 7-10 s for them; `doctor --twin` refusing
in a fresh process is test_doctor_faults.py's, a fresh `doctor` loading an ACT
test_lerobot_cli_fresh.py's); the checkpoints are copies of the session's saved tiny ACT for the
twin's cameras, re-statted or poisoned (a new random ACT is 45 MB of weights built and saved:
seconds each); the refusals' wording and order are test_arm_fit.py's."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from support.act import TWIN_CAMERA, poison_checkpoint, restat_checkpoint
from support.campaign_files import twin_rig
from support.repo import REPO
from support.wirelog import wait_for_exit

CAMERAS = {"front": TWIN_CAMERA, "wrist": TWIN_CAMERA}
RADIANS = {"mean": [0.0] * 6, "std": [0.5] * 6, "min": [-1.6] * 6, "max": [1.6] * 6}
# the old tiny ACT's statistics (mean 0, std 40): in degrees, but its actions lie about 0, far from the rest pose
ZERO_CENTRED = {"mean": [0.0] * 6, "std": [40.0] * 6}


def copy_of(saved_act: Path, folder: Path) -> Path:
    """A copy of the session's saved tiny ACT for `CAMERAS` (conftest `saved_acts["twin"]`)."""
    return Path(shutil.copytree(saved_act, folder))


def checkpoints(folder, saved_act: Path) -> dict[str, str]:
    """label -> checkpoint folder: A in radians, B whose actions are NaN, C far from the rest pose."""
    radians = restat_checkpoint(copy_of(saved_act, folder / "radians"), CAMERAS,
                                observation_state=RADIANS, action=RADIANS)
    nan = poison_checkpoint(copy_of(saved_act, folder / "nan"))
    far = restat_checkpoint(copy_of(saved_act, folder / "far"), CAMERAS,
                            observation_state=ZERO_CENTRED, action=ZERO_CENTRED)
    return {"A": str(radians), "B": str(nan), "C": str(far)}


def protocol(folder, policies: dict[str, str]) -> str:
    path = folder / "protocol.yaml"
    specs = {label: {"type": "lerobot", "path": p, "device": "cpu"} for label, p in policies.items()}
    if len(specs) < 2:
        specs["S"] = {"type": "scripted"}
    path.write_text(yaml.safe_dump({
        "name": "arm-fit", "task": "Pick up the cube", "layout": str(REPO / "layouts" / "rehearsal4.yaml"),
        "policies": specs, "seed": 1, "episode": {"fps": 15, "duration_s": 2}}, sort_keys=False))
    return str(path)


def assert_nothing_moved(log_path) -> None:
    log = wait_for_exit(log_path)
    assert [line for line in log.packets if line["dir"] == "in"], "the positive control: the bus was read"
    assert log.goals() == [] and all(value == 0 for _, _, value in log.torque_writes())
    assert log.exit["torque"] == [0] * 6


def test_doctor_on_the_twin_refuses_each_checkpoint_and_a_fast_profile_with_its_flag(tmp_path, cli, saved_acts):
    rig = twin_rig(tmp_path, max_relative_target=1000)
    result = cli("doctor", "--rig", rig, "--twin", "--protocol", protocol(tmp_path, checkpoints(tmp_path, saved_acts["twin"])),
                 "--twin-wire-log", tmp_path / "wire.jsonl", "--out", tmp_path, "--camera-seconds", "0.3")
    assert result.code == 2 and "Traceback" not in result.err, result.err[-3000:]
    lines = result.err_lines
    assert len(lines) == 4, lines
    assert lines[0] == (f"orchestrator: safety: {rig}: robot.max_relative_target 1000 lets a policy drive "
                        "a joint at up to 15000 degrees per second at 15 fps, above the 90 allowed; set it to "
                        "6.0 or less, or pass --allow-fast-max-relative-target")
    units, nan, far = lines[1:]
    assert units.startswith("orchestrator: policy A (") and ": its statistics are not in the rig's units (degrees; " \
        "gripper 0-100): observation.state: the arm's largest std is 0.5 (under 2)" in units
    assert units.endswith("pass --allow-policy-units to run it anyway")
    assert nan.startswith("orchestrator: policy B (") and ": its warm-up action is not finite (shoulder_pan.pos=nan" in nan
    assert nan.endswith("pass --allow-nan-warm-up to run it anyway")
    assert far.startswith("orchestrator: policy C (") and \
        ": its first action at the episode's start pose (the profile's rest_pose) puts " in far
    assert " degrees from it (bound 30)" in far and far.endswith("pass --allow-far-first-action to run it anyway")
    assert "ok    policy A: " in result.out and "loads (act on cpu" in result.out   # loaded, then refused
    assert_nothing_moved(tmp_path / "wire.jsonl")


def test_run_on_the_twin_refuses_a_checkpoint_in_radians_before_the_arm_connects(tmp_path, cli, saved_acts):
    ckpt = restat_checkpoint(copy_of(saved_acts["twin"], tmp_path / "radians"), CAMERAS,
                             observation_state=RADIANS, action=RADIANS)
    result = cli("run", protocol(tmp_path, {"A": str(ckpt)}), "--rig", twin_rig(tmp_path), "--twin",
                 "--unattended", "--out", tmp_path / "c", "--twin-wire-log", tmp_path / "wire.jsonl")
    assert result.code == 2 and "Traceback" not in result.err, result.err[-3000:]
    (line,) = [ln for ln in result.err_lines if "pass --allow" in ln]
    assert line.startswith(f"orchestrator: policy checkpoint {ckpt}: its statistics are not in the rig's units"), line
    assert line.endswith("pass --allow-policy-units to run it anyway")
    assert "MOVING" not in result.out + result.err
    assert_nothing_moved(tmp_path / "wire.jsonl")
