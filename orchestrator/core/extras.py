"""The install's optional extras (pyproject.toml `[project.optional-dependencies]`): which extra
brings a module the core install lacks, and the one line that says how to get it.

The core install (`uv run orchestrator ...`, `pip install so101-ab-orchestrator`) runs the
simulated rig, judging, the report and the store on SQLite. `lerobot` brings LeRobot and torch
(real arms, the twin, LeRobot policies, the dataset export), `rerun` the Rerun SDK (`view`),
`postgres` psycopg (`--store postgresql://...`). A verb that needs an extra says so in one line
and exits 2 (`MissingExtra`): explicitly where the need is known before anything starts
(`require_extra`), and from the CLI for a module found missing on the way (`missing_extra`).
"""

from __future__ import annotations

import argparse
import importlib.util

from orchestrator.core.errors import BadInput

# The top-level module -> the extra that installs it (the modules the core install lacks).
EXTRA_OF_MODULE = {
    "lerobot": "lerobot", "torch": "lerobot", "torchvision": "lerobot", "transformers": "lerobot",
    "diffusers": "lerobot", "scservo_sdk": "lerobot", "datasets": "lerobot", "draccus": "lerobot",
    "rerun": "rerun", "psycopg": "postgres",
}
# The module whose presence shows an extra is installed.
MODULE_OF_EXTRA = {"lerobot": "lerobot", "rerun": "rerun", "postgres": "psycopg"}


class MissingExtra(BadInput):
    """A verb needs an optional extra that is not installed: one line naming the extra and the
    command that runs the verb with it. Exit 2 (the install is part of the input)."""

    def __init__(self, what: str, extra: str, module: str):
        self.extra, self.module = extra, module
        super().__init__(f"{what} needs the {extra} extra ({module} is not installed here): run it with "
                         f"`uv run --extra {extra} orchestrator ...`, or install the extra once with "
                         f"`uv sync --extra {extra}` (pip: `pip install 'so101-ab-orchestrator[{extra}]'`)")


def verb_words(args: argparse.Namespace) -> str:
    """The verb as typed, with its action (`camera check`, `store init`), for a message."""
    words = [str(getattr(args, "verb", "") or "")]
    words += [str(v) for k, v in vars(args).items() if k.endswith(("_verb", "_action")) and isinstance(v, str)]
    return " ".join(w for w in words if w)


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def require_extra(extra: str, what: str) -> None:
    """Refuse (`MissingExtra`) unless `extra` is installed; `what` names the verb or flag that
    needs it (`doctor --twin`, `export`)."""
    module = MODULE_OF_EXTRA[extra]
    if not _installed(module):
        raise MissingExtra(what, extra, module)


def missing_extra(exc: ModuleNotFoundError, what: str) -> MissingExtra | None:
    """The refusal for a module found missing while `what` ran, when an extra provides it (None
    for any other missing module: that is a bug of the install, not a missing extra)."""
    root = (exc.name or "").split(".")[0]
    extra = EXTRA_OF_MODULE.get(root)
    return MissingExtra(what, extra, root) if extra else None
