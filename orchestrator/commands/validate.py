"""`orchestrator validate PROTOCOL`: check a protocol and its layout; exit 0 or 2."""

from __future__ import annotations

import argparse

HELP = "check a protocol and its layout (exit 0, or exit 2 with path:line:col lines)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("protocol", help="protocol YAML file")


def run(args: argparse.Namespace) -> int:
    from orchestrator.design.protocol import load_protocol

    loaded = load_protocol(args.protocol)
    p = loaded.protocol
    asked = [(label, spec) for label, spec in p.policies.items()
             if getattr(getattr(spec, "inference", None), "type", "sync") == "rtc"]
    if asked:   # LeRobot is imported only when a policy asks for RTC
        from orchestrator.core.errors import BadInput
        from orchestrator.policies.rtc import rtc_refusal, rtc_unchecked

        for label, spec in asked:
            if note := rtc_unchecked(spec, loaded.path.parent):
                print(f"{loaded.path}: policy {label}: {note}")
        problems = [f"{loaded.path}: policy {label}: {why}" for label, spec in asked
                    if (why := rtc_refusal(spec, loaded.path.parent))]
        if problems:
            raise BadInput(problems)
    print(f"{loaded.path}: ok: {p.name}: {len(p.policies)} policies ({', '.join(p.policies)}), "
          f"{len(loaded.layout.marks)} marks x {p.trials_per_layout}, {p.episode.fps} fps x "
          f"{p.episode.duration_s:g} s; sha256 {loaded.sha256[:12]}")
    for line in _what_it_will_use(loaded):
        print(f"{loaded.path}: {line}")
    return 0


def _what_it_will_use(loaded) -> list[str]:
    """What the protocol leaves to a default or to the draw, said before it is frozen: the success
    test when it gives none, and how the drawn order puts each policy first in its pairs."""
    from collections import Counter

    from orchestrator.design.judge_facts import success_test_text
    from orchestrator.design.schedule import draw_schedule

    p, lines = loaded.protocol, []
    if "success" not in p.model_fields_set:
        lines.append(f"success: none given, so the default: {p.success.kind} "
                     f"(min_height_m {p.success.min_height_m:g}, hold_s {p.success.hold_s:g}): "
                     f"{success_test_text(p.success.min_height_m, p.success.hold_s)}")
    firsts = Counter(t.policy for t in draw_schedule(p, loaded.layout) if t.position == 0)
    units = sum(firsts.values())
    split = ", ".join(f"{label} on {firsts[label]}" for label in p.policies)
    even = "" if len(set(firsts[label] for label in p.policies)) == 1 else (
        f" ({units} cannot be split evenly)" if p.order == "balanced" else " (drawn at random)")
    lines.append(f"order {p.order}: first in its pair{'s' if units != 1 else ''} of {units}: {split}{even}")
    return lines
