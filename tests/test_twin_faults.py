"""Seeded wire faults on the rehearsal twin: each one aborts the running trial
with its cause recorded, leaves the arm safe, and `run` (without the fault) resumes the campaign
to completion. In-process CLI runs (LeRobot imported once); the twin is its own process.

The faults take turns on one campaign and one twin process: fault 1's run aborts trial 1, fault
2's run resumes the campaign and aborts trial 1 again, and so on; then `run` without faults
resumes it to completion on a fresh twin. The fault runs borrow one running twin
(tests/support/shared_twin.py: each run's start of a twin restarts it as a new one with that
run's faults and wire log), so nine twin starts are one; usb_unplug, which takes the twin's port
away, goes last. Each fault has its own test of what its run did; one test checks the resume
after all of them. (Each fault used to get its own campaign and its own resume: 9 x 19 s; then
its own twin process: 68 s for the chain.)"""

from __future__ import annotations

import io
import json
import traceback
from collections import Counter
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from orchestrator.cli import main
from orchestrator.design.protocol import load_protocol
from orchestrator.rigs.profile import load_rig
from orchestrator.rigs.twin.client import start_twin
from orchestrator.store.sqlite import CampaignStore
from support.campaign_files import twin_rig, two_mark_protocol, without_cameras
from support.cli import CliResult
from support.shared_twin import lend
from support.wirelog import wait_for_exit

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

# The order the faults take turns in: usb_unplug last (the twin's port is gone after it).
FAULTS = {
    "corrupt_status": ({"kind": "corrupt_status", "rate": 1.0, "at_step": 3}, "Incorrect status packet"),
    "drop_status": ({"kind": "drop_status", "rate": 1.0, "at_step": 3}, "There is no status packet"),
    "servo_silent": ({"kind": "servo_silent", "servo": "elbow_flex", "at_step": 3}, "There is no status packet"),
    "overload": ({"kind": "overload", "servo": "elbow_flex", "at_step": 3}, "elbow_flex (id 3): overload"),
    "overheat": ({"kind": "overheat", "servo": 4, "at_step": 3}, "wrist_flex (id 4): overheating"),
    "voltage_sag": ({"kind": "voltage_sag", "volts": 3.5, "at_step": 3}, "supply voltage out of range"),
    "camera_freeze": ({"kind": "camera_freeze", "camera": "wrist", "at_step": 3}, "camera wrist: no new frame for"),
    "camera_disconnect": ({"kind": "camera_disconnect", "camera": "front", "at_step": 3},
                          "camera front: RuntimeError: TwinCamera(front) read thread is not running"),
    "usb_unplug": ({"kind": "usb_unplug", "at_step": 3}, "arm /dev/pts/"),
}
# The faults whose runs use the profile's cameras; the others' runs a copy without cameras (their
# aborts, causes and torques are the bus's: no camera to open, no 2 s frame-rate check per run).
CAMERA_FAULTS = ("camera_freeze", "camera_disconnect")

# The cause each fault's abort is recorded with (store/abort_causes.py), within its class.
CAUSE_OF = {"corrupt_status": "arm bus", "drop_status": "arm bus", "servo_silent": "arm bus", "overload": "overload",
            "overheat": "servo alarm", "usb_unplug": "arm bus", "camera_freeze": "camera",
            "camera_disconnect": "camera", "voltage_sag": "servo alarm"}


