"""The cause of every abort in the report.

Each aborted attempt is recorded with its cause within its class (`attempts.abort_cause`,
schema 4, read from the recorded reason by `store.abort_causes`); the report's aborts section
lists, per policy and class, each cause with its count, in every format; a store older than
schema 4 gets the causes its reasons read as; a judge's sealed connection, the blinded view and
a bundle never carry a cause (a planted canary, with the positive control that the report
shows it).
"""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path
from types import SimpleNamespace

import pytest

from orchestrator.analysis.outcomes import outcomes_from_store
from orchestrator.analysis.report import build_report
from orchestrator.analysis.report.json import to_dict
from orchestrator.cli import main
from orchestrator.policies.lerobot_server import lost
from orchestrator.policies.scripted import ScriptedPickPolicy
from orchestrator.rigs.base import EmergencyStop
from orchestrator.rigs.device_fault import DeviceFault, RestBlocked
from orchestrator.rigs.so101.rig import LeRobotRig
from orchestrator.rigs.so101.servo_alarms import ServoAlarm, ServoReset
from orchestrator.run.bookkeeping import INTERRUPTED_BY_USER, INTERRUPTED_UNANSWERED, abort_class
from orchestrator.run.control_loop import _policy_action
from orchestrator.run.operator_protocol import ESTOP_PENDING, UNANSWERED
from orchestrator.store.abort_causes import CAUSES, abort_cause
from orchestrator.store.sqlite import CampaignStore, new_episode_id
from support.blind_canary import assert_judges_never_read
from support.tiny import DATA, PROTOCOL, run_cli

NAN_MARK, RAISE_MARK = "M01", "M20"
CANARY = "canary-cause-7f3a9c"


def _recorded(exc: BaseException) -> tuple[str, str]:
    """(class, reason) as the runners record an abort raised as `exc` (sequential.py, parallel.py:
    an emergency stop's reason, else `Type: message`)."""
    reason = exc.reason if isinstance(exc, EmergencyStop) else f"{type(exc).__name__}: {exc}"
    return abort_class(exc), reason


def _raised(make) -> BaseException:
    try:
        make()
    except BaseException as exc:  # noqa: BLE001 - the exception is the test's subject
        return exc
    raise AssertionError("nothing was raised")


def _servo_fault(alarm: BaseException) -> DeviceFault:
    try:
        raise alarm
    except (ServoAlarm, ServoReset) as exc:
        return DeviceFault.servo("arm /dev/ttyACM0", exc)


class _NanPolicy:
    def select_action(self, observation):
        return {"shoulder_pan.pos": 1.0, "gripper.pos": float("nan")}


def _rig_nan() -> None:
    rig = SimpleNamespace(_limits={"shoulder_pan.pos": (-90.0, 90.0)}, _range_clipped={})
    LeRobotRig._within_range(rig, {"shoulder_pan.pos": float("inf")})


# LeRobot's OpenCVCamera.async_read when the camera is open and sends nothing new
FROZEN_TEXT = "Timed out waiting for frame from camera front OpenCVCamera(0) after 3000 ms. Read thread alive: True."


