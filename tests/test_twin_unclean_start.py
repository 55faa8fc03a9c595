"""The next `run` after SIGTERM with the cube in the jaws, on the twin as an operator meets it:
LeRobot's real driver stack, the operator console in a real terminal (tmux), the twin running
on its own so the arm and the cube stay where the stop left them.

SIGTERM lands while the scripted policy's jaws are closed on the cube at the table. The next
`run` asks why the last stop was made before anything moves; then it shows the arm's state,
why it waits ("the last session was interrupted", the jaws closed on something) and what will
move, and not one Goal_Position write reaches the wire until the operator's Enter; then the
jaws open where they are before any other joint moves, and the cube stays on the table (it was
carried up and dropped: "Why" 2 and 9 of the safety issue)."""

from __future__ import annotations

import os
import re
import shlex
import signal
import sys
import time

import pytest
import yaml

from orchestrator.design.protocol import load_layout
from orchestrator.rigs.profile import load_rig
from orchestrator.store.sqlite import CampaignStore
from support.campaign_files import env, sim_protocol_on_marks, twin_rig, without_cameras
from support.repo import REPO
from support.tmux import Tmux
from support.wirelog import WireLog

GRIPPER_ID = 6


def _without_cameras(rig):
    """The profile at `rig` without its cameras (`without_cameras`): what is asserted here is the
    bus's and the console's words; a twin without cameras starts no render process and a run
    counts no camera's frames (2 s a run)."""
    rig.write_text(without_cameras(rig.read_text()))
    return rig
MARKS = {m.id: m for m in load_layout(REPO / "layouts" / "grid20.yaml")[0].marks}


def _in_the_jaws(state: dict) -> bool:
    """The twin's jaws at the cube's width with the cube still on the table (not yet lifted)."""
    import numpy as np

    from orchestrator.sim.holding import cube_sized_gap

    return bool(cube_sized_gap(np.array([state["joints_deg"][5]]), 0.03)[0]) and state["cube"][2] < 0.02


# Trials the test gives the scripted pick to close its jaws on the cube at the table (the
# protocol has 4): a grasp that still slips under load (seen once in CI, before the aim noise
# was taken out) costs a trial, not the run. What the test asserts needs the cube in the jaws,
# not the first trial's.
GRASP_TRIALS = 3


def _place_the_cued_cube(tmux, twin) -> None:
    """Put the twin's cube on the mark the console's banner names (the operator's hand): the
    banner is painted whole with its mark, so a later trial never reads an earlier trial's."""
    screen = tmux.wait_for("op", "step back, press Enter", timeout=240)
    found = re.search(r"Place the cube on (M\d\d), step back, press Enter", screen)
    assert found, screen
    mark = MARKS[found.group(1)]
    twin.request("place", mark={"id": mark.id, "x": mark.x, "y": mark.y, "yaw_deg": mark.yaw_deg})


# The jaws are closed on the cube when the gripper stays within 0.3 degrees at the cube's width
# for this long of the twin's own physics (`sim_s`): closing freely, it moves tens of degrees in
# that time. Wall-clock polls 30 ms apart took a starved twin, whose physics stood still, for
# jaws stopped by the cube (seen: SIGTERM sent before the jaws reached the cube).
JAWS_STILL_SIM_S = 0.1


