"""Comparing methods across campaigns (`orchestrator compare`): several campaign
stores (and outcomes CSVs), each with its frozen protocol, read as one table of trials.

- trials.py: what a trial, a campaign and a checkpoint's identity are; reading one store;
- outcomes_csv.py: the compare outcomes CSV; suite.py: the suite file;
- combine.py: reading every input and refusing what cannot be combined;
- scores.py: per seed (Wilson), per task (t over seeds), across tasks (rliable's mean, IQM,
  profiles, probability of improvement);
- paired.py: the paired test across tasks on (campaign, mark) units;
- ladders.py: checkpoint ladders; leaderboard.py: Bradley-Terry ratings;
- model.py: the frozen comparison; build.py: `build_comparison`, the only place that calls
  the statistics;
- document.py, render.py, plots.py, json.py: its renderings (schema `orchestrator.compare/2`).
"""

from __future__ import annotations

from orchestrator.analysis.compare.build import build_comparison
from orchestrator.analysis.compare.combine import Inputs, read_inputs
from orchestrator.analysis.compare.json import read_comparison, render_json, to_dict
from orchestrator.analysis.compare.model import SCHEMA, Comparison
from orchestrator.analysis.compare.render import FORMATS, render
from orchestrator.analysis.compare.suite import load_suite
from orchestrator.analysis.compare.trials import CampaignSource

__all__ = ["FORMATS", "SCHEMA", "CampaignSource", "Comparison", "Inputs", "build_comparison", "load_suite",
           "read_comparison", "read_inputs", "render", "render_json", "to_dict"]
