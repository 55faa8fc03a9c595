"""The blind judge's keys, in one place for both faces: the terminal judge builds its bindings,
its key bar and its `?` overlay from `KEYS`; the browser judge gets the same list in its state
(`/api/state`, `keys`) and builds its buttons, its key dispatch and its `?` overlay from it.

Each `Key` names an action (`action`), which each face implements once: `JudgeApp.ACTIONS`
(Textual) and `ACTIONS` in `judge.js`. A key is what the judge presses (`shown`), Textual's key
names for it (`textual`) and the browser's `KeyboardEvent.key` values (`browser`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Key:
    shown: str                   # as the key bar and the overlay print it
    action: str                  # the action both faces implement
    text: str                    # what it does, in a word or two (the key bar, the buttons)
    help: str                    # what it does, one line (the `?` overlay)
    textual: tuple[str, ...]     # Textual's key names
    browser: tuple[str, ...]     # KeyboardEvent.key values
    group: str = "label"         # label | play | look | other (the overlay's sections)

    def to_json(self) -> dict:
        return asdict(self)


DIGITS = tuple(str(i) for i in range(1, 10))

KEYS: tuple[Key, ...] = (
    Key("s", "success", "success", "label the episode a success", ("s",), ("s",)),
    Key("f", "failure", "failure", "label the episode a failure (then 1-9: its failure mode)", ("f",), ("f",)),
    Key("u", "unsure", "unsure", "label it unsure (it comes back after the unjudged ones)", ("u",), ("u",)),
    Key("1-9", "mode", "failure mode", "failure mode (the protocol's list) of the failure label just made", DIGITS, DIGITS),
    Key("l", "stage", "stage seen", "the furthest stage you saw: reached, grasped, lifted, held, none",
        ("l",), ("l",)),
    Key("n", "note", "note", "a note with the label (Enter saves, Esc cancels)", ("n",), ("n",)),
    Key("z", "undo", "undo", "undo your last label and go back to its episode", ("z",), ("z",)),
    Key("j", "goto", "go to N", "go to episode N of your order; s, f or u there relabels it", ("j",), ("j",)),
    Key("space", "play", "play/pause", "play or pause (an episode opens paused on its first frame)",
        ("space",), (" ",), "play"),
    Key("left", "back", "-1 frame", "one recorded frame back", ("left",), ("ArrowLeft",), "play"),
    Key("right", "forward", "+1 frame", "one recorded frame on", ("right",), ("ArrowRight",), "play"),
    Key("[", "slower", "slower", "slower (down to x0.25 of true time)", ("left_square_bracket",), ("[",), "play"),
    Key("]", "faster", "faster", "faster (up to x4 of true time)", ("right_square_bracket",), ("]",), "play"),
    Key("e", "end", "end", "jump to the end", ("e",), ("e",), "play"),
    Key("c", "camera", "camera", "next camera, then all cameras side by side", ("c",), ("c",), "look"),
    Key("a", "audit", "first|last", "the first frame beside the last (and the start still, hardware)",
        ("a",), ("a",), "look"),
    Key("m", "zoom", "zoom mark", "zoom on the mark (cameras whose pose is known)", ("m",), ("m",), "look"),
    Key("g", "guide", "height guide", "the success height as a line (cameras whose pose is known)",
        ("g",), ("g",), "look"),
    Key("x", "invalid", "invalid start", "invalid start, then 1-3: why (before you play past the start)", ("x",), ("x",), "look"),
    Key("o", "open", "open video", "open the video in another player (in a browser: a new tab)",
        ("o",), ("o",), "other"),
    Key("?", "help", "help", "this list of keys (any key closes it)", ("question_mark",), ("?",), "other"),
    Key("q", "quit", "quit", "quit (every label is saved already; in a browser: stop the server)",
        ("q",), ("q",), "other"),
)

GROUPS = (("label", "Labels"), ("play", "Playback"), ("look", "Looking closer"), ("other", "Other"))


def key_for(action: str) -> Key:
    """The key of `action` (KeyError if no key has it)."""
    return next(k for k in KEYS if k.action == action)


def help_lines() -> list[str]:
    """The `?` overlay: every key with what it does, in `KEYS`' order (by group), one line each
    (at most 76 characters: the overlay fits an 80 x 24 terminal)."""
    width = max(len(k.shown) for k in KEYS)
    return [f"{k.shown.ljust(width)}  {k.help}" for group, _ in GROUPS for k in KEYS if k.group == group]


def bar_items() -> list[str]:
    """The key bar's items, `key what` each (never split across lines)."""
    return [f"{k.shown} {k.text}" for k in KEYS]


def pack(items: list[str], width: int, gap: int = 2) -> list[str]:
    """`items` on lines at most `width` wide, in order, `gap` spaces apart; an item is never split
    (one wider than `width` gets a line of its own)."""
    lines: list[str] = []
    line = ""
    for item in items:
        if line and len(line) + gap + len(item) > width:
            lines.append(line)
            line = ""
        line = f"{line}{' ' * gap}{item}" if line else item
    if line:
        lines.append(line)
    return lines
