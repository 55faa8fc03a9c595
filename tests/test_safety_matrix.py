"""A fault at every point (issue 22 item 2), sampled: a seeded handful of the matrix that
bench/safety_matrix.py runs whole (events x phases x on_stop, one event at the N-th bus
transaction of a short twin campaign; the invariants: tests/support/safety_matrix.py). A canary
run (torque-off disabled) shows the checks can fail."""

from __future__ import annotations

import pytest

from support import safety_matrix as sm
from support.requires import require_module

require_module("lerobot")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

SAMPLE, SEED = 6, 22


@pytest.fixture(scope="module")
def spans(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        return sm.phases(tmp_path_factory.mktemp("base"), mp)


def test_a_run_without_an_event_passes_through_every_phase(spans):
    assert all(spans[p] for p in sm.PHASES), {p: len(spans[p]) for p in sm.PHASES}


@pytest.mark.parametrize("index", range(SAMPLE))
def test_a_seeded_sample_of_the_matrix_keeps_every_invariant(spans, index, tmp_path, monkeypatch):
    todo = sm.cases(spans, 2, sample=SAMPLE, seed=SEED)
    case = todo[index]
    _, _, outcome = sm.run_case(case, tmp_path, monkeypatch)
    assert outcome.violations == [], f"{case.name}: {outcome.violations}"


def test_the_checks_catch_torque_left_on(spans, tmp_path, monkeypatch):
    """The canary: torque-off made a no-op; the torque invariant must report it."""
    import orchestrator.rigs.lerobot as lerobot_rig

    monkeypatch.setattr(lerobot_rig, "torque_off", lambda bus, retries=2: [])
    case = sm.Case("operator_stop", "hold", "episode", spans["episode"][len(spans["episode"]) // 2])
    _, state, outcome = sm.run_case(case, tmp_path, monkeypatch)
    assert state is not None and any(state["torque"])
    assert any(v.startswith("torque:") for v in outcome.violations), outcome.violations


def test_every_event_of_the_issue_is_in_the_matrix():
    needed = {"operator_stop", "ctrl_c", "sigterm", "policy_exception", "nan_action", "camera_failure",
              "usb_unplug", "servo_reset", "corrupt_burst"} | {f"alarm:{j}" for j in sm.JOINTS}
    assert set(sm.EVENTS) == needed and len(sm.PHASES) == 8
