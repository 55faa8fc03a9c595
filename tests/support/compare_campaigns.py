"""Small campaign stores for `orchestrator compare`, written without running a rig.

`make_suite` writes one campaign per shipped simulated protocol (sim_demo, sim_hard, sim_near:
three tasks) with two methods of three training seeds each, all scripted top-down picks that
differ in aim noise: method `narrow` aims with 3-5 mm of noise, `wide` with 10-14 mm; seed 0 of
`narrow` also has two earlier checkpoints (steps 1000 and 2000, 9 and 6 mm), a ladder. Each
trial's physics outcome is drawn with the probability that a pick of that aim noise succeeds,
exp(-(noise / 14 mm)^2) times the task's own factor (the demo measured 20/20 at 3 mm and 11/20
at 12 mm on the simulator). The layout of `sim_near` holds its `centre` stratum out.
"""

from __future__ import annotations

import math
import random
from pathlib import Path

from orchestrator.design.protocol import load_protocol
from orchestrator.design.schedule import draw_schedule
from orchestrator.store.sqlite import CampaignStore, EpisodeRecord, new_episode_id
from support.repo import GRID20, REPO

TASKS = {"sim_demo": 1.0, "sim_hard": 0.8, "sim_near": 0.9}     # protocol -> success factor
POLICIES = {   # label: (method, seed, step, aim noise mm)
    "N0a": ("narrow", 0, 1000, 9.0), "N0b": ("narrow", 0, 2000, 6.0), "N0": ("narrow", 0, 3000, 3.0),
    "N1": ("narrow", 1, 3000, 4.0), "N2": ("narrow", 2, 3000, 5.0),
    "W0": ("wide", 0, None, 10.0), "W1": ("wide", 1, None, 12.0), "W2": ("wide", 2, None, 14.0),
}


def success_probability(noise_mm: float, factor: float = 1.0) -> float:
    return factor * math.exp(-(noise_mm / 14.0) ** 2)


def _protocol_text(name: str, policies: dict[str, tuple]) -> str:
    """The shipped protocol `name` with its policies replaced by `policies`, its layout local."""
    text = (REPO / "protocols" / f"{name}.yaml").read_text().replace("../layouts/grid20.yaml", "layout.yaml")
    head, rest = text.split("policies:\n", 1)
    body = rest[rest.index("trials_per_layout"):]
    lines = []
    for label, (method, seed, step, noise) in policies.items():
        extra = f", step: {step}" if step is not None else ""
        lines.append(f"  {label}: {{type: scripted, method: {method}, training_seed: {seed}{extra}, "
                     f"aim_noise_mm: {noise}}}\n")
    return head + "policies:\n" + "".join(lines) + body


def make_campaign(folder: Path, protocol: str, policies: dict[str, tuple] = POLICIES, factor: float = 1.0,
                  held_out: str | None = None, seed: int = 0, judged: bool = False, skip: tuple[str, ...] = (),
                  edit: tuple[str, str] | None = None) -> Path:
    """`folder/<protocol>/` holding protocol.yaml, layout.yaml and the campaign `camp`; the
    trials of the policies in `skip` are never run; `edit` replaces a text in the protocol."""
    root = folder / protocol
    root.mkdir(parents=True, exist_ok=True)
    layout = GRID20.read_text() + (f"strata:\n  {held_out}: {{held_out: true}}\n" if held_out else "")
    (root / "layout.yaml").write_text(layout)
    text = _protocol_text(protocol, policies)
    if edit is not None:
        assert edit[0] in text
        text = text.replace(*edit)
    (root / "protocol.yaml").write_text(text)
    loaded = load_protocol(root / "protocol.yaml")
    schedule = draw_schedule(loaded.protocol, loaded.layout)
    directory = root / "camp"
    store = CampaignStore.create(
        directory, name=f"{protocol}-camp", protocol_path=str(loaded.path), protocol_text=loaded.text,
        protocol_sha256=loaded.sha256, layout_text=loaded.layout_text, layout_sha256=loaded.layout_sha256,
        rig_path="hardware/sim.yaml", rig_text="robot: {type: sim_so101}\n", simulated=True, schedule=schedule)
    rng = random.Random(f"{protocol}|{seed}")
    try:
        for t in schedule:
            if t.policy in skip:
                continue
            episode = new_episode_id()
            attempt = store.begin_attempt(t.slot, episode)
            ok = rng.random() < success_probability(policies[t.policy][3], factor)
            store.finish_attempt(attempt, EpisodeRecord(
                episode_id=episode, frames=360, duration_s=12.0, cameras=["front"], files={},
                physics_success=ok, max_lift_m=0.05 if ok else 0.0))
            if judged:
                store.add_judgment(episode, "ann", "success" if ok else "failure")
    finally:
        store.close()
    return directory


def make_suite(folder: Path) -> list[Path]:
    """The three campaigns, one per shipped simulated protocol (task)."""
    return [make_campaign(folder, name, factor=factor, held_out="centre" if name == "sim_near" else None)
            for name, factor in TASKS.items()]