def _wait_for_the_jaws_on_the_cube(tmux, twin, timeout_s: float = 60.0) -> bool:
    """Poll the twin until its jaws stop at the cube's width with the cube on the table (True),
    or the episode ends without that (False: the grasp missed; the console's review shows)."""
    deadline = time.monotonic() + timeout_s
    still_from, polls = None, 0   # (sim_s, gripper degrees) where the jaws were last seen moving
    while True:
        state = twin.request("state")
        gripper = state["joints_deg"][5]
        if still_from is None or abs(gripper - still_from[1]) >= 0.3:
            still_from = (state["sim_s"], gripper)
        elif _in_the_jaws(state) and state["sim_s"] - still_from[0] >= JAWS_STILL_SIM_S:
            return True
        if time.monotonic() >= deadline:   # what the console shows says why (an abort, a prompt)
            raise AssertionError(f"the jaws never closed on the cube at the table: {state}\n"
                                 f"console:\n{tmux.screen('op')}")
        polls += 1
        if polls % 15 == 0 and "Episode finished" in tmux.screen("op"):   # every ~0.5 s: a tmux call costs
            return False
        time.sleep(0.03)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_sigterm_with_the_cube_in_the_jaws_then_run_asks_first_and_opens_the_jaws_at_the_table(tmp_path):
    from orchestrator.rigs.twin.client import start_twin

    # No aim noise, and the profile's max_relative_target at doctor's bound for 15 fps (6: 90 deg/s):
    # at 3 (45 deg/s here) and 3 mm of noise, a CI run at load pushed the cube askew and the
    # grasp slipped, so the jaws never held it at the table (the state this test needs).
    protocol = sim_protocol_on_marks(tmp_path, ("M01", "M02"), "{type: scripted}", policy_a="{type: scripted}",
                                     duration_s=8.0, fps=15)
    out, wire = tmp_path / "campaign", tmp_path / "wire.jsonl"
    variables = {k: v for k, v in env().items() if k in ("MUJOCO_GL", "HF_HUB_OFFLINE", "OMP_NUM_THREADS", "PATH")}
    tmux = Tmux()
    with start_twin(load_rig(_without_cameras(twin_rig(tmp_path, max_relative_target=6.0))), wire_log=wire) as twin:
        rig = tmp_path / "attached.yaml"
        rig.write_text(yaml.safe_dump(twin.rig.profile.model_dump(mode="json", exclude_none=True)))
        command = shlex.join([sys.executable, "-m", "orchestrator", "run", str(protocol), "--rig", str(rig),
                              "--out", str(out)])
        try:
            tmux.start("op", command, REPO, variables)
            for trial in range(1, GRASP_TRIALS + 1):   # a grasp missed under load: the next trial's
                _place_the_cued_cube(tmux, twin)             # cube is placed and grasped instead
                tmux("send-keys", "-t", "op", "Enter")
                tmux.wait_for("op", "EPISODE RUNNING", timeout=120)
                if _wait_for_the_jaws_on_the_cube(tmux, twin):
                    break
                assert trial < GRASP_TRIALS, f"{GRASP_TRIALS} scripted grasps in a row missed the cube"
                tmux("send-keys", "-t", "op", "Enter")   # the review of the missed trial
                tmux.wait_gone("op", "Episode finished", timeout=30)
            with CampaignStore.open_readonly(out) as store:
                (running,) = [s for s in store.sessions() if s["ended_at"] is None]
            os.kill(running["pid"], signal.SIGTERM)
            tmux.wait_for("op", "EXIT=130", timeout=120)
            stopped = twin.request("state")
            tmux.kill()

            tmux = Tmux()
            started = time.time()
            tmux.start("op", command, REPO, variables)
            tmux.wait_for("op", "BEFORE ANYTHING MOVES", timeout=240)     # the stop's reason first
            tmux("send-keys", "-t", "op", "-l", "3 terminated with the cube in the jaws")
            tmux("send-keys", "-t", "op", "Enter")
            screen = tmux.wait_for("op", "not moved yet", timeout=240)   # then where the arm is, what will move
            time.sleep(1.5)   # an observation window while the operator reads it: no goal may go out
            asked = time.time()
            before_enter = WireLog.read(wire).goals(after=started)
            at_rest_cube = twin.request("state")["cube"]
            tmux("send-keys", "-t", "op", "Enter")
            heights = []
            deadline = time.monotonic() + 120
            while "press Enter" not in (now := tmux.screen("op")):      # the move to rest, then the next cue
                assert time.monotonic() < deadline and "EXIT=" not in now, now
                heights.append(twin.request("state")["cube"][2])
                time.sleep(0.05)
        finally:
            tmux.kill()
        goals = WireLog.read(wire).goals(after=asked)
    assert _in_the_jaws(stopped) or stopped["cube"][2] < 0.02, stopped
    joined = " ".join(screen.split())
    assert "the last session was interrupted" in joined and "first the jaws open" in joined, screen
    assert before_enter == [], before_enter[:6]                 # not one goal before the operator's Enter
    assert heights and max(heights) < at_rest_cube[2] + 0.01, (at_rest_cube, max(heights))   # never lifted
    # the first goals after the Enter: the gripper opens, every other servo's goal where it was
    first = [(i, v) for _, i, v in goals[:60]]
    gripper = [v for i, v in first if i == GRIPPER_ID]
    assert len(set(gripper)) > 2, first
    others = {}
    for i, v in first:
        if i != GRIPPER_ID:
            others.setdefault(i, []).append(v)
    assert others and all(max(vs) - min(vs) <= 12 for vs in others.values()), others   # held (12 ticks ~ 1 degree)
