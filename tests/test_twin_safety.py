"""Safety measured on the rehearsal twin: LeRobot's real stack drives the twin's
simulated SO-101 over a pseudo-terminal. In-process CLI runs, as tests/test_twin_faults.py."""

from __future__ import annotations

import pytest

from orchestrator.cli import main
from orchestrator.store.sqlite import CampaignStore
from support.campaign_files import TWIN_GRASP_MARK_XY, servo_rig, two_mark_protocol
from support.twin_time import wait_physics
from support.wirelog import wait_for_exit


@pytest.fixture(scope="module")
def twin(tmp_path_factory):
    """One twin, without cameras, for the stop, Ctrl-C and stall tests (their assertions are on
    the servos: a twin's start, its render process's included, is 5 s at load 8; each test
    connects its own rig or campaign to it, the arm where the last left it, torque off)."""
    from orchestrator.rigs.profile import load_rig
    from orchestrator.rigs.twin.client import start_twin

    with start_twin(load_rig(servo_rig(tmp_path_factory.mktemp("safety_twin")))) as running:
        yield running


@pytest.mark.slow
def test_no_trial_aborts_at_one_percent_corrupted_status_packets(tmp_path, capsys):
    """Item 4: 1 % of the twin's status packets corrupted in every episode; LeRobot's retries
    (`num_read_retries`), used by every joint read, keep every trial alive. A twin without
    cameras (`servo_rig`): the corruption and the retries are the bus's, and a run with cameras
    adds a render process and a 2 s frame-rate check."""
    rig = servo_rig(tmp_path)
    text = rig.read_text()
    faults = ", ".join(f"{{kind: corrupt_status, rate: 0.01, episode: {n}}}" for n in range(1, 5))
    assert "twin: {seed: 0, faults: []}" in text
    rig.write_text(text.replace("twin: {seed: 0, faults: []}", f"twin: {{seed: 11, faults: [{faults}]}}"))
    protocol = two_mark_protocol(tmp_path, "{type: scripted, aim_noise_mm: 3}", duration_s=1.0, fps=30)
    out, wire = tmp_path / "campaign", tmp_path / "wire.jsonl"
    code = main(["run", str(protocol), "--rig", str(rig), "--twin", "--unattended", "--out", str(out),
                 "--twin-wire-log", str(wire)])
    captured = capsys.readouterr()
    assert code == 0, captured.err[-2000:]
    assert "4/4 trials done, 0 aborted" in captured.out
    with CampaignStore.open_readonly(out) as store:
        assert [a["status"] for a in store.attempts()] == ["done"] * 4
    # the positive control: status packets were corrupted (the twin's wire log names each)
    corrupted = wait_for_exit(wire).faults("corrupt_status")
    assert len(corrupted) >= 3, len(corrupted)


@pytest.mark.slow
@pytest.mark.parametrize("way_out", ["estop_then_end", "ctrl-c"])
def test_torque_reads_zero_on_the_twin_after_a_stop_and_after_ctrl_c(tmp_path, way_out, twin):
    """Items 2-3 on the twin: after the stop key the arm is held and nothing moves while the
    operator decides (the twin's joints do not change); ending the session there, or Ctrl-C, leaves
    Torque_Enable 0 on every servo of the twin (on when the episode ran: the twin is shared)."""

    from orchestrator.core.errors import Interrupted
    from support.arm_doubles import Failing, StopOnce, campaign

    protocol = two_mark_protocol(tmp_path, "{type: scripted, aim_noise_mm: 3}", duration_s=1.0, fps=15)
    torque_in_the_episode = []
    if way_out == "estop_then_end":
        class Watch(StopOnce):
            def confirm_move(self, what):
                torque_in_the_episode.append(twin.request("state")["torque"])
                # held mid-motion, a servo settles onto its hold goal within ~0.1 s (up to
                # ~0.8 degrees, measured); what must not happen is motion after that
                wait_physics(twin, 0.15)
                self.before = twin.request("state")["joints_deg"]
                wait_physics(twin, 0.5)
                self.after = twin.request("state")["joints_deg"]
                super().confirm_move(what)

        op = Watch(at=5, wait_s=0.0, end_instead=True)
        summary, attempts = campaign(protocol, twin.rig, tmp_path / "c", op)
        assert not summary.complete and [a["status"] for a in attempts] == ["aborted"]
        assert max(abs(a - b) for a, b in zip(op.before, op.after, strict=True)) < 0.5  # held: nothing moved
    else:
        def ctrl_c():
            torque_in_the_episode.append(twin.request("state")["torque"])
            raise KeyboardInterrupt

        with pytest.raises(Interrupted):
            campaign(protocol, twin.rig, tmp_path / "c", Failing(ctrl_c, at=5))
    state = twin.request("state")
    assert torque_in_the_episode == [[True] * 6]   # on in the episode (the positive control)...
    assert state["torque"] == [False] * 6          # ...off after the way out


