"""Safety measured on the rehearsal twin (issue 11): LeRobot's real stack drives the twin's
simulated SO-101 over a pseudo-terminal. In-process CLI runs, as tests/test_twin_faults.py."""

from __future__ import annotations

import pytest

from orchestrator.cli import main
from orchestrator.store import CampaignStore
from test_lerobot_cli_fresh import two_mark_protocol
from test_twin_campaign import twin_rig

pytest.importorskip("lerobot")


@pytest.mark.slow
def test_no_trial_aborts_at_one_percent_corrupted_status_packets(tmp_path, capsys):
    """Item 4: 1 % of the twin's status packets corrupted in every episode; LeRobot's retries
    (`num_read_retries`), used by every joint read, keep every trial alive."""
    rig = twin_rig(tmp_path)
    text = rig.read_text()
    faults = ", ".join(f"{{kind: corrupt_status, rate: 0.01, episode: {n}}}" for n in range(1, 5))
    assert "twin: {seed: 0, faults: []}" in text
    rig.write_text(text.replace("twin: {seed: 0, faults: []}", f"twin: {{seed: 11, faults: [{faults}]}}"))
    protocol = two_mark_protocol(tmp_path, "{type: scripted, aim_noise_mm: 3}", duration_s=1.0, fps=30)
    out = tmp_path / "campaign"
    code = main(["run", str(protocol), "--rig", str(rig), "--twin", "--unattended", "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err[-2000:]
    assert "4/4 trials done, 0 aborted" in captured.out
    with CampaignStore.open_readonly(out) as store:
        assert [a["status"] for a in store.attempts()] == ["done"] * 4
