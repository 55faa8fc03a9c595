"""Shared test helpers that are not fakes: repository paths, running the CLI, small recorded
campaigns written the way the runner writes them, and a tiny real ACT checkpoint.

Fakes of hardware (serial bytes, rig profiles pointing at video files) live in `tests/fakes/`.
"""
