"""What of a frozen protocol a judge may be told: the success test (in words, and its height and
hold time for the judge's guides), the failure modes, the cube's size and the marks' positions.
Nothing else of the protocol text (which names the policies and their checkpoints) is passed
on. Every fact is read from the validated protocol model (`protocol.Protocol`, `Layout`), whose
defaults are the only defaults; the campaign store's blinded view, the server store's
`judging_info` table and the automatic rater are all built from this one reading."""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.design.protocol import LoadedProtocol, frozen_protocol_from


@dataclass(frozen=True)
class JudgeFacts:
    success_test: str                          # the test in words (`success_test_text`)
    failure_modes: tuple[str, ...]             # at most nine: keys 1-9
    marks: dict[str, tuple[float, float]]      # mark id -> (x, y) in the layout frame, metres
    min_height_m: float                        # the cube's bottom above the table, to succeed
    hold_s: float                              # for at least this long
    cube_size_m: float


def success_test_text(min_height_m: float, hold_s: float) -> str:
    """The success test in words, as the judge applies it to the video."""
    return (f"cube bottom lifted >= {min_height_m * 100:g} cm, both jaws on it, "
            f"held >= {hold_s:g} s")


def facts_of(loaded: LoadedProtocol) -> JudgeFacts:
    """A judge's facts of a loaded (or frozen) protocol."""
    success, layout = loaded.protocol.success, loaded.layout
    return JudgeFacts(success_test=success_test_text(success.min_height_m, success.hold_s),
                      failure_modes=tuple(str(m) for m in loaded.protocol.judging.failure_modes)[:9],
                      marks={m.id: (float(m.x), float(m.y)) for m in layout.marks},
                      min_height_m=float(success.min_height_m), hold_s=float(success.hold_s),
                      cube_size_m=float(layout.cube.size_m))


def judge_facts(protocol_text: str, layout_text: str) -> JudgeFacts:
    """A judge's facts of the texts frozen in a campaign store (BadInput, one line, if they no
    longer parse: the store was altered)."""
    return facts_of(frozen_protocol_from("campaign store", protocol_text, layout_text))
