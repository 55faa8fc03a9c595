"""Links and command lines in the project's documents (used by tests/test_docs.py): which
relative links name a file or a heading that does not exist, and which `orchestrator ...`
command lines the command's own argument parser (`orchestrator.cli.build_parser`, the one
`orchestrator` runs) refuses."""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
from functools import cache
from pathlib import Path

FENCE = re.compile(r"^[ \t]*(```|~~~)[^\n]*\n.*?^[ \t]*\1[ \t]*$", re.M | re.S)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)
# `orchestrator VERB ...`, as typed or after `uv run [--extra X | --all-extras]`
COMMAND = re.compile(r"^(?:\$ )?(?:uv run (?:--extra [\w-]+ |--all-extras )*)?orchestrator ((?:[a-z][\w-]*).*)$")


def blank_fences(text: str) -> str:
    """The text with every fenced code block blanked, its line count kept."""
    return FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (backticks too), spaces as
    hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The anchors of a document's headings (outside code blocks); a repeated heading gets
    `-1`, `-2`, ... as on GitHub."""
    seen: dict[str, int] = {}
    out = set()
    for heading in HEADING.findall(blank_fences(text)):
        base = anchor(heading)
        n = seen.get(base, 0)
        out.add(base if n == 0 else f"{base}-{n}")
        seen[base] = n + 1
    return out


@cache
def _file_anchors(path: Path) -> frozenset[str]:
    return frozenset(anchors(path.read_text()))


def links(text: str) -> list[tuple[int, str]]:
    """Every Markdown link's target with its line, outside code blocks and code spans."""
    found = []
    for n, line in enumerate(blank_fences(text).splitlines(), 1):
        found += [(n, target) for target in LINK.findall(INLINE_CODE.sub("", line))]
    return found


def broken_links(repo: Path, path: Path, text: str | None = None) -> list[str]:
    """Every relative link in `path` (or in `text`, read as if it were `path`'s) whose file does
    not exist, or whose `#anchor` names no heading of that file, as `file:line: target`."""
    text = path.read_text() if text is None else text
    bad = []
    for n, target in links(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):    # https:, mailto: ...
            continue
        file, _, fragment = target.partition("#")
        where = (path.parent / file).resolve() if file else path
        if not where.exists():
            bad.append(f"{path.relative_to(repo)}:{n}: {target} (no such file)")
        elif fragment and (where.suffix != ".md"
                           or fragment not in (anchors(text) if where == path else _file_anchors(where))):
            bad.append(f"{path.relative_to(repo)}:{n}: {target} (no such heading)")
    return bad


def command_lines(text: str) -> list[tuple[int, str, bool]]:
    """Every `orchestrator ...` command in a document: (line, the words after `orchestrator`,
    whether it is a whole command line). A line of a fenced code block is a whole command line
    (its comment dropped, a trailing backslash joining the next); a code span in the prose
    (`orchestrator judge CAMPAIGN --web`) may leave arguments out."""
    found: list[tuple[int, str, bool]] = []
    for block in FENCE.finditer(text):
        first = text.count("\n", 0, block.start()) + 1
        lines = block.group(0).splitlines()[1:-1]
        k = 0
        while k < len(lines):
            line, start = lines[k].strip(), k
            while line.endswith("\\") and k + 1 < len(lines):
                k += 1
                line = line[:-1].rstrip() + " " + lines[k].strip()
            k += 1
            m = COMMAND.match(re.split(r"\s+#\s", line)[0].strip())
            if m:
                found.append((first + 1 + start, m.group(1), True))
    for n, line in enumerate(blank_fences(text).splitlines(), 1):
        for span in INLINE_CODE.findall(line):
            m = COMMAND.match(span.strip("`").strip())
            if m:
                found.append((n, m.group(1), False))
    return found


def _words(args: str) -> list[str]:
    """The words of a documented command with its notation undone: `[--push]` is given,
    `CAMPAIGN|BUNDLE` is its first choice, `...`, `|` and `CAMPAIGN...`'s dots are dropped."""
    out = []
    for word in shlex.split(args):
        word = word.strip("[]")
        if word.endswith("...") and word != "...":
            word = word[:-3]
        if word in ("", "...", "|"):
            continue
        if "|" in word and not word.startswith("-"):
            word = word.split("|")[0]
        out.append(word)
    return out


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _flags_problem(parser: argparse.ArgumentParser, words: list[str]) -> str | None:
    """For a command that leaves arguments out: the verb (and a sub-verb) exist, and every
    option given is one of that verb's."""
    for k, word in enumerate(words):
        verbs = _subparsers(parser)
        if verbs and not word.startswith("-"):
            if word not in verbs:
                return f"unknown verb {word!r}"
            parser = verbs[word]
        elif word.startswith("-") and word.split("=")[0] not in parser._option_string_actions:
            return f"{' '.join(words[:k]) or 'orchestrator'}: unknown option {word.split('=')[0]}"
    return None


def spelled_out(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """`parser` with every verb's abbreviations of its options turned off: a document spells
    each option out (`--unblind` for `--unblinded` works today and breaks with the next option
    that starts so)."""
    parser.allow_abbrev = False
    for verb in _subparsers(parser).values():
        spelled_out(verb)
    return parser


def command_problem(parser: argparse.ArgumentParser, args: str, whole: bool) -> str | None:
    """Why the parser refuses the documented command (None: it parses). A whole command line
    must parse as written (required arguments included); a code span that leaves arguments out,
    or a line with `...`, needs its verb and its options to exist."""
    words = _words(args)
    if not whole or "..." in args.split():
        return _flags_problem(parser, words)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            parser.parse_args(words)
    except SystemExit as exc:
        if exc.code not in (0, None):
            return err.getvalue().strip().splitlines()[-1] if err.getvalue().strip() else f"exit {exc.code}"
    return None
