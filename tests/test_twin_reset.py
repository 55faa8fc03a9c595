"""`reset: auto` on the twin under the operator console, through LeRobot's real driver stack
(`orchestrator run --twin`, a fresh process in a real terminal, tmux): the operator allows the
arm's resets once for the session, places the first cube (the twin's simulated hand), and from
then on the arm puts each cube on its mark itself, announced ("ARM RESETTING THE CUBE"). A stop
pressed during a reset holds the arm: on the wire, torque stays on and no goal goes out until
the operator confirms the move to rest; at rest the console asks "reset again (Enter), place it
yourself (p), end (q)" and no goal goes out until the answer; Enter: the arm resets the cube
again, puts it on its mark, and the campaign goes on: the second trial runs on the arm's cube.

Two trials, not three: a third (the arm carrying the cube from M01 to M02, 5 mm off at most) cost
a reset, an episode and a move to rest of real time (about 24 s of the test's 75 s idle, 95 s at
load 17) and checked nothing the two do not but the longer carry's precision, which
tests/test_guarded_motion.py checks through LeRobot's stack on the twin's servos in simulated
time (the reset's path picked, carried and put down within 15 mm of its mark)."""

from __future__ import annotations

import json
import shlex
import sqlite3
import sys
import time

import pytest

from support.campaign_files import SHIPPED_TWIN_RIG, env, two_mark_protocol
from support.repo import REPO
from support.tmux import Tmux
from support.waiting import wait_until
from support.wirelog import WireLog

STATUS = 65   # the STS3215's Status register (LeRobot's control table), read by every alarm check


def _goal_writes(wire, after: float) -> int:
    """Goal_Position writes (one per sync write) the twin received after `after` (epoch s)."""
    return len({t for t, _, _ in WireLog.read(wire).goals(after=after)})


def _status_reads(wire, after: float) -> int:
    """Reads of the servos' Status register (one per sync read) the twin received after `after`."""
    return len({p["t"] for p in WireLog.read(wire).packets
                if p["dir"] == "in" and p["inst"] in ("READ", "SYNC_READ") and p["addr"] == STATUS and p["t"] > after})


