"""Whole campaigns with LeRobot policies: on the fake SO-101 (real LeRobot stack down to the serial
bytes) with faults injected mid-episode, and in the simulated rig (a LeRobot ACT vs scripted).

Each fault (the bus dies, a camera stops delivering, the policy raises) must abort the running
trial with its cause, leave the store consistent, and a plain re-run must resume and complete.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fakes.rigs import CAMERAS
from orchestrator.core.errors import RuntimeFailure
from support import fake_arm
from support.act import make_act_checkpoint

hardware = fake_arm.hardware   # the fixture (support/fake_arm.py)
write_protocol = fake_arm.write_protocol

REPO = Path(__file__).resolve().parent.parent


def run(protocol, rig, out, say=None):
    from orchestrator.commands.referees import campaign_referees
    from orchestrator.run.campaign import open_campaign
    from orchestrator.run.sequential import run_campaign

    opened = open_campaign(protocol, rig, out)
    try:
        return run_campaign(opened, None, say=say or (lambda s: None), referees=campaign_referees()), opened.store.trials(), opened.store.attempts()
    finally:
        opened.store.close()


def after_calls(original, n: int, action):
    """A LeRobotPolicy.select_action that runs `action()` at the n-th call of the session."""
    calls = {"n": 0}

    def wrapped(self, observation):
        calls["n"] += 1
        if calls["n"] == n:
            action()
        return original(self, observation)

    return wrapped


def test_faults_mid_episode_abort_the_trial_and_the_campaign_resumes(hardware, monkeypatch):
    from lerobot.policies.act.modeling_act import ACTPolicy

    from orchestrator.policies.lerobot import LeRobotPolicy
    from orchestrator.rigs.so101.rig import LeRobotRig
    from orchestrator.rigs.so101.videocam import VideoCam

    tmp_path, protocol, rig, arms, plug_in = hardware
    out = tmp_path / "campaign"
    select = LeRobotPolicy.select_action

    # 1. the serial bus dies in the middle of an episode (the first's 4th step of 10: an episode
    # ends on the wall clock and a loaded machine loses steps, so a later call might never come)
    monkeypatch.setattr(LeRobotPolicy, "select_action", after_calls(select, 4, arms[-1].unplug))
    with pytest.raises(RuntimeFailure) as err:
        run(protocol, rig, out)
    message = str(err.value)
    assert "\n" not in message and "aborted: DeviceFault: arm " in message and "SerialException" in message
    assert "USB cable" in message and "resumable" in message

    # 2. replugged; a camera stops delivering during the next session's first trial
    plug_in()
    cams: list[VideoCam] = []
    real_init = VideoCam.__init__

    def init(self, cfg):
        real_init(self, cfg)
        cams.append(self)

    monkeypatch.setattr(VideoCam, "__init__", init)
    # as the episode's loop ends: a step takes a frame up to 500 ms old (LeRobot's `read_latest`),
    # so a camera that stops in the last half second fails no read of the episode; the check after
    # the loop (`frame_age.stale_at_end`) aborts the trial (was: the trial counted, its wrist video
    # ending on a still picture, the freeze found only by a later read; seen at load ~3)
    monkeypatch.setattr(LeRobotPolicy, "select_action", select)
    real_end = LeRobotRig.end_episode

    def end_frozen(self):
        for camera in cams:
            if camera.path.name == "wrist.mp4":
                camera.freeze()
        return real_end(self)

    monkeypatch.setattr(LeRobotRig, "end_episode", end_frozen)
    with pytest.raises(RuntimeFailure, match=r"camera wrist: no new frame for \d+ ms though it is open \(frozen\)"):
        run(protocol, rig, out)
    monkeypatch.setattr(VideoCam, "__init__", real_init)
    monkeypatch.setattr(LeRobotRig, "end_episode", real_end)

    # 3. the policy raises inside LeRobot's ACT, once: by the pre-registered default (aborts: policy:
    # failure) that trial is scored as its policy's failure and the session goes on to the end
    real_chunk = ACTPolicy.predict_action_chunk

    def broken(self, batch):
        ACTPolicy.predict_action_chunk = real_chunk
        raise RuntimeError("NaN in the action head")

    monkeypatch.setattr(LeRobotPolicy, "select_action", after_calls(
        select, 1, lambda: setattr(ACTPolicy, "predict_action_chunk", broken)))
    try:
        arm = plug_in()
        summary, trials, attempts = run(protocol, rig, out)
    finally:
        ACTPolicy.predict_action_chunk = real_chunk
    assert summary.complete and summary.done_total == summary.total == 4
    assert all(t.state == "done" for t in trials)
    aborted = [a for a in attempts if a["status"] == "aborted"]
    assert len(aborted) == 3 and len(attempts) == 6
    reasons = [a["reason"] for a in aborted]
    # the second session's first episode is the one whose camera stopped at its end: it is the
    # abort (was: it counted as done and the episode after it aborted)
    ordered = sorted(attempts, key=lambda a: a["id"])
    assert ordered[ordered.index(aborted[0]) + 1] is aborted[1], [(a["id"], a["status"]) for a in ordered]
    assert reasons[0].startswith("DeviceFault: arm ") and "camera wrist" in reasons[1]
    assert "policy: RuntimeError: NaN in the action head" in reasons[2]
    assert [a["abort_class"] for a in aborted] == ["rig", "rig", "policy"]
    assert [a["settles"] for a in aborted] == [None, None, "failure"]   # re-run, re-run, the policy's failure
    assert all("\n" not in r for r in reasons)
    # every trial that ran to its end has its videos (the failed one has none); aborted attempts left no files
    assert len(list((out / "videos").rglob("*.mp4"))) == 3 * len(CAMERAS)
    # torque off at the end of the session
    assert not any(s.torque for s in arm.servos.values())

    # 4. run again: nothing left to run
    monkeypatch.setattr(LeRobotPolicy, "select_action", select)
    summary, _, attempts_after = run(protocol, rig, out)
    assert summary.complete and len(attempts_after) == 6


@pytest.mark.slow
def test_lerobot_policy_against_scripted_in_the_simulated_rig(tmp_path):
    """A LeRobot checkpoint through the same adapter, in a full simulated campaign."""
    import shutil

    from orchestrator.rigs.profile import load_rig

    sim = load_rig(REPO / "hardware" / "sim.yaml")
    cams = {name: (c.height, c.width) for name, c in sim.profile.cameras.items()}
    make_act_checkpoint(tmp_path / "act_sim", cams, chunk_size=10)
    shutil.copy(REPO / "hardware" / "sim.yaml", tmp_path / "sim.yaml")
    protocol = write_protocol(tmp_path, {"A": {"type": "lerobot", "path": "./act_sim"},
                                         "B": {"type": "scripted", "aim_noise_mm": 0}}, fps=10, duration_s=1.0)
    summary, trials, attempts = run(protocol, tmp_path / "sim.yaml", tmp_path / "campaign")
    assert summary.complete and summary.done_total == 4 and len(attempts) == 4
    assert sorted(t.policy for t in trials) == ["A", "A", "B", "B"]
    assert len(list((tmp_path / "campaign" / "videos").rglob("*.mp4"))) == 4 * len(cams)


def test_operator_console_session_on_the_fake_arm(hardware, monkeypatch):
    """The runner on its thread, the console on this one, two ACT checkpoints on the fake arm: Enter
    at each cue; in the first episode the stop key: the arm holds, no Goal_Position is written until
    the operator has said why and confirmed with Enter, then it goes to rest; the campaign completes,
    nothing about the policies on screen."""
    import threading
    import time
    from types import SimpleNamespace

    from orchestrator.commands.referees import campaign_referees
    from orchestrator.design.protocol import load_protocol
    from orchestrator.run import sequential as runner
    from orchestrator.run.campaign import open_campaign
    from orchestrator.run.console import run_with_console

    tmp_path, protocol, rig, arms, _ = hardware
    arm = arms[-1]
    seen: list[str] = []
    marks: dict[str, float] = {}

    def session(op):
        app = op.app

        def operator_at_the_arm():  # presses the keys a person would
            while not op.closed:
                try:
                    if app.state == "episode" and "stop" not in marks and op.elapsed > 0.3:
                        marks["stop"] = time.perf_counter()
                        app.call_from_thread(app.action_estop)
                    elif app.state == "reason":
                        box = app.query_one("#reason")
                        app.call_from_thread(app.on_input_submitted, SimpleNamespace(value="cube slipped", input=box))
                    elif app.state == "confirm":
                        time.sleep(0.3)   # the stimulus: the operator confirms 0.3 s later
                        marks["confirm"] = time.perf_counter()
                        app.call_from_thread(app.action_enter)
                    elif app.state in ("place", "review"):
                        seen.append(app.call_from_thread(lambda: app.export_screenshot()))
                        app.call_from_thread(app.action_enter)
                except RuntimeError:
                    return
                time.sleep(0.02)   # the operator thread's poll, until the app closes

        threading.Thread(target=operator_at_the_arm, daemon=True).start()
        opened = open_campaign(protocol, rig, tmp_path / "campaign")  # SQLite: opened on this thread
        try:
            summary = runner.run_campaign(opened, op, say=op.message, referees=campaign_referees())
            return summary, opened.store.trials(), opened.store.attempts(), op.app.query_one("#log").lines
        finally:
            opened.store.close()

    summary, trials, attempts, log_lines = run_with_console(load_protocol(protocol), session, headless=True,
                                                            countdown_s=0.1)
    assert summary.complete and [t.state for t in trials] == ["done"] * 4
    (aborted,) = [a for a in attempts if a["status"] == "aborted"]
    assert aborted["reason"] == "emergency stop by operator: cube slipped"
    held = [w for w in arm.goal_writes(since=marks["stop"]) if w[0] < marks["confirm"]]
    assert len({t for t, _, _ in held}) <= 2  # the last step in flight and the hold, nothing after
    assert max(t for t, _, _ in held) < marks["confirm"] - 0.25  # nothing while the operator decided
    log = "\n".join(str(line.text) for line in log_lines)
    assert "trial 4/4" in log and "emergency stop recorded: cube slipped" in log
    assert "act_a" not in "".join(seen) and "act_b" not in "".join(seen) and len(seen) >= 4
    assert not any(arm.torque_enabled().values())
