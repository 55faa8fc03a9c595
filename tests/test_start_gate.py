"""The start-state check inside a campaign session (`run.start_state.StartGate`), in process on
rendered front-camera images: every measurement recorded with its still, `advise` never holds a
trial, `enforce` asks the operator (retry, override recorded, stop), an unattended session gives
up after `AUTO_START_TRIES` and says why, and a camera moved between trials ends the session."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from orchestrator.core.errors import RuntimeFailure
from orchestrator.design.protocol import load_layout
from orchestrator.run.operator_protocol import AUTO_START_TRIES, AutoOperator, StopRequested, TrialCue
from orchestrator.run.start_state import CameraMoved, StartGate
from support.front_scene import Planted, render_front
from support.repo import REPO

LAYOUT, _ = load_layout(REPO / "layouts" / "grid20.yaml")
M07 = next(m for m in LAYOUT.marks if m.id == "M07")


class SceneRig:
    """A simulated rig whose front camera shows `planted` (changed by the test between trials);
    `prepare_layout` is the simulated hand (here: the planted cube, moved to the mark when
    `fix_on_retry` says the operator corrects it)."""

    def __init__(self, planted: Planted):
        from orchestrator.rigs.profile import load_rig
        from orchestrator.sim.front_camera import front_camera_pose

        self.planted = planted
        self.profile = load_rig(REPO / "hardware" / "sim.yaml").profile
        self.placed: list[str] = []
        self.fix_on_retry = False
        self._pose = front_camera_pose(320, 240)

    def camera_poses(self):
        return {"front": self._pose}

    places_the_cube = True

    def camera_still(self, camera: str):
        return render_front(self.planted)

    def prepare_layout(self, mark, cube, seed):
        self.placed.append(mark.id)
        if mark.id == "off-sheet":
            self.planted = Planted(cube=None, camera_shift_m=self.planted.camera_shift_m)
        elif self.fix_on_retry or self.planted.cube is None:
            self.planted = Planted(cube=(mark.x, mark.y, mark.yaw_deg), camera_shift_m=self.planted.camera_shift_m)


class Store:
    def __init__(self, directory: Path):
        self.directory = directory
        self.events: list[tuple[str, str, int | None, dict | None]] = []

    def log_event(self, kind, message, slot=None, data=None):
        self.events.append((kind, message, slot, data))

    def kinds(self):
        return [e[0] for e in self.events]


class Protocol:
    def __init__(self, mode: str):
        from orchestrator.design.start_check_spec import StartCheckSpec

        self.protocol = type("P", (), {"start_check": StartCheckSpec(mode=mode)})()
        self.layout = LAYOUT


class Trial:
    slot, seed = 7, 0


class Asking(AutoOperator):
    """An operator who answers the refusal with `answers` in turn."""

    def __init__(self, answers):
        super().__init__(say=lambda text: None)
        self.answers, self.asked = list(answers), []

    def start_refused(self, cue, line, still):
        self.asked.append((line, Path(still)))
        return self.answers.pop(0)


CUE = TrialCue(index=1, total=1, done_before=0, campaign_total=40, mark=M07, duration_s=1.0)


def _gate(tmp_path, mode, operator, cube):
    rig = SceneRig(Planted(cube=cube))
    store = Store(tmp_path)
    gate = StartGate(Protocol(mode), rig, store, operator, say=lambda text: None)
    gate.begin_session()
    rig.planted = Planted(cube=cube)
    return gate, rig, store


OFF = (M07.x + 0.010, M07.y, 0.0)


def test_a_cube_on_its_mark_passes_and_is_recorded_with_its_still(tmp_path):
    gate, rig, store = _gate(tmp_path, "enforce", Asking([]), (M07.x, M07.y, 0.0))
    gate.check(Trial(), M07, CUE)
    assert rig.placed == ["off-sheet"]   # the reference over the empty table; the cube never placed again
    assert (tmp_path / "camera-reference" / "reference.json").is_file()
    checks = [e for e in store.events if e[0] == "start_check"]
    assert len(checks) == 1 and checks[0][2] == 7 and checks[0][3]["passes"] is True
    assert (tmp_path / "start_checks" / "0007-1.png").is_file()


def test_advise_shows_the_failure_and_the_trial_starts(tmp_path):
    said = []
    operator = AutoOperator(say=said.append)
    gate, rig, store = _gate(tmp_path, "advise", operator, OFF)
    gate.check(Trial(), M07, CUE)
    assert [e[3]["passes"] for e in store.events if e[0] == "start_check"] == [False]
    assert said and re.match(r"start check \(advise\): cube (9|10|11) mm forward of M07", said[0]), said


@pytest.mark.slow   # simulated trials with rendered start checks, about a second of CPU: the full run; the fast lane keeps the passing check and the refusal's two answers
def test_enforce_asks_the_operator_and_an_override_is_recorded(tmp_path):
    operator = Asking(["retry", "override"])
    gate, rig, store = _gate(tmp_path, "enforce", operator, OFF)
    gate.check(Trial(), M07, CUE)
    assert len(operator.asked) == 2 and re.match(r"cube (9|10|11) mm forward of M07", operator.asked[0][0])
    assert operator.asked[0][1] == tmp_path / "start_checks" / "0007-1.png" and operator.asked[0][1].is_file()
    assert store.kinds().count("start_check") == 2
    assert store.kinds().count("start_correction") == 1 and store.kinds()[-1] == "start_override"


@pytest.mark.slow   # simulated trials with rendered start checks, about a second of CPU: the full run; the fast lane keeps the passing check and the refusal's two answers
def test_a_corrected_cube_passes_on_the_next_check(tmp_path):
    operator = Asking(["retry"])
    gate, rig, store = _gate(tmp_path, "enforce", operator, OFF)
    rig.fix_on_retry = True
    gate.check(Trial(), M07, CUE)
    assert [e[3]["passes"] for e in store.events if e[0] == "start_check"] == [False, True]
    assert "start_override" not in store.kinds()


def test_the_operator_can_end_the_session_at_a_refusal(tmp_path):
    gate, _, _ = _gate(tmp_path, "enforce", Asking(["stop"]), OFF)
    with pytest.raises(StopRequested, match="start check failed at M07"):
        gate.check(Trial(), M07, CUE)


@pytest.mark.slow   # simulated trials with rendered start checks, about a second of CPU: the full run; the fast lane keeps the passing check and the refusal's two answers
def test_an_unattended_session_gives_up_after_its_tries_and_says_why(tmp_path):
    gate, rig, store = _gate(tmp_path, "enforce", AutoOperator(say=lambda t: None), OFF)
    with pytest.raises(RuntimeFailure, match=rf"^start check failed {AUTO_START_TRIES} times at M07: cube (9|10|11) mm forward"):
        gate.check(Trial(), M07, CUE)
    assert store.kinds().count("start_check") == AUTO_START_TRIES


@pytest.mark.slow   # simulated trials with rendered start checks, about a second of CPU: the full run; the fast lane keeps the passing check and the refusal's two answers
def test_a_camera_moved_between_trials_ends_the_session(tmp_path):
    gate, rig, store = _gate(tmp_path, "enforce", Asking([]), (M07.x, M07.y, 0.0))
    gate.check(Trial(), M07, CUE)
    rig.planted = Planted(cube=(M07.x, M07.y, 0.0), camera_shift_m=(0.0, 0.006, 0.0))
    with pytest.raises(CameraMoved, match=r"^camera front moved [0-9.]+ mm"):
        gate.check(Trial(), M07, CUE)
    assert store.kinds()[-1] == "camera_moved"


def test_off_measures_nothing(tmp_path):
    gate, rig, store = _gate(tmp_path, "off", Asking([]), OFF)
    gate.check(Trial(), M07, CUE)
    assert store.events == [] and rig.placed == []
    assert json.dumps(store.events) == "[]"
