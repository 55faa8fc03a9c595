"""A shorter idle check for Textual's test pilot (`App.run_test`), set once per test process.

After each key `Pilot.press` waits for the app's messages (`_wait_for_screen`: every message
queued before the key was handled) and then twice for the process to look idle
(`textual._wait.wait_for_idle`): it sleeps in windows of `SLEEP_GRANULARITY` (1/50 s) until one
window used less than `SLEEP_IDLE` (1/20 of the window) of CPU, at least one window each time.
That is at least 40 ms of wall clock a key, more while the player's 30 Hz tick renders: the
judge tests press about 170 keys in the fast lane (docs/benchmarks.md, the fast lane).

Windows of 5 ms (and the same 1/20 of CPU) keep the rule and the message wait and take a quarter
of the time. A test whose state is reached later (decoding and playback run on threads) waits
for it with a deadline (`wait_for` in tests/test_judge_app.py), never on this heuristic. The two
names are Textual's own module attributes; a Textual without them fails here, loudly."""

from __future__ import annotations

WINDOW_S = 0.005


def shorten_idle_wait() -> None:
    import textual._wait as wait

    for name in ("SLEEP_GRANULARITY", "SLEEP_IDLE"):
        assert hasattr(wait, name), f"textual._wait.{name} is gone: update tests/support/pilot_idle.py"
    wait.SLEEP_GRANULARITY = WINDOW_S
    wait.SLEEP_IDLE = WINDOW_S / 20
