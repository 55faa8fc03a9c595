"""Stations: several arms running one campaign on a PostgreSQL store (`run --station NAME`).

The unit of work is a *block*: every policy's trials on one layout (one schedule `unit`), in
the pre-drawn order. A station claims the next block (two stations never wait on or take the
same one) and holds it under a lease of `protocol.stations.lease_s` seconds, renewed by a
heartbeat on its own connection; the SQL of claims and leases is the store's
(`store/leases.py`). A block is one station's from its first trial to its last, so a pair
never spans two arms: beginning or committing an attempt checks, in the same transaction, that
the station still holds the trial's block (the store's guard, `leases.BlockClaim`, given to the
store when the campaign is opened for the station).

A station that dies (SIGKILL, power, network) stops renewing; once its lease has run out the
block goes to the next station that asks (or to the same station after a restart). The
taker records the dead station's running attempt as aborted ("interrupted"), removes its
files and, when it is another station, also undoes the block's trials the dead station had
finished (the pair is re-run on one arm). The schedule, the frozen protocol and the stopping
rule stay global: after each block the pre-registered rule is evaluated on the whole
campaign, and every station stops claiming once it says stop.

Each station records its rig profile (text and SHA-256) and its calibration file's SHA-256 in
`stations`; `blocks` keeps who ran each block and when (per-station tables and timing in the
report). These two tables exist only on server stores.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import threading
import time
from collections.abc import Callable

from orchestrator.design.schedule import Trial
from orchestrator.run.abort_questions import of_station
from orchestrator.run.bookkeeping import NO_REFEREES, Referees, stop_decision
from orchestrator.run.campaign import OpenedCampaign
from orchestrator.run.recording import remove_episode_files
from orchestrator.store import leases
from orchestrator.store.sqlite import INTERRUPTED_CLASS


def calibration_sha256(opened: OpenedCampaign) -> str | None:
    """SHA-256 of the rig's LeRobot calibration file (None for a simulated rig or none found)."""
    if opened.rig.profile.simulated:
        return None
    from orchestrator.rigs.factory import make_rig

    rig = make_rig(opened.rig, opened.protocol)
    path = rig.calibration_path
    if path is None or not path.is_file():
        return None
    return hashlib.sha256(path.read_bytes()).hexdigest()


