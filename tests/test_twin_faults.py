"""Seeded wire faults on the rehearsal twin (issue #16, item 4): each one aborts the running trial
with its cause recorded, leaves the arm safe, and `run` (without the fault) resumes the campaign
to completion. In-process CLI runs (LeRobot imported once); the twin is its own process."""

from __future__ import annotations

import json

import pytest
import yaml

from orchestrator.cli import main
from orchestrator.store import CampaignStore
from test_lerobot_cli_fresh import two_mark_protocol
from test_twin_campaign import twin_rig
from support.requires import require_module

require_module("lerobot")

FAULTS = {
    "corrupt_status": ({"kind": "corrupt_status", "rate": 1.0, "at_step": 3}, "Incorrect status packet"),
    "drop_status": ({"kind": "drop_status", "rate": 1.0, "at_step": 3}, "There is no status packet"),
    "servo_silent": ({"kind": "servo_silent", "servo": "elbow_flex", "at_step": 3}, "There is no status packet"),
    "overload": ({"kind": "overload", "servo": "elbow_flex", "at_step": 3}, "elbow_flex (id 3): overload"),
    "overheat": ({"kind": "overheat", "servo": 4, "at_step": 3}, "wrist_flex (id 4): overheating"),
    "usb_unplug": ({"kind": "usb_unplug", "at_step": 3}, "arm /dev/pts/"),
    "camera_freeze": ({"kind": "camera_freeze", "camera": "wrist", "at_step": 3}, "camera wrist: TimeoutError"),
    "camera_disconnect": ({"kind": "camera_disconnect", "camera": "front", "at_step": 3},
                          "camera front: ConnectionError"),
    "voltage_sag": ({"kind": "voltage_sag", "volts": 3.5, "at_step": 3}, "supply voltage out of range"),
}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    folder = tmp_path_factory.mktemp("twin_faults")
    rig = twin_rig(folder)
    protocol = two_mark_protocol(folder, "{type: scripted, aim_noise_mm: 3}", duration_s=1.0, fps=30)
    layout = folder / "layout2.yaml"
    layout.write_text("\n".join(l for l in layout.read_text().splitlines() if "id: M02" not in l) + "\n")
    return folder, protocol, rig


@pytest.mark.slow
@pytest.mark.parametrize("name", list(FAULTS))
def test_fault_aborts_the_trial_with_its_cause_and_run_resumes(name, setup, tmp_path, capsys):
    folder, protocol, rig = setup
    fault, cause = FAULTS[name]
    faults_file = tmp_path / "faults.yaml"
    faults_file.write_text(yaml.safe_dump({"seed": 3, "faults": [fault]}))
    out = tmp_path / "campaign"
    args = ["run", str(protocol), "--rig", str(rig), "--twin", "--unattended", "--out", str(out)]
    code = main([*args, "--twin-faults", str(faults_file)])
    err = capsys.readouterr().err
    assert code == 1, err[-2000:]
    assert "aborted" in err and cause in err, err[-2000:]
    with CampaignStore.open_readonly(out) as store:
        attempts = store.attempts()
        assert [a["status"] for a in attempts] == ["aborted"], attempts
        assert cause in attempts[0]["reason"], attempts[0]["reason"]   # the recorded cause
        assert not any(t.state == "done" for t in store.trials())
    code = main(args)
    captured = capsys.readouterr()
    assert code == 0, captured.err[-2000:]
    assert "2/2 trials done" in captured.out
    code = main(["report", str(out), "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["campaign"]["complete"] is True
    assert report["campaign"]["aborted"] == 1
