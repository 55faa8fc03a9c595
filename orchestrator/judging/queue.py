"""A judge's queue, as the judging session (`session.py`) keeps it for both faces (the Textual
judge and the browser judge): which episodes are still the judge's to judge, which comes next,
how far along the judge is, and when an invalid start may still be marked.

The order is the judge's own (`blinding.judge_order`); an episode the judge sent back as an
invalid start leaves it. Unjudged episodes come first, in order; then the `unsure` ones, cycling.
"""

from __future__ import annotations

from orchestrator.judging.source import INVALID_START, BlindEpisode, LabelRecord

# An invalid start is judged from the start alone: `x` is accepted while no more than this much of
# the episode has been on screen and its last frame has not been shown (re-rolling an outcome the
# judge has seen would be selection bias).
START_WINDOW_S = 0.5
START_ONLY = (f"An invalid start is judged from the start alone: mark it with x before the episode plays past "
              f"its first {START_WINDOW_S:g} s or its last frame is shown (a). Label this one as you see it.")


def start_only(seen_s: float, end_seen: bool) -> bool:
    """Nothing past the episode's first START_WINDOW_S has been on screen: `seen_s` is the furthest
    clock time shown (seconds from the episode's start), `end_seen` whether its last frame was shown
    (the first frame beside the last, `a`). Only then may the judge mark an invalid start."""
    return seen_s <= START_WINDOW_S and not end_seen


def judgeable(episodes: list[BlindEpisode], labels: dict[str, LabelRecord]) -> list[BlindEpisode]:
    """Episodes still to judge or judged (not those this judge sent back: invalid start)."""
    return [e for e in episodes if getattr(labels.get(e.id), "label", None) != INVALID_START]


def next_to_judge(order: list[BlindEpisode], labels: dict[str, LabelRecord],
                  after: str | None = None) -> BlindEpisode | None:
    """First unjudged episode in the judge's order; then unsure ones, cycling after `after`."""
    for episode in order:
        if episode.id not in labels:
            return episode
    unsure = [e for e in order if labels[e.id].label == "unsure"]
    if not unsure:
        return None
    ids = [e.id for e in unsure]
    if after in ids and len(unsure) > 1:
        return unsure[(ids.index(after) + 1) % len(unsure)]
    return unsure[0]


def find_episode(order: list[BlindEpisode], episode_id: str | None) -> BlindEpisode | None:
    return next((e for e in order if e.id == episode_id), None)


def judging_progress(order, labels) -> tuple[int, int, int]:
    """(decided, total, unsure) of a judge's session: over the episodes still in the judge's order
    only, so the `invalid_start` line a bundle keeps for an episode sent back counts for nothing
    (it is no longer one to judge). `labels` maps episode id to the judge's latest LabelRecord."""
    kept = [labels[e.id].label for e in order if e.id in labels]
    unsure = sum(1 for label in kept if label == "unsure")
    return len(kept) - unsure, len(order), unsure