# What each writer of an abort records, made by the code that makes it, and the cause it reads as.
PRODUCED = {
    "control loop, NaN": (_recorded(_raised(lambda: _policy_action(_NanPolicy(), {}))), NON := "non-finite action"),
    "LeRobot rig, inf": (_recorded(_raised(_rig_nan)), NON),
    "policy raised": (_recorded(DeviceFault.policy(RuntimeError("CUDA error: illegal memory access"))), "exception"),
    "servo overload": (_recorded(_servo_fault(ServoAlarm("servo alarm: elbow_flex (id 3): overload"))), "overload"),
    "servo overcurrent": (_recorded(_servo_fault(ServoAlarm("servo alarm: wrist_flex (id 4): overcurrent"))),
                          "overcurrent"),
    "overload, the hardware's": ((abort_class(_servo_fault(ServoAlarm("servo alarm: elbow_flex (id 3): overload")), "rig"),
                                  "DeviceFault: arm /dev/ttyACM0: ServoAlarm: servo alarm: elbow_flex (id 3): overload"),
                                 "overload"),
    "overcurrent, the hardware's": (("rig", "DeviceFault: arm /dev/ttyACM0: ServoAlarm: servo alarm: wrist_flex (id 4): "
                                            "overcurrent"), "overcurrent"),
    "voltage alarm": (_recorded(_servo_fault(ServoAlarm("servo alarm: gripper (id 6): supply voltage out of range"))),
                      "servo alarm"),
    "servo reset": (_recorded(_servo_fault(ServoReset("servo torque went off by itself: elbow_flex (id 3)"))),
                    "servo reset"),
    "silent servo": (_recorded(DeviceFault.silent_servos("arm /dev/ttyACM0", ["3 (elbow_flex)"])), "servo no reply"),
    "USB": (_recorded(DeviceFault.arm("arm /dev/ttyACM0", OSError(5, "Input/output error"))), "arm bus"),
    "blocked": (_recorded(RestBlocked("arm /dev/ttyACM0", ["elbow_flex"])), "blocked"),
    "camera": (_recorded(DeviceFault.camera("front", TimeoutError("frame too old"))), "camera"),
    "frozen camera": (_recorded(DeviceFault.camera("front", TimeoutError(FROZEN_TEXT))), "camera"),
    "no frame": (("rig", "RuntimeFailure: camera 'front' delivered no frame at step 3"), "camera"),
    "video writer": (("rig", "RuntimeFailure: video writer for camera 'front' failed: x"), "recording"),
    "policy server": (_recorded(lost("10.0.0.2:8080", "no reply for 5 s")), "policy server lost"),
    "unknown rig error": (_recorded(ValueError("something else")), "other error"),
    "operator stop": (_recorded(EmergencyStop("unsafe motion: it swung", cause="unsafe")), "emergency stop"),
    "redo": (("operator_other", "redo requested by operator: cube slipped"), "redo"),
    "stop, question unanswered": (_recorded(EmergencyStop(ESTOP_PENDING, cause=UNANSWERED)), "emergency stop"),
    "real arm's episode interrupted": (("operator_unanswered", INTERRUPTED_UNANSWERED), "interrupt"),
    "Ctrl-C": (("interrupted", INTERRUPTED_BY_USER), "user interrupt"),
    "killed": (("interrupted", "interrupted: the process stopped during the episode"), "process stopped"),
    "station": (("interrupted", "interrupted: station arm2 stopped during the episode (its claim on the block "
                                "ran out)"), "station stopped"),
    "pool": (("interrupted", "stopped: another trial failed"), "other trial failed"),
    "invalid start": (("invalid_start", "invalid start (judge ann): cube not on its mark"), "invalid start"),
    "damaged": (("rig", "recorded files missing or damaged after a restart: front.mp4"), "damaged files"),
    "taken over": (("rig", "block taken over from station arm2: a pair is never split between two arms"),
                   "block taken over"),
}


@pytest.mark.parametrize("name", list(PRODUCED))
def test_every_abort_the_tool_records_reads_as_its_cause(name):
    (cls, reason), cause = PRODUCED[name]
    assert abort_cause(cls, reason) == cause, (name, cls, reason)
    assert cause in CAUSES[cls]


CHOSEN = ("operator_unsafe", "operator_misplaced", "operator_other")   # the operator's answer at the stop


def test_the_cause_list_is_covered_and_documented():
    """Every cause of `CAUSES` is made by some writer above (none is dead; the three classes the
    operator's answer picks share theirs), and docs/design.md names each one."""
    made = {(cls, cause) for (cls, _), cause in PRODUCED.values()}
    checked = 0
    for cls, causes in CAUSES.items():
        if cls in CHOSEN:
            assert set(causes) == {why for c, why in made if c in CHOSEN}, cls
        else:
            assert {(cls, why) for why in causes} <= made, cls
        checked += 1
    assert checked == 8
    design = (Path(__file__).parents[1] / "docs" / "design.md").read_text()
    documented = [why for causes in CAUSES.values() for why in causes if f"`{why}`" in design]
    assert len(documented) == sum(len(c) for c in CAUSES.values()), set(documented) ^ {
        why for causes in CAUSES.values() for why in causes}


def test_an_old_reason_without_a_class_reads_as_its_cause():
    """Aborts of a store older than schema 3 have no class: every rule with a pattern applies."""
    old = {"e-stop": "emergency stop", "emergency stop by operator": "emergency stop",
           "DeviceFault: policy: boom": "exception", INTERRUPTED_BY_USER: "user interrupt",
           "DeviceFault: policy: ValueError: non-finite action for gripper.pos": "non-finite action",
           "DeviceFault: camera wrist: TimeoutError: frame too old": "camera", "whatever": "unknown", "": "unknown"}
    assert {reason: abort_cause(None, reason) for reason in old} == old
    assert abort_cause("rig", None) == "other error" and abort_cause("future_class", "x") == "unknown"


