"""The referees a campaign run is given (`run.bookkeeping.Referees`): the pre-registered
stopping rule (`analysis.stopping`) and the automatic rater (`judging.auto`). Built here, in the
commands, because those stages come after running a campaign."""

from __future__ import annotations

from orchestrator.judging.auto.labels import rate_recorded
from orchestrator.run.bookkeeping import Referees


def _stop_rule(store, protocol) -> str | None:
    from orchestrator.analysis.stopping import evaluate_stopping  # scipy: only once a rule is registered

    decision = evaluate_stopping(store, protocol)
    return decision.reason if decision.stop else None


def campaign_referees() -> Referees:
    """The referees of every `run`, `demo` and station: the protocol's stopping rule and `auto`."""
    return Referees(stop_rule=_stop_rule, rate_episode=rate_recorded)
