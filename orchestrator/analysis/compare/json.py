"""The comparison as JSON (docs/design.md, schema `orchestrator.compare/2`) and its reader.

The top-level `methods`, `probability_of_improvement`, `paired`, `ladders`, `leaderboard` and
`profiles` are the main section (the trials not held out); `held_out` holds the same keys for
the held-out strata, or null. Later versions add keys, never change their meaning."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from orchestrator.analysis import stats
from orchestrator.analysis.compare.model import (
    SCHEMA,
    CheckpointPairs,
    Comparison,
    Ladder,
    MethodScore,
    PairedAcross,
    Section,
)
from orchestrator.core.errors import BadInput


def _num(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _ci(iv: stats.Interval) -> dict[str, Any]:
    return {"estimate": _num(iv.estimate), "ci95": [_num(iv.lo), _num(iv.hi)]}


def _seed_key(seed: int | None) -> str:
    return "none" if seed is None else str(seed)


def _method(m: MethodScore) -> dict[str, Any]:
    return {
        "mean": {**_ci(m.mean), "method": m.mean.method}, "iqm": {**_ci(m.iqm), "method": m.iqm.method},
        "runs": m.runs, "unit": "training seed",
        "tasks": {t.task: {
            "mean_over_seeds": t.mean_over_seeds,
            "t95": None if t.t95 is None else [t.t95.lo, t.t95.hi],
            "zero_spread": t.t95 is not None and t.t95.sd == 0,
            "sd": None if t.t95 is None else t.t95.sd,
            "seeds": {_seed_key(s.seed): {"successes": s.successes, "trials": s.trials,
                                          "wilson95": [s.wilson.lo, s.wilson.hi], "step": s.step,
                                          "policies": list(s.policies)} for s in t.seeds}}
            for t in m.tasks}}


def _checkpoints(c: CheckpointPairs | None) -> dict[str, Any] | None:
    if c is None:
        return None
    t = c.table
    pairing = ("X seed s with Y seed s on a layout run (seed pairing pre-registered)" if c.by_seed else
               "every X checkpoint with every Y checkpoint on a layout run")
    return {"unit": "campaign, mark", "pairing": pairing,
            "mid_p": c.mid_p, "exact_p": c.exact_p, "holm_mid_p": c.holm_mid_p, "differ": c.differ,
            "statement": c.statement, "units": c.units, "discordant_units": c.discordant_units,
            "campaigns": c.campaigns,
            "table": {"both": t.both, "x_only": t.a_only, "y_only": t.b_only, "neither": t.neither},
            "difference": {**_ci(c.difference), "method": c.difference.method},
            "cmh": {"chi2": c.cmh_chi2, "p": c.cmh_p}, "notes": list(c.notes)}


def _paired(p: PairedAcross) -> dict[str, Any]:
    s = p.seeds
    iv = s.interval
    test = ("sign-flip over (task, seed number) pairs, stratified by task" if s.paired else
            "permutation of method labels over (task, seed) scores, stratified by task")
    return {"x": p.x, "y": p.y, "unit": "training seed", "test": test,
            "seed_pairing": "by_number" if s.paired else "none", "p": p.p, "permutation_p": s.p, "p_floor": s.floor,
            "exact": s.exact, "arrangements": s.arrangements, "verdict": p.verdict, "significant": p.significant,
            "seeds_x": s.seeds_x, "seeds_y": s.seeds_y, "tasks": list(p.tasks),
            "mean_difference": {"estimate": _num(s.difference),
                                "ci95": None if iv is None else [_num(iv.lo), _num(iv.hi)],
                                "method": "paired-t" if s.paired else "welch-t"},
            "checkpoints": _checkpoints(p.checkpoints), "notes": list(p.notes)}


def _ladder(lad: Ladder) -> dict[str, Any]:
    return {"method": lad.method, "training_seed": lad.seed,
            "steps": [{"step": x.step, "successes": x.successes, "trials": x.trials,
                       "wilson95": [x.wilson.lo, x.wilson.hi]} for x in lad.steps],
            "trend": {"unit": "campaign, mark", "units": lad.trend.units, "exact_p": lad.trend.exact_p, "mid_p": lad.trend.mid_p, "statistic": lad.trend.statistic,
                      "expected": lad.trend.expected, "blocks": lad.trend.blocks, "statement": lad.trend_statement},
            "last": {"step": lad.last, "previous": lad.previous, "later_only": list(lad.later_only),
                     "earlier_only": list(lad.earlier_only), "exact_p": lad.last_exact_p, "mid_p": lad.last_mid_p,
                     "statement": lad.statement}}


def section_dict(s: Section) -> dict[str, Any]:
    b = s.leaderboard
    return {
        "label": s.label,
        "methods": {m.method: _method(m) for m in s.methods},
        "probability_of_improvement": [{"x": p.x, "y": p.y, "tasks": list(p.tasks), **_ci(p.interval),
                                        "method": p.interval.method} for p in s.improvements],
        "profiles": {p.method: {"taus": list(p.taus), "fraction_above": list(p.values), "lo": list(p.lo),
                                "hi": list(p.hi), "method": "clopper-pearson"} for p in s.profiles},
        "paired": [_paired(p) for p in s.paired],
        "ladders": [_ladder(lad) for lad in s.ladders],
        "leaderboard": [] if b is None else [{"name": r.name, "rating": r.rating, "ci95": [r.lo, r.hi],
                                              "comparisons": r.comparisons, "wins": r.wins, "losses": r.losses,
                                              "near_separation": r.near_separation} for r in b.rows],
        "leaderboard_neighbours": [] if b is None else [
            {"a": n.a, "b": n.b, "unit": "campaign, mark", "wins": n.wins, "losses": n.losses, "units": n.units,
             "mid_p": n.mid_p, "holm_p": n.holm_p, "separated": n.separated,
             "head_to_head_log_odds_ci95": [_num(n.lo), _num(n.hi)], "rating_difference": n.rating_difference}
            for n in b.neighbours],
        "leaderboard_notes": [] if b is None else list(b.notes),
        "leaderboard_components": [] if b is None else [list(c) for c in b.components],
        "notes": list(s.notes),
    }


def to_dict(c: Comparison) -> dict[str, Any]:
    main = section_dict(c.main)
    return {
        "schema": SCHEMA, **main, "notes": list(c.notes) + main["notes"],
        "campaigns": [{"key": x.key, "task": x.task, "source": x.source, "campaign_id": x.campaign_id or None,
                       "protocol": x.protocol_name or None, "protocol_sha256": x.protocol_sha256 or None,
                       "labels": x.label_source, "trials_known": x.known, "trials_scheduled": x.scheduled,
                       "held_out_strata": list(x.held_out_strata), "seed_pairing": x.seed_pairing,
                       "policies": {label: {"method": i.method, "training_seed": i.seed, "step": i.step}
                                    for label, i in x.policies}} for x in c.campaigns],
        "settings": {"bootstrap_reps": c.reps, "profile_reps": c.profile_reps, "leaderboard_reps": c.board_reps,
                     "seed": c.seed, "alpha": c.alpha},
        "held_out": None if c.held_out is None else section_dict(c.held_out),
    }


def render_json(c: Comparison) -> str:
    return json.dumps(to_dict(c), indent=2, allow_nan=False) + "\n"


def read_comparison(path: Path) -> dict[str, Any]:
    """The JSON `compare --format json` wrote, refused with one line unless it is readable JSON
    of this schema version."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise BadInput(f"{path}: not a readable comparison JSON ({type(exc).__name__}: {exc})") from None
    schema = doc.get("schema") if isinstance(doc, dict) else None
    if schema != SCHEMA:
        raise BadInput(f"{path}: comparison schema {schema!r}, this version reads {SCHEMA!r}")
    return doc
