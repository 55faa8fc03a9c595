"""Two methods' training seeds of one number are a pair only when the protocol pre-registers it
(`analysis.seed_pairing: by_number`, frozen with the rest). Then compare decides on the seed
pairs (a sign-flip over them) and pairs X seed s with Y seed s on a layout run; otherwise seed
numbers pair nothing. Both ways, with the p-values enumerated here (every sign pattern, every
arrangement of labels), never by the project's statistics."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from orchestrator.analysis.compare import build_comparison
from orchestrator.analysis.compare.combine import Inputs
from orchestrator.analysis.compare.json import to_dict
from orchestrator.analysis.compare.trials import Campaign, Identity, Trial
from orchestrator.core.errors import BadInput
from orchestrator.design.protocol import load_protocol
from support.cli import run_module
from support.compare_campaigns import make_campaign
from support.repo import SIM_PROTOCOL

LAYOUTS = 20
# (task, seed) -> Y's successes of 20; X's are 2 more: every seed pair favours X by 0.1, while the
# seeds' own spread (common to X and Y of one number) is far larger than that
Y_SUCCESSES = {("t0", 0): 3, ("t0", 1): 15, ("t0", 2): 8, ("t0", 3): 12,
               ("t1", 0): 16, ("t1", 1): 4, ("t1", 2): 10, ("t1", 3): 6,
               ("t2", 0): 7, ("t2", 1): 13, ("t2", 2): 17, ("t2", 3): 2}


def _suite(pairing: tuple[str, str, str]) -> Inputs:
    """Three campaigns (one a task), methods X and Y of seeds 0-3 on 20 layouts; campaign i's
    protocol says `seed_pairing: pairing[i]`."""
    trials, campaigns = [], []
    for i, task in enumerate(("t0", "t1", "t2")):
        policies = []
        for method, extra in (("X", 2), ("Y", 0)):
            for seed in range(4):
                k = Y_SUCCESSES[(task, seed)] + extra
                identity = Identity(method, seed)
                policies.append((f"{method}{seed}", identity))
                trials += [Trial(campaign=task, task=task, policy=f"{method}{seed}", identity=identity,
                                 layout=f"L{m:02d}", repeat=0, success=m < k) for m in range(LAYOUTS)]
        campaigns.append(Campaign(key=task, task=task, source="memory", policies=tuple(policies),
                                  scheduled=8 * LAYOUTS, known=8 * LAYOUTS, seed_pairing=pairing[i]))
    return Inputs(tuple(campaigns), tuple(trials))


def _rates() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    return {t: (np.array([(Y_SUCCESSES[(t, s)] + 2) / LAYOUTS for s in range(4)]),
                np.array([Y_SUCCESSES[(t, s)] / LAYOUTS for s in range(4)])) for t in ("t0", "t1", "t2")}


def _sign_flip_p() -> float:
    """Every one of the 2^12 sign patterns of the 12 seed differences, T = sum_t mean(d_t)."""
    d = {t: x - y for t, (x, y) in _rates().items()}
    observed = sum(v.mean() for v in d.values())
    hits = total = 0
    for signs in itertools.product((1, -1), repeat=12):
        s = np.array(signs).reshape(3, 4)
        t = sum((s[i] * d[task]).mean() for i, task in enumerate(("t0", "t1", "t2")))
        hits += abs(t) >= abs(observed) - 1e-9
        total += 1
    assert total == 4096
    return hits / total


def _label_permutation_p() -> float:
    """Every one of the C(8, 4)^3 = 343,000 arrangements of the labels within each task."""
    per_task = []
    for x, y in _rates().values():
        pooled = np.concatenate([x, y])
        per_task.append([pooled[list(c)].mean() - np.delete(pooled, list(c)).mean()
                         for c in itertools.combinations(range(8), 4)])
    observed = sum(x.mean() - y.mean() for x, y in _rates().values())
    a, b, c = (np.array(v) for v in per_task)
    dist = (a[:, None, None] + b[None, :, None] + c[None, None, :]).ravel()
    assert dist.size == 343_000
    return float(np.mean(np.abs(dist) >= abs(observed) - 1e-9))


def _build(pairing: tuple[str, str, str]):
    return build_comparison(_suite(pairing), reps=200, profile_reps=50, board_reps=50)


def test_seed_pairing_pre_registered_decides_on_the_seed_pairs():
    paired_p = _sign_flip_p()
    assert paired_p == pytest.approx(2 / 4096)
    (p,) = _build(("by_number",) * 3).main.paired
    assert p.seeds.paired and p.seeds.p == pytest.approx(paired_p)
    assert p.verdict.startswith("X better than Y across 3 tasks"), p.verdict
    assert "seeds paired by number as the protocols pre-register" in p.verdict
    assert "paired t over seed pairs" in p.verdict
    # on a layout run X seed s meets Y seed s only: 3 tasks x 20 layouts x 4 seed pairs
    assert p.checkpoints is not None and p.checkpoints.table.n == 3 * LAYOUTS * 4
    doc = to_dict(_build(("by_number",) * 3))
    assert doc["paired"][0]["seed_pairing"] == "by_number"
    assert doc["paired"][0]["checkpoints"]["pairing"].startswith("X seed s with Y seed s")
    assert [c["seed_pairing"] for c in doc["campaigns"]] == ["by_number"] * 3


def test_without_the_protocols_saying_so_seed_numbers_pair_nothing():
    """One campaign of the three does not pre-register the pairing: the seeds are unpaired, the
    permutation of labels over 4 + 4 scores a task cannot see X's 0.1 through the seeds' spread."""
    unpaired_p = _label_permutation_p()
    assert unpaired_p > 0.05
    for pairing in (("by_number", "by_number", "none"), ("none",) * 3):
        (p,) = _build(pairing).main.paired
        assert not p.seeds.paired and p.seeds.p == pytest.approx(unpaired_p), pairing
        assert p.verdict.startswith("X vs Y: not established across 3 tasks") and "seeds unpaired" in p.verdict
        assert p.checkpoints is not None and p.checkpoints.table.n == 3 * LAYOUTS * 16     # every X with every Y
        assert to_dict(_build(pairing))["paired"][0]["seed_pairing"] == "none"


def test_seed_pairing_is_a_protocol_field_frozen_with_the_rest(tmp_path):
    text = SIM_PROTOCOL.read_text().replace("../layouts/", str(SIM_PROTOCOL.parent.parent / "layouts") + "/")
    assert "stopping: none}" in text
    path = tmp_path / "protocol.yaml"
    path.write_text(text.replace("stopping: none}", "stopping: none, seed_pairing: by_number}"))
    assert load_protocol(path).protocol.analysis.seed_pairing == "by_number"
    path.write_text(text)
    assert load_protocol(path).protocol.analysis.seed_pairing == "none"          # the default
    path.write_text(text.replace("stopping: none}", "stopping: none, seed_pairing: yes}"))
    with pytest.raises(BadInput) as info:
        load_protocol(path)
    assert "seed_pairing" in info.value.problems[0] and info.value.problems[0].startswith(f"{path}:")


@pytest.mark.subprocess
def test_compare_reads_the_pairing_from_the_frozen_protocols_in_a_fresh_process(tmp_path):
    edit = ("stopping: none}", "stopping: none, seed_pairing: by_number}")
    paired = [make_campaign(tmp_path / "p", name, edit=edit) for name in ("sim_demo", "sim_hard")]
    result = run_module("compare", *paired, "--format", "json", "--reps", "200")
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    assert [c["seed_pairing"] for c in doc["campaigns"]] == ["by_number", "by_number"]
    (entry,) = doc["paired"]
    assert entry["seed_pairing"] == "by_number" and "paired by number" in entry["verdict"]
    mixed = [paired[0], make_campaign(tmp_path / "u", "sim_hard")]
    doc = json.loads(run_module("compare", *mixed, "--format", "json", "--reps", "200").out)
    assert doc["paired"][0]["seed_pairing"] == "none" and "seeds unpaired" in doc["paired"][0]["verdict"]
