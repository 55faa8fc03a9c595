"""The operator console, driven by Textual's pilot while a fake runner calls the Operator bridge
from its own thread (as the real runner does)."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from pathlib import Path

import pytest

from orchestrator.design.protocol import load_layout
from orchestrator.rigs.base import EmergencyStop
from orchestrator.run.console import OperatorConsole, run_console
from orchestrator.run.console.layout_view import describe_mark, render_layout
from orchestrator.run.operator_protocol import Operator, StopRequested, TrialCue
from support.textual_screen import screen_text

REPO = Path(__file__).resolve().parent.parent
LABELS = ("act_policy_v2", "scripted_baseline")  # the fake schedule's policy labels


@pytest.fixture(scope="module")
def layout():
    return load_layout(REPO / "layouts" / "grid20.yaml")[0]


class FakeRunner(threading.Thread):
    """Runs trials of a schedule (which knows the policy labels) through the operator."""

    def __init__(self, op: Operator, layout, steps: int = 1000):
        super().__init__(daemon=True)
        self.op, self.steps = op, steps
        self.schedule = [(layout.marks[6], LABELS[0]), (layout.marks[6], LABELS[1]), (layout.marks[2], LABELS[0])]
        self.log: list = []
        self.episode_steps = [steps, 20, steps]

    def run(self) -> None:
        try:
            for i, (mark, _label) in enumerate(self.schedule):
                cue = TrialCue(index=i + 1, total=3, done_before=4, campaign_total=40, mark=mark, duration_s=12.0)
                self.op.before_trial(cue)
                self.log.append(("started", i))
                self.op.episode_started(cue)
                aborted = None
                try:
                    for k in range(self.episode_steps[i]):
                        self.op.poll(k / 30)
                        time.sleep(0.005)   # pacing: the fake episode loop's step (bounded by its count)
                except EmergencyStop as stop:
                    aborted = stop
                redo = self.op.episode_ended(cue, "emergency stop" if aborted else None)
                self.log.append(("ended", i, aborted.reason if aborted else None, redo))
                self.op.message(f"trial {i + 1} saved")
        except StopRequested as exc:
            self.log.append(("stopped", str(exc)))


async def wait_for(pilot, predicate, timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError("timed out waiting for the console")
        await pilot.pause(0.05)


@pytest.mark.slow   # seconds of real-time waiting: kept out of the fast lane
def test_console_cues_the_mark_counts_down_estops_redoes_and_never_shows_the_policy(layout):
    async def session() -> tuple[list, list[str]]:
        app = OperatorConsole(layout, countdown_s=1.5)
        screens = []
        async with app.run_test(size=(120, 40)) as pilot:
            runner = FakeRunner(app.operator, layout)
            runner.start()
            await wait_for(pilot, lambda: app.state == "place")
            text = screen_text(app)
            screens.append(text)
            assert "Put the cube on mark M07" in text and "●M07" in text.replace(" ", "")
            assert str(app.query_one("#where").content) == describe_mark(layout.marks[6])
            # Enter -> countdown -> the episode starts only after the countdown
            await pilot.press("enter")
            assert app.state == "countdown" and runner.log == []
            await pilot.pause(0.15)
            assert runner.log == [] and "ARM WILL MOVE (policy) in 2 s: space = stop" in screen_text(app)
            await wait_for(pilot, lambda: runner.log == [("started", 0)] and app.state == "episode")
            await pilot.pause(0.2)
            screens.append(screen_text(app))
            assert re.search(r"\d+\.\d s / 12 s", screens[-1])
            # space = emergency stop: the runner's poll raises, then the reason is asked
            await pilot.press("space")
            await wait_for(pilot, lambda: app.state == "reason" and app.query_one("#reason").display)
            screens.append(screen_text(app))
            assert "EMERGENCY STOP" in screens[-1]
            await pilot.press(*"cube slipped", "enter")
            await wait_for(pilot, lambda: len(runner.log) >= 2)
            assert runner.log[1] == ("ended", 0, "emergency stop by operator: cube slipped", None)
            # next trial runs to its end; r asks why and returns the redo reason
            await wait_for(pilot, lambda: app.state == "place")
            await pilot.press("enter")
            await wait_for(pilot, lambda: app.state == "review")
            screens.append(screen_text(app))
            await pilot.press("r")
            await pilot.press("enter")  # an empty reason is not accepted
            assert app.state == "reason"
            await pilot.press(*"camera bumped", "enter")
            await wait_for(pilot, lambda: len(runner.log) >= 4)
            assert runner.log[3] == ("ended", 1, None, "camera bumped")
            # q ends the session between trials
            await wait_for(pilot, lambda: app.state == "place")
            screens.append(screen_text(app))
            assert "mark M03" in str(app.query_one("#mark").content) and "trial 2 saved" in screens[-1]
            await pilot.press("q")
            await wait_for(pilot, lambda: runner.log[-1][0] == "stopped")
            runner.join(2)
        return runner.log, screens

    log, screens = asyncio.run(session())
    assert log[-1] == ("stopped", "session ended by the operator")
    # The screen shows what the runner sends (its "trial 2 saved" message appeared above), and
    # none of the schedule's labels; what the real runner sends is checked in
    # test_the_real_runner_tells_the_operator_nothing_that_names_a_policy.
    assert len(screens) == 5
    for text in screens:
        for label in LABELS:
            assert label not in text


@pytest.mark.slow   # seconds of real-time waiting: kept out of the fast lane
def test_pause_blocks_start_and_space_cancels_the_countdown(layout):
    async def session() -> list:
        app = OperatorConsole(layout, countdown_s=2.0)
        async with app.run_test(size=(120, 40)) as pilot:
            runner = FakeRunner(app.operator, layout, steps=5)
            runner.start()
            await wait_for(pilot, lambda: app.state == "place")
            await pilot.press("p")
            assert "PAUSED" in screen_text(app)
            await pilot.press("enter")
            await pilot.pause(0.3)
            assert runner.log == [] and app.state == "place"
            await pilot.press("p", "enter")
            assert app.state == "countdown"
            await pilot.press("space")  # cancels the countdown, nothing starts
            assert app.state == "place"
            await pilot.pause(0.3)
            assert runner.log == [] and app.state == "place"
            await pilot.press("enter")
            await wait_for(pilot, lambda: runner.log[:1] == [("started", 0)])
            await wait_for(pilot, lambda: app.state == "review")
            await pilot.press("enter")
            await wait_for(pilot, lambda: len(runner.log) >= 2)
        runner.join(2)  # the console closed: the runner's next before_trial stops cleanly
        return runner.log

    log = asyncio.run(session())
    assert log[1] == ("ended", 0, None, None)
    assert log[-1][0] == "stopped"


@pytest.mark.slow   # seconds of real-time waiting: kept out of the fast lane
def test_the_countdown_before_a_policy_episode_is_shown_stopped_by_space_and_restarted_by_enter(layout):
    """The runner's countdown after the arm's reset or a start-check retry: "ARM WILL MOVE
    (policy) in N s: space = stop"; space stops it and the runner waits (nothing starts) until
    Enter counts down again; q there ends the session."""
    from orchestrator.run.operator_protocol import COUNTDOWN_STOPPED

    cue = TrialCue(index=1, total=2, done_before=0, campaign_total=2, mark=layout.marks[0], duration_s=5.0)

    async def session(keys: str) -> tuple[list, list[str]]:
        app = OperatorConsole(layout, countdown_s=1.0)
        log: list = []
        screens: list[str] = []

        def runner():
            try:
                app.operator.countdown(cue)
                log.append("go")
            except StopRequested as stop:
                log.append(("ended", str(stop)))

        async with app.run_test(size=(120, 40)) as pilot:
            thread = threading.Thread(target=runner, daemon=True)
            thread.start()
            await wait_for(pilot, lambda: app.state == "policy_countdown")
            screens.append(screen_text(app))
            await pilot.press("space")
            await wait_for(pilot, lambda: app.state == "countdown_held")
            await pilot.pause(1.3)   # longer than the countdown: it does not go on by itself
            screens.append(screen_text(app))
            assert log == []
            await pilot.press(keys)
            await wait_for(pilot, lambda: log != [])
        thread.join(2)
        return log, screens

    log, screens = asyncio.run(session("enter"))
    assert log == ["go"]
    assert "ARM WILL MOVE (policy) in 1 s: space = stop" in screens[0]
    assert COUNTDOWN_STOPPED in screens[1] and "ARM WILL MOVE" not in screens[1]
    log, _ = asyncio.run(session("q"))
    assert log == [("ended", "session ended by the operator before the episode")]


def test_run_console_returns_the_session_result_and_reraises(layout):
    assert run_console(layout, lambda op: (op.message("hello"), 42)[1], headless=True) == 42
    with pytest.raises(ValueError, match="boom"):
        run_console(layout, lambda op: (_ for _ in ()).throw(ValueError("boom")), headless=True)


def test_layout_drawing_marks_the_target_and_the_base(layout):
    text = render_layout(layout, layout.marks[0]).plain
    assert text.count("●") == 1 and f"●{layout.marks[0].id}" in text.replace(" ", "")
    assert "robot base" in text and text.count("·") == len(layout.marks) - 1


def test_ctrl_c_interrupts_the_session(layout):
    async def session() -> list:
        app = OperatorConsole(layout, countdown_s=0.1)
        log = []

        def runner():
            cue = TrialCue(index=1, total=1, done_before=0, campaign_total=2, mark=layout.marks[0], duration_s=5.0)
            try:
                app.operator.before_trial(cue)
                app.operator.episode_started(cue)
                for k in range(1000):
                    app.operator.poll(k / 30)
                    time.sleep(0.005)   # pacing: the fake episode loop's step (bounded by its count)
            except KeyboardInterrupt:
                log.append("interrupted")
            try:
                app.operator.before_trial(cue)
            except KeyboardInterrupt:
                log.append("still interrupted")

        async with app.run_test(size=(120, 40)) as pilot:
            thread = threading.Thread(target=runner, daemon=True)
            thread.start()
            await wait_for(pilot, lambda: app.state == "place")
            await pilot.press("enter")
            await wait_for(pilot, lambda: app.state == "episode")
            await pilot.press("ctrl+c")
            await wait_for(pilot, lambda: len(log) == 2)
            assert "INTERRUPTED" in screen_text(app)
        thread.join(2)
        return log

    assert asyncio.run(session()) == ["interrupted", "still interrupted"]


def test_prompt_operator_without_a_terminal(layout):
    import io

    from orchestrator.run.console.prompt import PromptOperator

    lines: list[str] = []
    op = PromptOperator(layout, countdown_s=0, stdin=io.StringIO("\n\nq\n"), out=lines.append)
    assert all(callable(getattr(op, name)) for name in
               ("before_trial", "episode_started", "poll", "episode_ended", "message"))
    cue = TrialCue(index=1, total=2, done_before=0, campaign_total=2, mark=layout.marks[4], duration_s=1.0)
    op.before_trial(cue)
    op.episode_started(cue)
    op.poll(0.0)
    assert op.episode_ended(cue, None) is None
    op.message("trial 1 saved")
    op.before_trial(cue)
    op.episode_started(cue)
    assert op.episode_ended(cue, "DeviceFault: camera front: TimeoutError") is None
    with pytest.raises(StopRequested):
        op.before_trial(cue)
    text = "\n".join(lines)
    assert f"Put the cube on mark {layout.marks[4].id}" in text and "no emergency-stop key" in text
    assert "trial aborted: DeviceFault: camera front" in text


def test_estop_without_episode_ended_never_jams_the_next_cue(layout):
    """A runner that goes straight to the next trial after an emergency stop still gets it started."""
    async def session() -> list:
        app = OperatorConsole(layout, countdown_s=0.2)
        log = []

        def runner():
            cue = TrialCue(index=1, total=2, done_before=0, campaign_total=2, mark=layout.marks[0], duration_s=5.0)
            app.operator.before_trial(cue)
            app.operator.episode_started(cue)
            try:
                for k in range(2000):
                    app.operator.poll(k / 30)
                    time.sleep(0.005)   # pacing: the fake episode loop's step (bounded by its count)
            except EmergencyStop as stop:
                log.append(stop.reason)
            app.operator.before_trial(cue)  # no episode_ended in between
            log.append("second trial started")

        async with app.run_test(size=(120, 40)) as pilot:
            thread = threading.Thread(target=runner, daemon=True)
            thread.start()
            await wait_for(pilot, lambda: app.state == "place")
            await pilot.press("enter")
            await wait_for(pilot, lambda: app.state == "episode")
            await pilot.press("space")
            await wait_for(pilot, lambda: len(log) == 1 and app.state == "place")
            await pilot.press("enter")
            await wait_for(pilot, lambda: len(log) == 2)
        thread.join(2)
        return log

    assert asyncio.run(session()) == ["emergency stop by operator", "second trial started"]


@pytest.mark.parametrize("interrupt", ["ctrl+c", "sigterm"])
def test_an_interrupt_during_a_move_stops_it_and_the_stop_key_stays_live(layout, interrupt):
    """Before this rule, Ctrl-C during a move to rest set the console to "waiting", where the stop
    key was ignored, and `check_stop` ignored the interrupt: the move ran to its end. SIGTERM and
    SIGHUP (`operator.interrupt()`, what run_with_console's handler calls) did the same."""
    async def session() -> tuple[list, list]:
        app = OperatorConsole(layout, countdown_s=0.1)
        raised: list = []
        stops: list = []

        def mover():   # the runner's ArmMotion: check_stop before every step of a 3 s move
            app.operator.arm_moving("moving to rest")
            try:
                for _ in range(300):
                    app.operator.check_stop()
                    time.sleep(0.01)   # pacing: the fake move's step (300 steps: its deadline)
                raised.append("move ran to its end")
            except BaseException as exc:  # noqa: BLE001
                raised.append(type(exc).__name__)
            app.operator.arm_moving(None)
            for _ in range(300):   # the stop key still works after the interrupt
                if app.operator.move_stop.is_set():
                    stops.append("stop key seen")
                    return
                time.sleep(0.01)   # polled, 300 times at most

        async with app.run_test(size=(120, 40)) as pilot:
            thread = threading.Thread(target=mover, daemon=True)
            thread.start()
            await wait_for(pilot, lambda: app.state == "moving")
            if interrupt == "ctrl+c":
                await pilot.press("ctrl+c")
            else:
                app.operator.interrupt()
            await wait_for(pilot, lambda: bool(raised))
            await pilot.press("space")
            await wait_for(pilot, lambda: bool(stops), timeout=4.0)
        thread.join(2)
        return raised, stops

    raised, stops = asyncio.run(session())
    assert raised == ["KeyboardInterrupt"] and stops == ["stop key seen"]


def test_a_stop_pressed_before_a_move_begins_stops_it_at_its_first_step(layout):
    """The stop key in the review state (the episode over, the move to rest not yet begun)."""
    async def session() -> list:
        app = OperatorConsole(layout, countdown_s=0.1)
        log: list = []

        def runner():
            cue = TrialCue(index=1, total=1, done_before=0, campaign_total=1, mark=layout.marks[0], duration_s=1.0)
            app.operator.before_trial(cue)
            app.operator.episode_started(cue)
            for k in range(5):
                app.operator.poll(k / 30)
            app.operator.episode_ended(cue, None)
            app.operator.arm_moving("moving to rest")
            try:
                app.operator.check_stop()
                log.append("moved")
            except EmergencyStop:
                log.append("held")
            app.operator.arm_moving(None)

        async with app.run_test(size=(120, 40)) as pilot:
            thread = threading.Thread(target=runner, daemon=True)
            thread.start()
            await wait_for(pilot, lambda: app.state == "place")
            await pilot.press("enter")
            await wait_for(pilot, lambda: app.state == "review")
            await pilot.press("space")
            await pilot.press("enter")
            await wait_for(pilot, lambda: bool(log))
        thread.join(2)
        return log

    assert asyncio.run(session()) == ["held"]


def test_the_real_runner_tells_the_operator_nothing_that_names_a_policy(tmp_path):
    """What the console can show is what the runner hands the Operator bridge (cues, messages,
    moves) and prints (`say`). Run the real sequential runner on the simulated rig with policy
    labels that are canaries and record every argument it passes: no canary in any of them."""
    import dataclasses

    import yaml

    from orchestrator.commands.referees import campaign_referees
    from orchestrator.run.campaign import open_campaign
    from orchestrator.run.operator_protocol import AutoOperator
    from orchestrator.run.sequential import run_campaign
    from support.tiny import DATA, RIG

    canaries = ("CANARYPOLICYALPHA", "CANARYPOLICYBRAVO")
    protocol = yaml.safe_load((DATA / "tiny_protocol.yaml").read_text())
    protocol["policies"] = {canaries[0]: {"type": "scripted"}, canaries[1]: {"type": "scripted", "aim_noise_mm": 25}}
    protocol["layout"] = str(DATA / "tiny_layout.yaml")
    protocol["episode"] = {"fps": 10, "duration_s": 1}
    path = tmp_path / "protocol.yaml"
    path.write_text(yaml.safe_dump(protocol))
    told: list[str] = []

    class Recording(AutoOperator):
        def before_trial(self, cue):
            told.append(repr(dataclasses.asdict(cue)))

        def episode_started(self, cue):
            told.append(repr(cue))

        def episode_ended(self, cue, aborted_reason):
            told.append(f"{cue!r} {aborted_reason!r}")

        def arm_moving(self, what):
            told.append(repr(what))

    opened = open_campaign(path, RIG, tmp_path / "c")
    try:
        summary = run_campaign(opened, Recording(say=told.append), say=told.append, referees=campaign_referees())
    finally:
        opened.store.close()
    assert summary.complete
    cues = [t for t in told if t.startswith("{'index'")]
    assert len(cues) == 6   # count guard: every trial's cue was recorded (3 marks x 2 policies)
    # Positive control: the recording holds the cue's contents (the marks the operator is shown).
    assert all(any(mark in cue for cue in cues) for mark in ("M06", "M01", "M20"))
    for text in told:
        for canary in canaries:
            assert canary.lower() not in text.lower(), text


def test_a_refused_start_shows_the_line_and_the_still_and_takes_retry_override_and_stop(layout, tmp_path):
    """The start-state check's refusal in the console: its line in the banner, the camera's still
    in place of the layout map; Enter = check again, o = override, q = end (the runner's answers)."""
    import cv2
    import numpy as np

    still = tmp_path / "still.png"
    picture = np.zeros((60, 80, 3), np.uint8)
    picture[:, :, 2] = 255   # red in BGR
    cv2.imwrite(str(still), picture)
    mark = layout.marks[6]
    cue = TrialCue(index=1, total=3, done_before=0, campaign_total=40, mark=mark, duration_s=12.0)
    answers: list[str] = []

    async def session() -> list[str]:
        app = OperatorConsole(layout, countdown_s=0.5)
        async with app.run_test(size=(120, 40)) as pilot:
            for key in ("enter", "o", "q"):
                thread = threading.Thread(target=lambda: answers.append(
                    app.operator.start_refused(cue, "cube 10 mm forward of M07", still)), daemon=True)
                thread.start()
                await wait_for(pilot, lambda: app.state == "start_refused")
                banner = screen_text(app)
                assert "START CHECK: cube 10 mm forward of M07" in banner and "o = start anyway" in banner
                shown = app.query_one("#still")
                assert shown.display and shown.image is not None and shown.image[0, 0].tolist() == [255, 0, 0]
                assert not app.query_one("#map").display
                before = len(answers)
                await pilot.press(key)
                await wait_for(pilot, lambda t=thread, n=before: len(answers) > n or not t.is_alive())
                thread.join(timeout=5)
                assert not app.query_one("#still").display and app.query_one("#map").display
        return answers

    assert asyncio.run(session()) == ["retry", "override", "stop"]


def test_the_reset_is_allowed_once_and_announced_and_q_at_the_approval_ends_the_session(layout):
    """`reset: auto` on a real arm: the session's approval (Enter allows, q ends it), then the
    reset's banner "ARM RESETTING THE CUBE" with the stop key live."""
    from orchestrator.run.sequential import APPROVE_RESETS

    async def session(key: str) -> tuple[list, list[str]]:
        app = OperatorConsole(layout, countdown_s=0.1)
        log: list = []
        screens: list[str] = []

        def runner():
            try:
                app.operator.approve(APPROVE_RESETS)
            except StopRequested as stop:
                log.append(("ended", str(stop)))
                return
            log.append("allowed")
            app.operator.arm_moving("resetting the cube")
            log.append("moving")
            while True:
                try:
                    app.operator.check_stop()
                except EmergencyStop:
                    log.append("stopped")
                    break
                time.sleep(0.01)   # pacing: the fake move's step until the stop (the test's timeout ends it)
            app.operator.arm_moving(None)

        async with app.run_test(size=(120, 40)) as pilot:
            thread = threading.Thread(target=runner, daemon=True)
            thread.start()
            await wait_for(pilot, lambda: app.state == "confirm")
            screens.append(screen_text(app))
            await pilot.press(key)
            if key == "enter":
                await wait_for(pilot, lambda: "moving" in log and "ARM RESETTING" in screen_text(app))
                screens.append(screen_text(app))
                await pilot.press("space")
            # (the runner thread may not have written anything yet when the key lands)
            await wait_for(pilot, lambda: bool(log) and (log[-1] == "stopped" or isinstance(log[-1], tuple)))
        thread.join(2)
        return log, screens

    log, screens = asyncio.run(session("enter"))
    assert log == ["allowed", "moving", "stopped"]
    assert "the arm moves by itself" in screens[0] and "Enter = allow it, q = end the session" in screens[0]
    assert "ARM RESETTING THE CUBE: space or esc = STOP" in screens[1]
    log, _ = asyncio.run(session("q"))
    assert log == [("ended", "session ended by the operator before the arm moved by itself")]


def test_the_prompt_operator_asks_the_resets_approval_on_stdin(layout):
    """`--no-console` (on the twin; a real arm refuses `reset: auto` without the console): Enter
    allows the arm's resets, `q` ends the session; the banner of a reset names it."""
    import io

    from orchestrator.run.console.prompt import PromptOperator
    from orchestrator.run.sequential import APPROVE_RESETS

    lines: list[str] = []
    op = PromptOperator(layout, countdown_s=0, stdin=io.StringIO("\nq\n"), out=lines.append)
    op.approve(APPROVE_RESETS)
    assert lines[-1] == f"{APPROVE_RESETS}, q + Enter = end the session" and APPROVE_RESETS.endswith("Enter = allow it")
    with pytest.raises(StopRequested, match="before the arm moved by itself"):
        op.approve(APPROVE_RESETS)
    op.arm_moving("resetting the cube")
    op.arm_moving(None)
    assert "ARM RESETTING THE CUBE: space or esc = STOP" in lines
