"""A suite file: the campaigns to compare with their task names (`orchestrator compare
suite.yaml`), validated like a protocol (every problem `path:line:col: message`).

    campaigns:
      - {path: ../recordings/pick-centre, task: pick-centre}
      - {path: ../recordings/pick-far, task: pick-far, store: postgresql://lab@db/far, judge: alice}
    outcomes: [other-lab.csv]

Paths are relative to the suite file. `task` defaults to the campaign protocol's `name`;
`store`, the campaign's PostgreSQL store; `judge`, whose labels count (default as `report`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.analysis.compare.trials import CampaignSource
from orchestrator.design.located_errors import load_validated


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SuiteCampaign(_Strict):
    path: Annotated[str, Field(min_length=1)]
    task: Annotated[str, Field(min_length=1, max_length=64)] | None = None
    store: str | None = None
    judge: str | None = None


class Suite(_Strict):
    name: str = ""
    campaigns: list[SuiteCampaign] = []
    outcomes: list[Annotated[str, Field(min_length=1)]] = []


def load_suite(path: Path) -> tuple[list[CampaignSource], list[Path]]:
    """The suite's campaigns and outcomes CSVs, paths resolved from the suite's folder."""
    suite, _, _, _ = load_validated(Path(path), "suite", Suite)
    folder = Path(path).parent
    sources = [CampaignSource(path=folder / c.path, task=c.task, store=c.store, judge=c.judge)
               for c in suite.campaigns]
    return sources, [folder / o for o in suite.outcomes]