def test_an_abort_given_no_cause_counts_as_unrecorded():
    from orchestrator.analysis.outcomes import OutcomeSet, TrialOutcome
    from orchestrator.analysis.report.aborts import build_aborts, describe_causes

    outcomes = (TrialOutcome(layout="M1", repeat=0, policy="A", success=False, slot=0,
                             abort_classes=("policy", "rig", "policy"), abort_causes=("exception",)),
                TrialOutcome(layout="M1", repeat=0, policy="B", success=True, slot=1))
    data = OutcomeSet(outcomes=outcomes, policies=("A", "B"), source="x", label_source="x",
                      abort_rules={"policy": "failure", "max_reruns": 3})
    rows = {r.policy: r for r in build_aborts(data).rows}
    assert describe_causes(rows["A"]) == "policy: exception 1, unrecorded 1; rig: unrecorded 1"
    assert describe_causes(rows["B"]) == "none"


def _protocol(tmp_path: Path) -> Path:
    path = tmp_path / "protocol.yaml"
    path.write_text(PROTOCOL.read_text().replace("layout: tiny_layout.yaml", f"layout: {DATA / 'tiny_layout.yaml'}"))
    return path


def _run_nan_campaign(tmp_path: Path, monkeypatch) -> Path:
    """The tiny campaign where B (aim noise 25 mm) returns NaN on NAN_MARK and raises on
    RAISE_MARK, from its 3rd step; both are B's failures by the default `aborts` rules."""
    real_reset, real_select = ScriptedPickPolicy.reset, ScriptedPickPolicy.select_action

    def reset(self, context):
        self._mark_id = context.mark.id
        return real_reset(self, context)

    def select(self, observation):
        action = real_select(self, observation)
        if self.aim_noise_mm == 25.0 and self._k >= 3:
            if self._mark_id == NAN_MARK:
                return {k: math.nan for k in action}
            if self._mark_id == RAISE_MARK:
                raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return action

    monkeypatch.setattr(ScriptedPickPolicy, "reset", reset)
    monkeypatch.setattr(ScriptedPickPolicy, "select_action", select)
    out = tmp_path / "c"
    assert run_cli(out, "--workers", "1", protocol=_protocol(tmp_path)) == 0
    return out


@pytest.fixture
def nan_campaign(tmp_path, monkeypatch) -> Path:
    return _run_nan_campaign(tmp_path, monkeypatch)


@pytest.fixture
def canary_campaign(tmp_path, monkeypatch) -> Path:
    """`nan_campaign` with a canary recorded, by the store's own writer, as the cause of the
    abort that raised (so the row is written as the store writes every abort)."""
    import orchestrator.store.sqlite as sqlite_store

    def planted(cls, reason):
        return CANARY if "illegal memory access" in (reason or "") else abort_cause(cls, reason)

    monkeypatch.setattr(sqlite_store, "abort_cause", planted)
    return _run_nan_campaign(tmp_path, monkeypatch)


def test_each_class_lists_its_causes_in_every_format(nan_campaign, capsys):
    with CampaignStore.open_readonly(nan_campaign) as store:
        aborted = sorted((a["abort_class"], a["abort_cause"]) for a in store.attempts() if a["status"] == "aborted")
        assert aborted == [("policy", "exception"), ("policy", "non-finite action")]
        doc = to_dict(build_report(outcomes_from_store(store)))
    per = doc["aborts"]["per_policy"]
    assert per["B"]["aborted_attempts_by_cause"] == {"policy": {"exception": 1, "non-finite action": 1}}
    assert per["B"]["aborted_attempts_by_class"] == {"policy": 2}
    assert per["A"]["aborted_attempts_by_cause"] == {}
    rendered = {}
    for fmt in ("text", "md", "html", "json"):
        assert main(["report", str(nan_campaign), "--format", fmt]) == 0
        rendered[fmt] = capsys.readouterr().out
    assert len(rendered) == 4
    for fmt in ("text", "md", "html"):
        section = rendered[fmt].split("Aborted attempts")[1]
        assert "policy: exception 1, non-finite action 1" in section, fmt
        assert "aborted attempts by class: cause" in section, fmt
    assert json.loads(rendered["json"])["aborts"]["per_policy"]["B"]["aborted_attempts_by_cause"] == \
        per["B"]["aborted_attempts_by_cause"]


