"""What `orchestrator compare` reads: every trial of several campaigns as one table, each trial
with its task, its policy's method, training seed and step, and whether its stratum is held out.

A campaign store gives its trials through `outcomes_from_store` (the same labels as `report`)
and its frozen protocol (what each policy is, `design.identity`; which strata its layout holds
out). Its task is the name a suite gives it, else its protocol's `name`. An outcomes CSV
(`compare_csv.py`) gives trials recorded elsewhere; each (file, task) is one campaign there.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from orchestrator.core.errors import BadInput
from orchestrator.design.identity import policy_identity
from orchestrator.store.sqlite_file import DB_NAME


@dataclass(frozen=True)
class Identity:
    """One trained checkpoint: method, training seed (None: one run) and step (None: no ladder)."""

    method: str
    seed: int | None = None
    step: int | None = None

    @property
    def name(self) -> str:
        """As the report names it: `X`, `X seed 1`, `X seed 1 step 5000`."""
        return self.method + (f" seed {self.seed}" if self.seed is not None else "") + (
            f" step {self.step}" if self.step is not None else "")


@dataclass(frozen=True)
class Trial:
    """One trial as compare sees it (success None: not known, left out of every count)."""

    campaign: str              # the campaign's key (`Campaign.key`)
    task: str
    policy: str                # its label in the campaign
    identity: Identity
    layout: str
    repeat: int
    success: bool | None
    stratum: str | None = None
    held_out: bool = False


@dataclass(frozen=True)
class Campaign:
    """One campaign behind the comparison, with what identifies it."""

    key: str                   # unique among the inputs: the campaign's name, made unique
    task: str
    source: str                # directory, or CSV path
    campaign_id: str = ""
    protocol_name: str = ""
    protocol_sha256: str = ""
    label_source: str = ""
    success_test: str | None = None       # the protocol's `success` block as JSON (None: a CSV)
    policies: tuple[tuple[str, Identity], ...] = ()
    held_out_strata: tuple[str, ...] = ()
    scheduled: int = 0
    known: int = 0                        # trials of known outcome
    warnings: tuple[str, ...] = ()
    seed_pairing: str = "none"            # the protocol's `analysis.seed_pairing` (a CSV: none)


@dataclass(frozen=True)
class CampaignSource:
    """A campaign to read: its directory, and optionally its task name, store URL and judge."""

    path: Path
    task: str | None = None
    store: str | None = None
    judge: str | None = None


def unique_key(name: str, taken: set[str]) -> str:
    """`name`, or `name#2`, `name#3` ... when taken; added to `taken`."""
    key, n = name, 2
    while key in taken:
        key, n = f"{name}#{n}", n + 1
    taken.add(key)
    return key


def read_campaign(source: CampaignSource, taken: set[str]) -> tuple[Campaign, list[Trial]]:
    """One campaign store, read-only, under `source.store` when given (PostgreSQL); keyed by
    the campaign's name (made unique among `taken`)."""
    from orchestrator.analysis.outcomes import outcomes_from_store
    from orchestrator.store.postgres import using_server
    from orchestrator.store.sqlite import CampaignStore

    db = source.path / DB_NAME
    with using_server(source.store):
        store = CampaignStore.open_readonly(source.path)
        try:
            data = outcomes_from_store(store, source.judge)
            frozen = store.frozen_protocol()
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise BadInput(f"{db}: campaign store is damaged ({type(exc).__name__}: {exc})") from None
        finally:
            store.close()
    protocol = frozen.protocol
    task = source.task or protocol.name
    key = unique_key(data.campaign_name or Path(source.path).resolve().name or "campaign", taken)
    identities = {label: Identity(*policy_identity(label, spec)) for label, spec in protocol.policies.items()}
    held = tuple(sorted(s for s in {m.stratum for m in frozen.layout.marks} if frozen.layout.held_out(s)))
    trials = [Trial(campaign=key, task=task, policy=o.policy, identity=identities[o.policy], layout=o.layout,
                    repeat=o.repeat, success=o.success, stratum=o.stratum,
                    held_out=o.stratum is not None and frozen.layout.held_out(o.stratum))
              for o in data.outcomes if o.policy in identities]
    campaign = Campaign(key=key, task=task, source=str(source.path), campaign_id=data.campaign_id,
                        protocol_name=protocol.name, protocol_sha256=data.protocol_sha256,
                        label_source=data.label_source,
                        success_test=json.dumps(protocol.success.model_dump(), sort_keys=True),
                        policies=tuple(identities.items()), held_out_strata=held,
                        scheduled=data.scheduled_trials,
                        known=sum(1 for t in trials if t.success is not None), warnings=data.warnings,
                        seed_pairing=protocol.analysis.seed_pairing)
    return campaign, trials


def success_words(test: str | None) -> str:
    """A campaign's success test in words, for the one-line refusal."""
    if test is None:
        return "unknown (outcomes CSV)"
    spec = json.loads(test)
    return (f"{spec.get('kind')} >= {spec.get('min_height_m')} m for {spec.get('hold_s')} s"
            if spec.get("kind") == "lift_and_hold" else test)