def run_cli(*argv: str | Path) -> CliResult:
    """`orchestrator.cli.main(argv)` in-process with its output captured (an exception is
    reported as the output, so one fault's failure does not hide the others' results)."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main([str(a) for a in argv])
        except BaseException:  # noqa: BLE001 - shown in the failing test's message
            code = -1
            err.write(traceback.format_exc())
    return CliResult(code, out.getvalue(), err.getvalue())


def read_store(out: Path) -> tuple[list[dict], int]:
    """(attempts, trials done) of the campaign at `out` (([], 0) before it exists)."""
    if not (out / "campaign.db").exists():
        return [], 0
    with CampaignStore.open_readonly(out) as store:
        return store.attempts(), sum(t.state == "done" for t in store.trials())


@dataclass
class FaultRun:
    result: CliResult
    before: list[dict]          # the campaign's attempts before this fault's run
    after: list[dict]           # and after it
    done: int                   # trials done after it
    torque_at_exit: list[int] | None = None   # the twin's Torque_Enable registers when the run stopped it


@dataclass
class Chain:
    runs: dict[str, FaultRun] = field(default_factory=dict)
    campaign: Path | None = None
    loans: int = 0              # the fault runs that borrowed the shared twin
    resumed: CliResult | None = None
    report: CliResult | None = None


# Session scope: a worker that runs another module's tests between this one's would build a
# module fixture again. (It is still built once per worker that runs tests of this module:
# `--dist loadgroup` does not group with pytest 9.2, see tests/support/lanes.py.)
@pytest.fixture(scope="session")
def chain(tmp_path_factory) -> Chain:
    folder = tmp_path_factory.mktemp("twin_faults")
    rig = twin_rig(folder)
    # LeRobot's default read retries (2: three tries) instead of the shipped profile's 5. The bus
    # faults here are permanent (every status packet corrupted or dropped, a servo silent): after
    # one, every read and write of the stop, the move to rest and the torque off fails whatever the
    # retries, each try a ~50 ms timeout; six tries made those teardowns 7-14 s of each such run
    # (measured at load 20: drop_status's run 25.6 s, 14.4 s of it after the fault). The aborts,
    # their causes and the torque at exit do not depend on the count (test_twin_safety.py's 1 %
    # corruption is where the shipped retries are shown to keep trials alive).
    assert rig.read_text().count("num_read_retries: 5") == 1
    rig.write_text(rig.read_text().replace("num_read_retries: 5", "num_read_retries: 2"))
    bus_rig = folder / "so101_twin_bus.yaml"
    bus_rig.write_text(without_cameras(rig.read_text()))
    protocol = two_mark_protocol(folder, "{type: scripted, aim_noise_mm: 3}", duration_s=1.0, fps=30)
    # An overload under the policy's commands is the policy's abort class, by default its failure
    # (tests/test_aborts.py); here every fault is re-run, so all nine take turns on one trial.
    protocol.write_text(protocol.read_text() + "aborts: {policy: rerun, max_reruns: 20}\n")
    layout = folder / "layout2.yaml"
    layout.write_text("\n".join(l for l in layout.read_text().splitlines() if "id: M02" not in l) + "\n")
    chain = Chain(campaign=folder / "campaign")

    def args(profile: Path) -> list:
        return ["run", protocol, "--rig", profile, "--twin", "--unattended", "--out", chain.campaign]

    with start_twin(load_rig(rig), load_protocol(protocol)) as twin, lend(twin) as loans:
        for name, (fault, _) in FAULTS.items():
            faults_file = folder / f"faults_{name}.yaml"
            faults_file.write_text(yaml.safe_dump({"seed": 3, "faults": [fault]}))
            before, _ = read_store(chain.campaign)
            wire = folder / f"wire_{name}.jsonl"
            result = run_cli(*args(rig if name in CAMERA_FAULTS else bus_rig),
                             "--twin-faults", faults_file, "--twin-wire-log", wire)
            after, done = read_store(chain.campaign)
            exit_line = wait_for_exit(wire).exit
            chain.runs[name] = FaultRun(result, before, after, done, list(exit_line["torque"]))
            if result.code != 1 or done:   # this one did not abort: the next fault gets a new campaign
                chain.campaign = folder / f"campaign_after_{name}"
        chain.loans = len(loans)
    chain.resumed = run_cli(*args(rig))   # a fresh twin, as `run --twin` starts it
    chain.report = run_cli("report", chain.campaign, "--format", "json")
    return chain


@pytest.mark.parametrize("name", list(FAULTS))
def test_fault_aborts_the_trial_with_its_cause(name, chain):
    run = chain.runs[name]
    cause = FAULTS[name][1]
    err = run.result.err[-2000:]
    assert run.result.code == 1, f"{name}: exit code {run.result.code}\n{err}"
    assert "aborted" in run.result.err and cause in run.result.err, f"{name}: {cause!r} not in\n{err}"
    # one new attempt, aborted with the recorded cause; the earlier ones are left as they were
    assert run.after[: len(run.before)] == run.before, f"{name}: earlier attempts changed"
    assert [a["status"] for a in run.after[len(run.before):]] == ["aborted"], (name, run.after)
    assert cause in run.after[-1]["reason"], (name, run.after[-1]["reason"])
    assert run.done == 0, f"{name}: {run.done} trials done"
    # the cause's class: the policy's for an overload (it drove the arm into something), else the rig's
    assert run.after[-1]["abort_class"] == ("policy" if name == "overload" else "rig"), (name, run.after[-1])
    assert run.after[-1]["abort_cause"] == CAUSE_OF[name], (name, run.after[-1])   # its cause within the class
    assert run.after[-1]["settles"] is None


@pytest.mark.parametrize("name", list(FAULTS))
def test_every_fault_ends_with_all_six_torques_off_or_the_operator_told(name, chain):
    """The twin's own registers when it stopped (its wire log's exit line). An overload
    used to leave the servos after the alarmed one torqued. A servo nothing reaches (a pulled USB
    cable, a silent servo) cannot be switched off from here: then each one is named to the
    operator ("TORQUE MAY STILL BE ON: ... (id N) ... switch off its power supply")."""
    run = chain.runs[name]
    still_on = [i + 1 for i, on in enumerate(run.torque_at_exit) if on]
    told = run.result.out + run.result.err
    if name not in ("usb_unplug", "servo_silent"):
        assert still_on == [], (name, run.torque_at_exit)
    for servo_id in still_on:
        assert "TORQUE MAY STILL BE ON" in told and f"(id {servo_id})" in told, (name, still_on, told[-2000:])
    if name == "usb_unplug":
        assert "TORQUE MAY STILL BE ON" in told, told[-2000:]


def test_run_resumes_to_completion_after_the_faults(chain):
    assert chain.loans == len(FAULTS)   # every fault's run borrowed the one twin (the control of the restarts)
    assert chain.resumed.code == 0, chain.resumed.err[-2000:]
    assert "2/2 trials done" in chain.resumed.out, chain.resumed.out
    assert chain.report.code == 0, chain.report.err[-2000:]
    report = json.loads(chain.report.out)
    assert report["campaign"]["complete"] is True
    aborted = [name for name, run in chain.runs.items() if run.result.code == 1]
    stored = [(a["status"], (a["reason"] or "")[:80]) for a in read_store(chain.campaign)[0]]
    assert report["campaign"]["aborted"] == len(aborted) == len(FAULTS), (report["campaign"], aborted, stored)
    attempts, done = read_store(chain.campaign)
    assert done == 2
    assert [a["status"] for a in attempts] == ["aborted"] * len(FAULTS) + ["done", "done"], attempts
    for attempt, (name, (_, cause)) in zip(attempts, FAULTS.items(), strict=False):
        assert cause in attempt["reason"], (name, attempt["reason"])
    by_cause: Counter = Counter()    # the report's aborts section: each class with its causes
    for row in report["aborts"]["per_policy"].values():
        by_cause.update({(cls, why): n for cls, causes in row["aborted_attempts_by_cause"].items()
                         for why, n in causes.items()})
    assert by_cause == Counter(("policy" if name == "overload" else "rig", CAUSE_OF[name]) for name in FAULTS)