def _downgrade_to_schema_3(db: Path) -> None:
    """The store as schema 3 left it: no `abort_cause` column (its DDL as the step added it) and no
    evidence chain (schema 5)."""
    raw = sqlite3.connect(db)
    raw.execute("DROP TABLE chain")
    raw.execute("ALTER TABLE attempts DROP COLUMN abort_cause")
    raw.execute("ALTER TABLE attempts DROP COLUMN operator_answer")   # schema 6
    raw.execute("ALTER TABLE attempts DROP COLUMN answered_at")
    raw.execute("DROP TABLE audit")   # schema 7
    raw.execute("ALTER TABLE judgments DROP COLUMN stage")   # schema 8
    raw.execute("ALTER TABLE judgments DROP COLUMN stage_times")
    raw.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    raw.execute("PRAGMA user_version = 3")
    raw.commit()
    raw.close()


def test_a_schema_3_store_gets_the_causes_its_reasons_read_as(tmp_path):
    """Migrated to schema 4 (and on), the aborts of an older store get their causes from the recorded
    reasons (here: a policy's NaN and exception, a USB fault, an interruption); a reader of the
    old store sees no such column before."""
    out = tmp_path / "c"
    assert run_cli(out, "--workers", "1", "--stop-after", "1", protocol=_protocol(tmp_path)) == 0
    reasons = [("policy", "DeviceFault: policy: ValueError: non-finite action for gripper.pos"),
               ("policy", "DeviceFault: policy: RuntimeError: boom"),
               ("rig", "DeviceFault: arm /dev/ttyACM0: OSError: [Errno 5] Input/output error"),
               ("interrupted", INTERRUPTED_BY_USER)]
    with CampaignStore.open_for_run(out) as store:
        pending = [t for t in store.trials() if t.state == "pending"]
        for (cls, reason), trial in zip(reasons, pending, strict=False):
            store.abort_attempt(store.begin_attempt(trial.slot, new_episode_id()), reason, cls)
    _downgrade_to_schema_3(out / "campaign.db")
    raw = sqlite3.connect(out / "campaign.db")
    assert "abort_cause" not in [r[1] for r in raw.execute("PRAGMA table_info(attempts)")]
    raw.close()
    with CampaignStore.open_readonly(out) as store:   # upgraded under the lock, then read
        assert store.conn.execute("PRAGMA user_version").fetchone()[0] >= 4
        got = [(a["abort_class"], a["abort_cause"]) for a in store.attempts() if a["status"] == "aborted"]
        done = [a["abort_cause"] for a in store.attempts() if a["status"] == "done"]
    assert got == [("policy", "non-finite action"), ("policy", "exception"), ("rig", "arm bus"),
                   ("interrupted", "user interrupt")]
    assert done == [None]          # only aborts have a cause


def test_the_schema_1_fixture_s_abort_gets_its_cause(tmp_path):
    import shutil

    shutil.copytree(Path(__file__).parent / "fixtures" / "schema1", tmp_path / "c")
    with CampaignStore.open_for_run(tmp_path / "c") as store:
        old = [(a["abort_class"], a["abort_cause"]) for a in store.attempts() if a["status"] == "aborted"]
    assert old and all(got == (None, "emergency stop") for got in old)   # recorded as "e-stop"


def test_a_judge_never_sees_a_cause_a_report_does(canary_campaign, tmp_path, capsys):
    """A canary recorded as an abort's cause: the judge's sealed connection refuses the column,
    and neither the blinded episodes nor a bundle carry it; the positive control: the same
    column read unsealed, and the report, show it."""
    values = assert_judges_never_read(canary_campaign, "abort_cause", CANARY, tmp_path / "bundle", episodes=4)
    assert CANARY in values
    assert main(["report", str(canary_campaign)]) == 0
    assert f"policy: {CANARY} 1, non-finite action 1" in capsys.readouterr().out


@pytest.mark.parametrize("text, age", [(FROZEN_TEXT, "3000"),
                                       ("OpenCVCamera(0) latest frame is too old: 812.4 ms (max allowed: 500 ms).", "812")])
def test_a_frozen_camera_is_one_line_naming_it_and_what_brings_it_back(text, age):
    """Not LeRobot's raw "Timed out waiting for frame ... Read thread alive: True": what happened
    and what to do, on one line; a camera whose read thread ended keeps its own words (control)."""
    fault = DeviceFault.camera("front", TimeoutError(text))
    assert fault.line == (f"camera front: no new frame for {age} ms though it is open (frozen); check the camera: "
                          "unplug its USB cable and plug it in again (a camera that stops sending frames while open "
                          "usually comes back so), or give it a USB port of its own; then run again")
    dead = DeviceFault.camera("front", TimeoutError(text.replace("alive: True", "alive: False")))
    assert ("frozen" in dead.line) is (age != "3000") and "\n" not in fault.line
