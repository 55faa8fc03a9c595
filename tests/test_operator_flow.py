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
