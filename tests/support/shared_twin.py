"""One twin process lent to several `orchestrator ... --twin` commands run in this process.

Each `--twin` command starts a twin process (`commands/twin_options.twin_session` ->
`rigs.twin.client.start_twin`: MuJoCo's scene and the camera renderer, 1.5-4 s depending on the
machine's load) and stops it when it ends. A test that runs several commands in this process can
lend them one running twin instead: within `lend(twin)`, a command's start of a twin restarts
`twin` (`Twin.restart`: as a new twin on the same port and camera files, a new arm at rest, the
command's `--twin-faults` or profile faults and its wire log) and hands it out with the
command's own profile swapped onto it (`swap_sources`: a profile without cameras uses none of
the twin's); the command's stop of its twin is another restart, which ends that wire log with
its exit line as a stopped twin does. After `usb_unplug` (the port gone) the stop closes `twin`.

The fresh twin of `run --twin` stays tested wherever this is not used (test_twin_faults.py's
resume, every fresh-process `run --twin`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from orchestrator.rigs.profile import LoadedRig
from orchestrator.rigs.twin import client
from orchestrator.rigs.twin.client import Twin, TwinError, swap_sources, wire_log_path


class LentTwin:
    """What `start_twin` returns within `lend`: `rig` (the command's profile on the lent twin)
    and `close` (a restart, or the twin closed once its USB cable is pulled)."""

    def __init__(self, twin: Twin, loaded: LoadedRig):
        self.twin = twin
        self.rig = swap_sources(loaded, twin)

    def close(self) -> None:
        try:
            self.twin.restart()
        except TwinError:   # usb_unplug: the port is gone, this twin cannot serve again
            self.twin.close()


@contextmanager
def lend(twin: Twin) -> Iterator[list[LentTwin]]:
    """Within the block every `start_twin` lends `twin` (see the module docstring); yields the
    list of the loans made (a test asserts its commands did borrow)."""
    loans: list[LentTwin] = []

    def start(loaded: LoadedRig, protocol=None, faults: dict | None = None, wire_log=None) -> LentTwin:
        twin.restart(faults if faults is not None else loaded.profile.twin, wire_log_path(loaded, wire_log))
        loans.append(LentTwin(twin, loaded))
        return loans[-1]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(client, "start_twin", start)
        yield loans