class Station:
    """One station's claims: `next_block` feeds the runner, the campaign's `claim` (the store's
    guard) checks the claim inside the store's transactions, a heartbeat thread renews the lease."""

    def __init__(self, opened: OpenedCampaign, name: str, say: Callable[[str], None],
                 referees: Referees = NO_REFEREES, poll_s: float = 0.5):
        if opened.claim is None or opened.claim.station != name:
            raise ValueError(f"station {name}: open the campaign with open_campaign(..., station={name!r})")
        self.opened, self.name, self.say, self.poll_s = opened, name, say, poll_s
        self.referees = referees
        self.store = opened.store
        self.claim = opened.claim
        self.lease_s = self.claim.lease_s
        self.unit: int | None = None
        self.skip: set[int] = set()
        self.claim_seconds: list[float] = []
        rig = opened.rig
        leases.register_station(self.store, name, host=platform.node(), pid=os.getpid(), rig_path=str(rig.path),
                                rig_text=rig.text, rig_sha256=rig.sha256,
                                calibration_sha256=calibration_sha256(opened))
        self._beats = leases.Heartbeat(self.store)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._heartbeat, name=f"lease-{name}", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------ the lease

    def _heartbeat(self) -> None:
        period = max(0.2, self.lease_s / 4)
        while not self._stop.wait(period):
            try:
                unit = self.unit
                if not self._beats.beat(self.name, unit, self.lease_s) and unit == self.unit:
                    self.claim.lost.set()
            except Exception:
                continue  # a network blip: the next beat retries; the guard decides at commit

    # ------------------------------------------------------------ claiming

    def next_block(self) -> list[Trial]:
        """Close the current block, apply the stopping rule, then claim the next block and
        return its trials still to run (in order); [] when there is nothing left for us."""
        self._close_block()
        while True:
            if self.store.campaign()["stop_reason"]:
                return []
            if reason := stop_decision(self.opened, self.referees):
                self.store.mark_finished(reason)
                self.say(f"stopping: {reason}")
                return []
            started = time.perf_counter()
            claimed = self._claim()
            if claimed is not None:
                unit, previous = claimed
                self._recover(unit, previous)
                self.claim_seconds.append(time.perf_counter() - started)
                trials = [t for t in self.store.trials() if t.unit == unit and t.state != "done"]
                self.say(f"station {self.name}: block {unit + 1} ({len(trials)} trials)")
                if trials:
                    return trials
                self._close_block()
                continue
            if leases.blocks_left(self.store, self.skip) == 0:
                return []
            time.sleep(self.poll_s)  # other stations hold the rest; one may die and free its block

    def _claim(self) -> tuple[int, str | None] | None:
        claimed = leases.claim_block(self.store, self.name, self.lease_s, self.skip)
        if claimed is None:
            return None
        self.unit = claimed[0]
        self.claim.lost.clear()
        return claimed

    def _recover(self, unit: int, previous: str | None) -> None:
        """What the block's previous holder left: running attempts become interrupted; when the
        holder was another station, its finished trials of the block are re-run here."""
        who = "this station before a restart" if previous == self.name else f"station {previous}"
        for attempt_id, episode_id, slot in leases.running_attempts(self.store, unit):
            self.store.abort_attempt(attempt_id, f"interrupted: {who} stopped during the episode "
                                                 "(its claim on the block ran out)", INTERRUPTED_CLASS)
            remove_episode_files(self.store.directory, episode_id)
            self.say(f"trial {slot + 1}: interrupted on {who}; it will be re-run")
        if previous is None or previous == self.name:
            return
        for episode_id in leases.done_episodes(self.store, unit):
            self.store.invalidate_episode(episode_id, f"block taken over from station {previous}: "
                                                      "a pair is never split between two arms")
            remove_episode_files(self.store.directory, episode_id)

    def _close_block(self) -> None:
        unit, self.unit = self.unit, None
        if unit is None:
            return
        if leases.trials_left(self.store, unit):
            self.skip.add(unit)  # trials aborted too often this session: leave it to the queue
            leases.release_block(self.store, unit, self.name)
        else:
            leases.finish_block(self.store, unit, self.name)

    def close(self) -> None:
        """Stop the heartbeat; a block left unfinished (Ctrl-C, error) goes back to the queue."""
        self._stop.set()
        self._thread.join(timeout=5)
        try:
            if self.unit is not None:
                leases.release_block(self.store, self.unit, self.name, claimed_only=True)
        finally:
            self._beats.close()


def run_station(opened: OpenedCampaign, name: str, operator=None, say: Callable[[str], None] | None = None,
                stop_after: int | None = None, referees=None):
    """Run blocks of the campaign as station `name` until none is left or the stopping rule
    says stop (one arm, trials in order); returns the runner's `RunSummary`."""
    import statistics

    from orchestrator.run.bookkeeping import RunSummary
    from orchestrator.run.operator_protocol import AutoOperator
    from orchestrator.run.sequential import _questions_answered, _run_sequential, run_session, say_flushed

    say = say or say_flushed
    operator = operator or AutoOperator(say)
    store = opened.store
    trials = store.trials()
    summary = RunSummary(total=len(trials), done_total=sum(t.state == "done" for t in trials))
    finished = store.campaign()["stop_reason"]
    if finished:
        summary.stopped_early = None if finished == "complete" else finished
        say("campaign is complete" + (f" ({finished})" if finished != "complete" else ""))
        return summary
    own = of_station(store.sessions(), name, leases.station_process(store, name))
    if not _questions_answered(store, operator, say, own):
        return summary
    station = Station(opened, name, say, referees or NO_REFEREES)
    with run_session(store, f" (station {name})"):
        try:
            _run_sequential(opened, [], operator, summary, say, stop_after,
                            refill=station.next_block, referees=station.referees)
        finally:
            with contextlib.suppress(Exception):
                station.close()
    summary.done_total = sum(1 for t in store.trials() if t.state == "done")
    reason = store.campaign()["stop_reason"]
    if reason and reason != "complete":
        summary.stopped_early = reason
    elif summary.done_total == summary.total and not reason:
        store.mark_finished("complete")
    if station.claim_seconds:
        say(f"station {name}: {len(station.claim_seconds)} block(s) claimed; claim and recovery "
            f"median {statistics.median(station.claim_seconds) * 1000:.1f} ms per block")
    return summary