@pytest.mark.slow
def test_after_a_two_second_stall_on_the_twin_actions_are_half_a_period_apart_or_more(tmp_path, monkeypatch, twin):
    """Item 1 on the twin: the times at which LeRobot's bus wrote Goal_Position to the twin's
    pseudo-terminal, after a 2 s policy stall: not caught up (any 5 intervals at least half of 5
    periods)."""
    import time

    import numpy as np
    from lerobot.motors.feetech import FeetechMotorsBus

    from orchestrator.design.protocol import Cube, Mark
    from orchestrator.policies.base import EpisodeContext
    from orchestrator.rigs.factory import make_rig
    from orchestrator.run.control_loop import run_episode
    from orchestrator.run.recording import EpisodeRecorder
    from support.arm_doubles import Hold

    writes: list[float] = []
    real = FeetechMotorsBus.sync_write

    def timed(self, data_name, *args, **kwargs):
        out = real(self, data_name, *args, **kwargs)
        if data_name == "Goal_Position":
            writes.append(time.perf_counter())
        return out

    monkeypatch.setattr(FeetechMotorsBus, "sync_write", timed)
    fps = 15
    rig = make_rig(twin.rig)
    rig.connect()
    try:
        context = EpisodeContext(mark=Mark(id="M01", x=TWIN_GRASP_MARK_XY[0], y=TWIN_GRASP_MARK_XY[1]), cube=Cube(), seed=0, fps=fps,
                                 duration_s=3.0, task="")   # the episode ends on time: ~0.8 s after the stall
        recorder = EpisodeRecorder(tmp_path / "c", "ep", {}, fps, fps, realtime=True)
        stall_start = {}

        class Stall(Hold):
            def select_action(self, obs):
                if self.calls == 3:
                    stall_start["t"] = time.perf_counter()
                return super().select_action(obs)

        rig.prepare_layout(context.mark, context.cube, 0)
        run_episode(rig, Stall(stall_at=3, stall_s=2.0), context, recorder)
        recorder.discard()
    finally:
        rig.disconnect()
    after = [t for t in writes if t > stall_start["t"]]
    assert len(after) >= 6, after          # the steps left in the episode's duration, none made up
    # Caught up, the slots the stall took would go out back to back (a few ms apart). Checked on
    # spans of 5 intervals, as tests/test_arm_pacing.py does: a write the machine's load delays
    # shortens the next interval (lerobot-rollout's `max(0, period - dt)`: one fell to 30 ms of
    # 67 at load 25), but 5 intervals of a paced loop take at least half of 5 periods.
    spans = np.asarray(after[5:]) - np.asarray(after[:-5])
    assert spans.min() >= 5 * (1 / fps) / 2, f"5 intervals after the stall in {spans.min() * 1000:.1f} ms"


@pytest.mark.slow
@pytest.mark.parametrize("servo", ["shoulder_lift", "gripper"])
def test_an_overload_on_one_servo_ends_with_all_six_torques_off_the_alarm_named_and_resumable(tmp_path, servo, twin):
    """An alarm on one servo, on the twin, as a review reproduced it: `{kind: overload, servo:
    shoulder_lift, at_step: 3}` ended with torque [off, off, on, on, on, on] (LeRobot's per-motor
    disable_torque stops at the servo whose replies carry the error bit) and "check the USB cable".
    bench/safety_matrix.py runs the alarm on each of the six servos in every phase. Here the
    overload is injected into the module's twin at the episode's third poll (as the fault plan's
    `at_step` would, without a twin of its own: 5 s); the resume after the power cycle is the same
    code whichever servo tripped: it runs once, after the shoulder's alarm (the gripper's run ends
    at the alarm, 8-10 s of four more trials saved)."""
    from orchestrator.core.errors import RuntimeFailure
    from support.arm_doubles import Watching, campaign

    protocol = two_mark_protocol(tmp_path, "{type: scripted, aim_noise_mm: 3}", duration_s=1.0, fps=15)
    op = Watching(wait_s=0.0, fail=lambda: twin.request("inject", fault={"kind": "overload", "servo": servo}),
                  fail_at=3)
    try:
        with pytest.raises(RuntimeFailure, match=rf"{servo} \(id \d\): overload") as err:
            campaign(protocol, twin.rig, tmp_path / "c", op)
        state = twin.request("state")
    finally:
        twin.power_cycle()   # the operator switches the arm off and on: the alarm holds until then
    if servo == "shoulder_lift":   # and resumes: the campaign goes on to completion
        summary, _ = campaign(protocol, twin.rig, tmp_path / "c", Watching(wait_s=0.0))
        assert summary.complete
    assert op.fault_at is not None and state["torque"] == [False] * 6   # injected mid-episode; all six off
    assert "USB" not in str(err.value)
    assert any("overload" in m and m.startswith("trial aborted") for m in op.messages), op.messages
    with CampaignStore.open_readonly(tmp_path / "c") as store:
        first = store.attempts()[0]
    assert first["status"] == "aborted" and f"{servo} (id" in first["reason"], first
