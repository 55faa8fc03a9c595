"""The blind judge: a Textual app that shows episode videos and records labels.

Nothing in this package reads the campaign key (which policy ran which episode): the app
receives a `JudgeSource` (see `source.py`), implemented outside this package by
`orchestrator.judging.blinding.CampaignSource` (a campaign store, through the blinded view) and
`orchestrator.judging.bundle.BundleSource` (a judge bundle folder). Importing this package is cheap;
the Textual app lives in `orchestrator.judging.tui.app`.
"""
