"""Reading every input of a comparison and refusing, in one line, campaigns that cannot be
combined: one campaign given twice, different success tests for one task, a method with no
trial of known outcome, nothing to compare."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from orchestrator.analysis.compare.outcomes_csv import read_outcomes_csv
from orchestrator.analysis.compare.trials import (
    Campaign,
    CampaignSource,
    Trial,
    read_campaign,
    success_words,
    unique_key,
)
from orchestrator.core.errors import BadInput


@dataclass(frozen=True)
class Inputs:
    campaigns: tuple[Campaign, ...]
    trials: tuple[Trial, ...]

    @property
    def tasks(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c.task for c in self.campaigns))


def read_inputs(sources: Sequence[CampaignSource], csvs: Sequence[Path]) -> Inputs:
    """Every campaign store and CSV, in the order given."""
    campaigns: list[Campaign] = []
    trials: list[Trial] = []
    taken: set[str] = set()
    for source in sources:
        campaign, rows = read_campaign(source, taken)
        campaigns.append(campaign)
        trials += rows
    for path in csvs:
        found, rows = read_outcomes_csv(Path(path), unique_key(Path(path).stem, taken))
        campaigns += found
        trials += rows
    inputs = Inputs(tuple(campaigns), tuple(trials))
    check_combinable(inputs)
    return inputs


def check_combinable(inputs: Inputs) -> None:
    """BadInput, one line, for the first reason the inputs cannot be combined."""
    if not inputs.campaigns:
        raise BadInput("compare: nothing to compare: give campaign directories, a suite file or --outcomes CSV")
    by_id: dict[str, Campaign] = {}
    for c in inputs.campaigns:
        if not c.campaign_id:
            continue
        if c.campaign_id in by_id:
            raise BadInput(f"compare: campaign {c.campaign_id} is given twice ({by_id[c.campaign_id].source} "
                           f"and {c.source})")
        by_id[c.campaign_id] = c
    tests: dict[str, Campaign] = {}
    for c in inputs.campaigns:
        if c.success_test is None:
            continue
        first = tests.setdefault(c.task, c)
        if first.success_test != c.success_test:
            raise BadInput(f"compare: task {c.task!r} has two success tests: {success_words(first.success_test)} "
                           f"in {first.source}, {success_words(c.success_test)} in {c.source}; one task needs "
                           "one test (name the campaigns' tasks apart in a suite file if they differ)")
    known: dict[str, int] = defaultdict(int)
    where: dict[str, list[str]] = defaultdict(list)
    for c in inputs.campaigns:
        for _, identity in c.policies:
            where[identity.method].append(c.source)
    for t in inputs.trials:
        known[t.identity.method] += t.success is not None
    for method, sources in where.items():
        if not known[method]:
            raise BadInput(f"compare: method {method!r} has no trial with a known outcome (in "
                           f"{', '.join(dict.fromkeys(sources))}); judge its episodes or leave it out")
    if len({t.identity for t in inputs.trials}) < 2:
        raise BadInput("compare: one policy in all the inputs: nothing to compare")
