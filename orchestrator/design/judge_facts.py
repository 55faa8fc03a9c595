"""What of a frozen protocol a judge may be told: the success test in words, the failure modes
and the marks' positions. Nothing else of the protocol text (which names the policies and their
checkpoints) is passed on; the campaign store's blinded view and the server store's
`judging_info` table are both built from this one reading."""

from __future__ import annotations

import yaml

from orchestrator.core.errors import BadInput

DEFAULT_FAILURE_MODES = ("missed", "pushed", "dropped", "collision", "other")


def success_test_text(min_height_m: float = 0.04, hold_s: float = 1.0) -> str:
    """The success test in words, as the judge applies it to the video."""
    return (f"cube bottom lifted >= {min_height_m * 100:g} cm, both jaws on it, "
            f"held >= {hold_s:g} s")


def judge_facts(protocol_text: str, layout_text: str) -> tuple[str, tuple[str, ...], dict[str, tuple[float, float]]]:
    """Success test text, failure modes (at most nine: keys 1-9) and `{mark id: (x, y)}` from the
    frozen texts; nothing else."""
    try:
        protocol = yaml.safe_load(protocol_text) or {}
        layout = yaml.safe_load(layout_text) or {}
    except yaml.YAMLError as exc:
        raise BadInput(f"campaign store: frozen protocol is not readable YAML ({exc})") from None
    success = protocol.get("success") or {}
    judging = protocol.get("judging") or {}
    text = success_test_text(float(success.get("min_height_m", 0.04)), float(success.get("hold_s", 1.0)))
    modes = tuple(str(m) for m in judging.get("failure_modes", DEFAULT_FAILURE_MODES))
    marks: dict[str, tuple[float, float]] = {}
    for mark in layout.get("marks") or []:
        try:
            marks[str(mark["id"])] = (float(mark["x"]), float(mark["y"]))
        except (KeyError, TypeError, ValueError):
            continue
    return text, modes[:9], marks
