"""The report's headline says when a judge disagrees with physics (simulation) or with the other
judges on `raters.FLAG_RATE` or more of the episodes, in the text, HTML and JSON report; a kappa
that is 0/0 (every label of both raters one class) is printed `undefined`, never 1.00.

The campaign is `tests/support/export_campaign.py`'s simulated one (3 marks x 2 policies, physics
known); the judges' labels are written here, each against physics as this test reads it from
the store, so the expected counts do not come from the code under test."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from orchestrator.analysis.report.raters import FLAG_RATE, RaterAgreement, judge_flags
from orchestrator.analysis.stats import binary_agreement, cohen_kappa, fleiss_kappa
from orchestrator.cli import main
from orchestrator.store.sqlite import CampaignStore
from support.export_campaign import make_campaign


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    return make_campaign(tmp_path_factory.mktemp("flags"))


@pytest.fixture
def campaign(template, tmp_path) -> Path:
    return Path(shutil.copytree(template, tmp_path / "campaign"))


def physics_of(campaign: Path) -> dict[str, bool]:
    with CampaignStore.open_readonly(campaign) as store:
        return {e["id"]: bool(e["physics_success"]) for e in store.episodes()}


def label(campaign: Path, judge: str, says) -> None:
    with CampaignStore.open_for_labels(campaign) as store:
        for episode, verdict in says.items():
            store.add_judgment(episode, judge, verdict)


def report(campaign: Path, fmt: str, tmp_path: Path) -> str:
    out = tmp_path / f"r.{fmt}"
    assert main(["report", str(campaign), "--judge", "physics", "--format", fmt, "--out", str(out)]) == 0
    return out.read_text()


def test_a_judge_who_disagrees_with_physics_is_in_the_headline_of_every_format(campaign, tmp_path):
    physics = physics_of(campaign)
    episodes = sorted(physics)
    assert len(episodes) == 6 and 0 < sum(physics.values()) < 6
    truth = {e: "success" if physics[e] else "failure" for e in episodes}
    flipped = {**truth, episodes[0]: "failure" if physics[episodes[0]] else "success"}
    label(campaign, "alice", flipped)                             # 1 of 6 wrong: 17 %
    label(campaign, "bob", truth)                                 # never wrong: the negative controls
    label(campaign, "carol", truth)                               # (with two judges, each disagrees with the other)
    text = report(campaign, "text", tmp_path)
    head = text.split("\n\n", 1)[0]                               # the lines under the title
    assert ("Judges: alice disagrees with physics on 1 of 6 episodes (17%; flagged at 5% or more)" in head
            and "Judges: bob" not in text and "Judges: carol" not in text), head
    assert "Judges: alice disagrees with the other judges' consensus on 1 of 6 episodes" in head
    doc = json.loads(report(campaign, "json", tmp_path))
    flags = {(f["judge"], f["reference"]): (f["disagree"], f["items"]) for f in doc["judge_flags"]}
    assert flags == {("alice", "physics"): (1, 6), ("alice", "consensus"): (1, 6)}
    assert {f["flag_rate"] for f in doc["judge_flags"]} == {FLAG_RATE}
    html = report(campaign, "html", tmp_path)
    assert html.index("alice disagrees with physics on 1 of 6") < html.index("Raters against physics")


def test_the_flag_starts_at_the_stated_rate():
    def row(disagree: int, items: int, rater: str = "alice") -> RaterAgreement:
        return RaterAgreement(rater, "physics", items, 0, {"success_success": items - disagree, "success_failure": disagree,
                                                           "failure_success": 0, "failure_failure": 0},
                              (items - disagree) / items, 0.0, (0.0, 0.0))

    assert [f.disagree for f in judge_flags((row(2, 40),))] == [2]   # 5 %: the 2 of 40 mislabelled
    assert judge_flags((row(1, 40),)) == ()                          # 2.5 %: below
    assert judge_flags((row(9, 40, rater="auto"),)) == ()            # the advisory rater is not flagged
    assert judge_flags((row(0, 40),)) == ()


def test_kappa_of_one_class_only_is_undefined_not_one(campaign, tmp_path):
    assert math.isnan(cohen_kappa(["success"] * 6, ["success"] * 6))
    assert cohen_kappa(["success"] * 6, ["failure"] * 6) == 0.0       # both constant, opposite: no agreement
    assert cohen_kappa(["success", "failure"] * 3, ["success", "failure"] * 3) == 1.0   # positive control
    assert math.isnan(fleiss_kappa([[3, 0]] * 5))
    assert math.isnan(binary_agreement([True] * 6, [True] * 6)["kappa"])
    episodes = sorted(physics_of(campaign))
    label(campaign, "carol", dict.fromkeys(episodes, "success"))
    label(campaign, "dave", dict.fromkeys(episodes, "success"))
    text = report(campaign, "text", tmp_path)
    assert "Cohen's kappa carol vs dave: undefined (every label one class) on 6 episodes" in text
    assert "1.000 on 6" not in text
    doc = json.loads(report(campaign, "json", tmp_path))
    assert doc["judges"]["cohen_kappa"][0]["kappa"] is None
