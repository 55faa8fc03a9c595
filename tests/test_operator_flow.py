"""The operator's flow around the arm's own motions, on the byte-level fake
SO-101 (LeRobot's SOFollower, FeetechMotorsBus and scservo_sdk unchanged; `fakes/feetech.py` logs
every Goal_Position and Torque_Enable write): each assertion is on what the servos were told, or
on the words the operator was shown next to what the servos' registers said at that moment."""

from __future__ import annotations

import io

import pytest

from orchestrator.rigs.base import EmergencyStop
from orchestrator.run.console.prompt import PromptOperator
from orchestrator.run.operator_protocol import ESTOP_PENDING
from support.arm_bench import arm_bench, rig_with
from support.arm_doubles import campaign


@pytest.fixture
def bench(tmp_path, monkeypatch):
    return arm_bench(tmp_path, monkeypatch)


class TerminalAt(PromptOperator):
    """The terminal prompt (`--no-console`) with Enter for every question and the stop key at
    poll `stop_at`; every line it prints is kept with the servos' Torque_Enable as they read when
    it was printed (`lines`)."""

    def __init__(self, arm, stop_at: int | None = None, answers: str = "\n" * 40):
        self.lines: list[tuple[str, dict[int, int]]] = []
        super().__init__(None, countdown_s=0, stdin=io.StringIO(answers),
                         out=lambda text: self.lines.append((text, arm.torque_enabled())))
        self.stop_at, self.polls = stop_at, 0

    def poll(self, elapsed_s):
        self.polls += 1
        if self.polls == self.stop_at:
            self._stop = EmergencyStop(ESTOP_PENDING)   # what the space key sets
        super().poll(elapsed_s)

    def said(self, start: str) -> list[tuple[str, dict[int, int]]]:
        return [(line, torque) for line, torque in self.lines if line.startswith(start)]


# ------------------------------------------------------------------ item 5: words that match the servos
@pytest.mark.parametrize("on_stop", ["hold", "release"])
def test_the_words_after_a_stop_are_the_torque_registers(bench, on_stop):
    """After an emergency stop the reason prompt and the confirmation name the arm's state as its
    Torque_Enable registers read at that moment: limp after `on_stop: release` (it said "ARM
    STOPPED (holding)", hard-coded), holding after `on_stop: hold` (the positive control)."""
    from orchestrator.run.operator_protocol import ARM_HELD, ARM_RELEASED

    tmp_path, arm, rig, protocol = bench
    op = TerminalAt(arm, stop_at=3)
    campaign(protocol, rig_with(rig, on_stop=on_stop), tmp_path / "c", op)
    words, torque = (ARM_RELEASED, 0) if on_stop == "release" else (ARM_HELD, 1)
    (reason, at_reason), = op.said("EMERGENCY STOP")
    confirms = [(line, registers) for line, registers in op.said("ARM ") if "Enter = move it" in line]
    assert len(confirms) == 1 and confirms[0][0].startswith(f"{words}. Enter = move it to rest"), confirms
    assert reason.startswith(f"EMERGENCY STOP: {words}, trial aborted")
    for _, registers in [(reason, at_reason), confirms[0]]:
        assert registers == {i: torque for i in arm.servos}, registers


# ------------------------------------------------------------------ item 3: a countdown before every policy episode
def episodes_without_countdown(seen: list[str]) -> list[int]:
    """The episodes (their index among `seen`'s "episode" entries) that the operator was not
    counted into: the last thing before them was not the cue (whose Enter counts down itself, in
    the console and the prompt) or a countdown, but the arm's own motion or a refused start."""
    out, last, n = [], None, 0
    for what in seen:
        if what == "episode":
            if last not in ("cue", "countdown"):
                out.append(n)
            n += 1
        last = what
    return out


def test_the_countdown_check_flags_an_episode_after_a_reset_or_a_refusal_positive_control():
    assert episodes_without_countdown(["cue", "episode", "moved", "episode", "cue", "refused", "episode"]) == [1, 2]
    assert episodes_without_countdown(["cue", "episode", "moved", "countdown", "episode"]) == []


def test_every_policy_episode_starts_after_a_countdown_after_a_reset_and_a_refused_start(tmp_path):
    """`reset: auto` on the simulator, the simulated hand 10 mm off (every hand placement is
    refused; the operator overrides it): the first episode follows a refusal, the later ones the
    arm's own reset. Each starts after the operator's countdown (`Operator.countdown`, "ARM WILL
    MOVE (policy) in 3 s: space = stop"): before, only the cue's Enter counted down."""
    from orchestrator.run.operator_protocol import AutoOperator
    from support.campaign_files import two_mark_protocol
    from support.repo import REPO

    class Sequence(AutoOperator):
        def __init__(self):
            super().__init__(say=lambda text: None)
            self.seen: list[str] = []

        def before_trial(self, cue):
            self.seen.append("cue")

        def countdown(self, cue):
            self.seen.append("countdown")

        def arm_moving(self, doing):
            if doing is not None:
                self.seen.append("moved")

        def start_refused(self, cue, line, still):
            self.seen.append("refused")
            return "override"

        def episode_started(self, cue):
            self.seen.append("episode")

    protocol = two_mark_protocol(tmp_path, "{type: scripted, aim_noise_mm: 3}", duration_s=1.0, fps=15)
    protocol.write_text(protocol.read_text() + "start_check: {mode: enforce}\nreset: {mode: auto, max_tries: 1}\n")
    rig = tmp_path / "rig.yaml"
    rig.write_text((REPO / "hardware" / "sim.yaml").read_text() + "placement: {offset_mm: [10, 0]}\n")
    op = Sequence()
    summary, _ = campaign(protocol, rig, tmp_path / "c", op)
    assert summary.complete and op.seen.count("episode") == 4, op.seen   # count guard
    # both paths were taken: a refused start after the cue, and episodes right after the arm's reset
    assert op.seen[:3] == ["moved", "cue", "refused"] and op.seen.count("cue") == 1, op.seen
    after_reset = [i for i in range(2, len(op.seen)) if op.seen[i - 2:i + 1] == ["moved", "countdown", "episode"]]
    assert len(after_reset) >= 1, op.seen
    assert episodes_without_countdown(op.seen) == [], op.seen
