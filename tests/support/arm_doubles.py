"""What the arm-safety tests drive a campaign with: `campaign` (open and run one in this
process), `Hold` (a policy that asks for the present pose, and can stall once), and operators
that act at a chosen step: `StopOnce` (the stop key, then a confirmation), `Failing` (any action:
an exception, a signal, a dropped bus), `Watching` (a `StopOnce` that keeps the messages and
counts the confirmations)."""

from __future__ import annotations

import time

from orchestrator.policies.base import Policy
from orchestrator.rigs.base import EmergencyStop
from orchestrator.rigs.profile import STATE_KEYS
from orchestrator.run.operator_protocol import AutoOperator, StopRequested


def campaign(protocol, rig, out, operator=None):
    from orchestrator.commands.referees import campaign_referees
    from orchestrator.run.campaign import open_campaign
    from orchestrator.run.sequential import run_campaign

    opened = open_campaign(protocol, rig, out)
    try:
        summary = run_campaign(opened, operator, say=lambda s: None, referees=campaign_referees())
        return summary, opened.store.attempts()
    finally:
        opened.store.close()


class Hold(Policy):
    """A policy that asks for the present pose (and stalls once, if told to)."""

    needs_images = False

    def __init__(self, stall_at: int | None = None, stall_s: float = 0.0):
        self.stall_at, self.stall_s, self.calls = stall_at, stall_s, 0

    def reset(self, context=None):
        self.calls = 0

    def select_action(self, obs):
        if self.calls == self.stall_at:
            time.sleep(self.stall_s)   # the stimulus: the policy stalls (its work, not a wait)
        self.calls += 1
        return {k: obs[k] + (1.0 if self.calls % 2 else -1.0) for k in STATE_KEYS}

    def close(self):
        pass


class StopOnce(AutoOperator):
    """Hits the stop key at `poll` number `at` (or during the first move to rest at step
    `move_at`), then confirms after `wait_s`; records when."""

    def __init__(self, at: int | None = None, move_at: int | None = None, wait_s: float = 0.3,
                 end_instead: bool = False):
        super().__init__(say=lambda s: None)
        self.at, self.move_at, self.wait_s, self.end_instead = at, move_at, wait_s, end_instead
        self.polls = self.checks = 0
        self.stopped_at = self.confirmed_at = None
        self.moving = False

    def poll(self, elapsed_s):
        self.polls += 1
        if self.polls == self.at:
            self.stopped_at = time.perf_counter()
            raise EmergencyStop()

    def arm_moving(self, what):
        self.moving = what is not None

    def check_stop(self):
        self.checks += 1
        if self.checks == self.move_at:
            self.stopped_at = time.perf_counter()
            raise EmergencyStop("stop during a move")

    def confirm_move(self, what):
        time.sleep(self.wait_s)   # the stimulus: the operator takes wait_s to confirm (not a wait)
        if self.end_instead:
            raise StopRequested("ended")
        self.confirmed_at = time.perf_counter()


class Failing(AutoOperator):
    def __init__(self, action, at=3):
        super().__init__(say=lambda s: None)
        self.action, self.at, self.polls = action, at, 0

    def poll(self, elapsed_s):
        self.polls += 1
        if self.polls == self.at:
            self.action()


class Watching(StopOnce):
    """`StopOnce` that also keeps the operator's messages and counts the confirmation prompts;
    `fail` (a callable) runs at poll `fail_at` instead of a stop."""

    def __init__(self, *, fail=None, fail_at: int = 3, **kwargs):
        super().__init__(**kwargs)
        self.fail, self.fail_at = fail, fail_at
        self.messages: list[str] = []
        self.prompts = 0
        self.fault_at = None

    def poll(self, elapsed_s):
        if self.fail is not None and self.polls + 1 == self.fail_at:
            self.polls += 1
            self.fault_at = time.perf_counter()
            self.fail()
            return
        super().poll(elapsed_s)

    def message(self, text):
        self.messages.append(text)

    def confirm_move(self, what):
        self.prompts += 1
        super().confirm_move(what)
