"""A bounded exit for a console that cannot close: the terminal went away under it.

When the operator's terminal closes (SIGHUP: the window closed, the SSH link dropped, `tmux
kill-server`), the runner still makes the arm safe and records the abort, then asks the console
to exit. Textual's shutdown then writes its last escape sequences to a terminal that is gone and
can block for ever (its writer queue is bounded; measured with Textual 8: the main thread waited
in `queue.put` with torque already off and the wire quiet), holding the campaign's lock, so the
next `orchestrator run` is refused as a second runner.

`exit_if_wedged(returned, code)` waits `GRACE_S` for the console to return once the session is
over; if it has not, the process exits with `code` (`os._exit`: every trial's bookkeeping was
committed when the session ended, and the store is built to survive a kill at any point).
"""

from __future__ import annotations

import logging
import os
import threading

GRACE_S = 5.0

logger = logging.getLogger(__name__)


def exit_if_wedged(returned: threading.Event, code: int, grace_s: float = GRACE_S) -> None:
    """In a daemon thread: after `grace_s` without `returned`, log it and `os._exit(code)`."""
    def watch() -> None:
        if returned.wait(grace_s):
            return
        logger.error("the console did not close %.0f s after the session ended (the terminal is gone?); "
                     "exiting with code %d, the arm already made safe", grace_s, code)
        logging.shutdown()
        os._exit(code)

    threading.Thread(target=watch, name="orchestrator-console-exit", daemon=True).start()
