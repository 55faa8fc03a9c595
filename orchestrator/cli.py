"""The `orchestrator` command: parses arguments and dispatches to one module per verb.

Each verb lives in `orchestrator/commands/<verb>.py` and defines `HELP`, `add_arguments(parser)`
and `run(args) -> int`. Errors become one line on stderr and an exit code (docs/design.md section 4):
0 done, 1 runtime failure, 2 bad input, 130 interrupted. `--debug` shows tracebacks.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import sqlite3
import sys

from orchestrator import __version__
from orchestrator.core.errors import OrchestratorError
from orchestrator.core.extras import missing_extra, verb_words

VERBS = {
    "demo": "demo",
    "validate": "validate",
    "run": "run",
    "judge": "judge",
    "bundle": "bundle",
    "import-labels": "import_labels",
    "report": "report",
    "compare": "compare",
    "plan": "plan",
    "export": "export",
    "view": "view",
    "layout": "layout",
    "camera": "camera",
    "doctor": "doctor",
    "store": "store",
    "twin": "twin",
    "verify": "verify",
}

# Verbs that open a campaign store: `--store postgresql://...` puts it on a PostgreSQL server
# (several arms, orchestrator/store/postgres.py); without it the store is CAMPAIGN/campaign.db.
STORE_VERBS = ("run", "judge", "report", "export", "bundle", "import-labels", "doctor", "verify")


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as one line and exit 2 (its own convention too)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="orchestrator",
                     description="Blinded, paired, interleaved A/B trials of robot policies on SO-101 arms.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    parser.add_argument("--version", action="version", version=f"orchestrator {__version__} (so101-ab-orchestrator)",
                        help="print the version (as run sessions record it) and exit")
    sub = parser.add_subparsers(dest="verb", required=True, metavar="VERB", parser_class=_Parser)
    for verb, module_name in VERBS.items():
        module = importlib.import_module(f".commands.{module_name}", __package__)
        verb_parser = sub.add_parser(verb, help=module.HELP, description=module.HELP)
        verb_parser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                                 help="show tracebacks on errors")
        module.add_arguments(verb_parser)
        if verb in STORE_VERBS:
            verb_parser.add_argument("--store", metavar="URL", default=None,
                                     help="the campaign's store on a PostgreSQL server (postgresql://USER@HOST/DB); "
                                          "the campaign directory then holds only its videos")
        verb_parser.set_defaults(_run=module.run)
    return parser


@functools.cache
def _shared_parser() -> argparse.ArgumentParser:
    """The parser, built once per process: building it costs ~10 ms (every verb's arguments), and
    parsing never changes it, so `main` called many times in one process (the tests) reuses it."""
    return build_parser()


def main(argv: list[str] | None = None) -> int:
    args = _shared_parser().parse_args(argv)
    debug = getattr(args, "debug", False)
    try:
        from orchestrator.store.postgres import using_server

        with using_server(getattr(args, "store", None)):
            code = args._run(args)
    except OrchestratorError as exc:
        if debug:
            raise
        for line in getattr(exc, "problems", None) or str(exc).split("\n") or [type(exc).__name__]:
            line = _printable(line)  # one problem, one line, even with a "\r" in a user's path
            print(f"orchestrator: {line}" if not _located(line) else line, file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        if debug:
            raise
        print("orchestrator: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1
    except sqlite3.DatabaseError as exc:
        if debug:
            raise
        return _store_error(exc)
    except OSError as exc:
        if debug:
            raise
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        print(f"orchestrator: {where}{exc.strerror or exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # a bug: still one line unless --debug
        if debug:
            raise
        missing = missing_extra(exc, verb_words(args)) if isinstance(exc, ModuleNotFoundError) else None
        if missing is not None:   # an optional extra not installed: not a bug
            print(f"orchestrator: {missing}", file=sys.stderr)
            return missing.exit_code
        if type(exc).__module__.startswith("psycopg"):
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            print(f"orchestrator: campaign store (PostgreSQL): {first}", file=sys.stderr)
            return 1
        where = ""
        tb = exc.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        if tb is not None:
            where = f" (at {tb.tb_frame.f_code.co_filename.rsplit('/', 1)[-1]}:{tb.tb_lineno})"
        print(f"orchestrator: internal error: {type(exc).__name__}: {exc}{where}; "
              "rerun with --debug for the traceback", file=sys.stderr)
        return 1
    return int(code or 0)


def _store_error(exc: sqlite3.DatabaseError) -> int:
    """A campaign store that SQLite cannot read: corrupted (exit 2), or busy/full (exit 1)."""
    text = _printable(str(exc))   # SQLite quotes the damaged bytes: one line, whatever they are
    if isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "full" in text or "busy" in text):
        print(f"orchestrator: campaign store: {text}", file=sys.stderr)
        return 1
    print(f"orchestrator: campaign store is damaged or not a campaign store ({text}); "
          "check it with: sqlite3 CAMPAIGN/campaign.db 'PRAGMA integrity_check'", file=sys.stderr)
    return 2


def _printable(line: str) -> str:
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in line)


def _located(line: str) -> bool:
    """True for `path:line:col: message` and `path:line: message` lines."""
    path, _, position = line.split(": ", 1)[0].partition(":")
    return bool(path) and bool(position) and all(p.isdigit() for p in position.split(":"))


def entry() -> None:
    sys.exit(main())