def _files(tmp_path):
    protocol = two_mark_protocol(tmp_path, "{type: scripted, aim_noise_mm: 3}", duration_s=2.0, fps=15)
    protocol.write_text(protocol.read_text() + "start_check: {mode: enforce}\nreset: {mode: auto, max_tries: 3}\n")
    rig = tmp_path / "twin.yaml"   # the start check reads the shipped 320x240 front camera
    rig.write_text(SHIPPED_TWIN_RIG.read_text().replace("width: 320, height: 240, fps: 30",
                                                        "width: 320, height: 240, fps: 15"))
    return protocol, rig


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_arm_resets_the_cube_on_the_twin_and_a_stop_during_the_reset_holds_it(tmp_path):
    protocol, rig = _files(tmp_path)
    out, wire = tmp_path / "campaign", tmp_path / "wire.jsonl"
    command = shlex.join([sys.executable, "-m", "orchestrator", "run", str(protocol), "--rig", str(rig), "--twin",
                          "--twin-wire-log", str(wire), "--out", str(out), "--stop-after", "2"])
    variables = {k: v for k, v in env().items() if k in ("MUJOCO_GL", "HF_HUB_OFFLINE", "OMP_NUM_THREADS", "PATH")}
    tmux = Tmux()
    try:
        tmux.start("op", command, REPO, variables)
        tmux.wait_for("op", "the arm moves by itself", timeout=180)   # once a session: allow it
        tmux("send-keys", "-t", "op", "Enter")
        tmux.wait_for("op", "press Enter", timeout=60)                # the first cube: by hand
        tmux("send-keys", "-t", "op", "Enter")
        tmux.wait_for("op", "Episode finished", timeout=120)          # the operator's review
        tmux("send-keys", "-t", "op", "Enter")
        tmux.wait_for("op", "ARM MOVING TO REST: space", timeout=120)     # (a cube in the jaws would be
        tmux.wait_for("op", "ARM RESETTING THE CUBE: space", timeout=120)   # put down first) then the reset
        banner_at = time.time()
        wait_until(lambda: _goal_writes(wire, banner_at) >= 20, 60, "the reset wrote no 20 goals")   # 1.3 s
        tmux("send-keys", "-t", "op", "Space")                         # at 15 Hz: into the reach for the cube
        stopped = time.time()
        tmux.wait_for("op", "ARM STOPPED (holding)", timeout=30)
        # held for 8 of the hold's own checks of the servos (run/motion.py HOLD_CHECK_S 0.25 s: 2 s)
        wait_until(lambda: _status_reads(wire, stopped + 0.15) >= 8, 60, "the hold read no 8 Status")
        held_until = time.time()
        log = WireLog.read(wire)
        goals_before = [t for t, _, _ in log.goals() if t < stopped]
        late_goals = [t for t, _, _ in log.goals(after=stopped + 0.15) if t < held_until]
        torque_off = [(t, servo) for t, servo, value in log.torque_writes(after=stopped) if value == 0 and t < held_until]
        tmux("send-keys", "-t", "op", "Enter")                        # confirm: to rest
        tmux.wait_for("op", "reset again (Enter), place it yourself (p), end (q)", timeout=60)
        asked = time.time()
        # An observation window, not a wait for something: nothing may move while the question waits,
        # and the process reads nothing on the bus then (measured: no Status read in 60 s), so the
        # window is the wall clock's. Under load it only watches less of the process's work.
        time.sleep(1.5)   # an observation window (see above), not a wait for a condition
        answered = time.time()
        idle_goals = [t for t, _, _ in WireLog.read(wire).goals(after=asked) if t < answered]
        tmux("send-keys", "-t", "op", "Enter")                        # reset again
        tmux.wait_for("op", "Episode finished", timeout=240)          # trial 2, on the arm's cube
        tmux("send-keys", "-t", "op", "Enter")
        tmux.wait_gone("op", "Episode finished", timeout=30)          # the review's banner goes
        # The last trial's move to rest once stopped here on "did not reach rest: gripper blocked"
        # (a fresh-clone run at load 2-4): not the jaws against the table or the cube, but the
        # guarded motion counting a starved host's servo reads before the gripper's first goal
        # against it (fixed: tests/test_rest_move.py reproduces it on a simulated clock). Nothing
        # may hold the arm here now: the run ends on its own, no rest_blocked event (below).
        screen = tmux.wait_for("op", "EXIT=", timeout=120)
    finally:
        tmux.kill()
    assert len(goals_before) > 100                # the reset was moving the arm when the stop came
    assert late_goals == [] and torque_off == [], (late_goals[:5], torque_off)   # held: torque on, no goal
    assert idle_goals == [], idle_goals[:5]       # at rest, nothing moves until the operator says what next
    assert "EXIT=0" in screen and "Traceback" not in screen, screen
    with sqlite3.connect(out / "campaign.db") as db:
        kinds = [k for (k,) in db.execute("SELECT kind FROM events ORDER BY id")]
        resets = [json.loads(d) for (d,) in db.execute("SELECT data FROM events WHERE kind = 'cube_reset' ORDER BY id")]
        trials = db.execute("SELECT t.mark_id, a.status FROM attempts a JOIN trials t ON t.slot = a.slot "
                            "ORDER BY a.id").fetchall()
    assert kinds.count("reset_approved") == 1 and kinds.count("reset_stopped") == 1, kinds
    assert "rest_blocked" not in kinds and "motion_blocked" not in kinds, kinds   # no joint called blocked
    # trials 1 and 2 on M01 (the stop fell in the second's reset): both done, the second not
    # stopped by the stop that was answered during its reset
    assert trials == [("M01", "done"), ("M01", "done")], trials
    # one reset recorded: the one run again after the stop, the cube picked and put on M01 by the arm
    assert [r["mark"] for r in resets] == ["M01"] and resets[0]["passes"] and resets[0]["tries"] >= 1, resets
    assert resets[0]["offset_mm"] < 5.0, resets   # placed through LeRobot within 5 mm of its mark
