"""The one exception ladder of the runner's motions (run/motion.py `ArmMotion._moving`): the move
to rest and a scripted motion (the cube reset) leave through the one stop path on every way out
(the stop key, a blocked joint, a fault, Ctrl-C), each stopping the arm exactly once, Ctrl-C
marked as an interruption, the exception going on to the caller, and the "moving" announcement
cleared last. In process, on a rig whose motion raises what the test chooses."""

from __future__ import annotations

import pytest

from orchestrator.rigs.base import EmergencyStop
from orchestrator.rigs.device_fault import DeviceFault, RestBlocked
from orchestrator.run.motion import ArmMotion, MotionStopped
from orchestrator.run.operator_protocol import AutoOperator
from support.fake_rig import StillRig


class RaisingRig(StillRig):
    """Its motions raise `raises` (once each, then move), and count the stops."""

    realtime = False

    def __init__(self, raises: BaseException):
        self.raises: BaseException | None = raises
        self.stops = 0

    def _move(self) -> None:
        raised, self.raises = self.raises, None
        if raised is not None:
            raise raised

    def go_to_rest(self, check=None) -> None:
        self._move()

    def move_along(self, path, path_fps, check=None) -> None:
        self._move()

    def safe_stop(self) -> None:
        self.stops += 1

    def observe(self, with_images=True):
        return {}

    def act(self, action):
        return action

    def end_episode(self):
        raise AssertionError("no episode here")


class Recording(AutoOperator):
    def __init__(self):
        super().__init__(say=lambda text: None)
        self.moving: list[str | None] = []
        self.messages: list[str] = []

    def arm_moving(self, doing):
        self.moving.append(doing)

    def message(self, text):
        self.messages.append(text)


WAYS_OUT = {
    "stop key": EmergencyStop(),
    "blocked": RestBlocked("arm /dev/ttyACM0", ["elbow_flex"]),
    "fault": DeviceFault.arm("arm /dev/ttyACM0", OSError("port gone")),
    "Ctrl-C": KeyboardInterrupt(),
}
# what reaches the caller: the move to rest confirms and moves again after a stop or a block
TO_REST_RAISES = {"stop key": None, "blocked": None, "fault": DeviceFault, "Ctrl-C": KeyboardInterrupt}
FOLLOW_RAISES = {"stop key": MotionStopped, "blocked": MotionStopped, "fault": DeviceFault, "Ctrl-C": KeyboardInterrupt}


@pytest.mark.parametrize("way_out", list(WAYS_OUT))
@pytest.mark.parametrize("motion", ["to_rest", "follow"])
def test_every_way_out_of_a_motion_stops_the_arm_once(motion, way_out):
    rig, operator = RaisingRig(WAYS_OUT[way_out]), Recording()
    arm = ArmMotion(rig, operator)
    move = (lambda: arm.to_rest()) if motion == "to_rest" else (lambda: arm.follow([{}], "resetting the cube", 30))
    expected = (TO_REST_RAISES if motion == "to_rest" else FOLLOW_RAISES)[way_out]
    if expected is None:
        move()
    else:
        with pytest.raises(expected):
            move()
    assert rig.stops == 1
    assert arm.interrupted == (way_out == "Ctrl-C")
    assert arm.held == (expected is not None)      # a move to rest confirmed and moved again
    assert operator.moving and operator.moving[-1] is None and operator.moving[0] is not None
    assert operator.moving.count(None) == len(operator.moving) // 2   # each announcement cleared
    if way_out in ("stop key", "blocked"):
        assert any("holds until you confirm" in line or "blocked" in line for line in operator.messages)
