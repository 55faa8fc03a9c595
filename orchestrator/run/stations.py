"""Stations: several arms running one campaign on a PostgreSQL store (`run --station NAME`).

The unit of work is a *block*: every policy's trials on one layout (one schedule `unit`), in
the pre-drawn order. A station claims the next block with `SELECT ... FOR UPDATE SKIP
LOCKED` (two stations never wait on or take the same row) and holds it under a lease of
`protocol.stations.lease_s` seconds, renewed by a heartbeat on its own connection; leases are
read on the server's clock (`clock_timestamp()`), so the stations' clocks need not agree.
A block is one station's from its first trial to its last, so a pair never spans two arms:
beginning or committing an attempt checks, in the same transaction, that the station still
holds the trial's block (`CampaignStore.guard`).

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

from orchestrator.core.errors import RuntimeFailure
from orchestrator.design.schedule import Trial
from orchestrator.run.bookkeeping import NO_REFEREES, Referees, stop_decision
from orchestrator.run.campaign import OpenedCampaign
from orchestrator.run.recording import remove_episode_files
from orchestrator.store.postgres_stations import install_station_tables
from orchestrator.store.sqlite import INTERRUPTED_CLASS

NOW = "extract(epoch from clock_timestamp())"



class LeaseLost(RuntimeFailure):
    """This station no longer holds the block of the trial it is running."""



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
    """One station's claims: `next_block` feeds the runner, `guard` checks the claim inside the
    store's transactions, a heartbeat thread renews the lease."""

    def __init__(self, opened: OpenedCampaign, name: str, say: Callable[[str], None],
                 referees: Referees = NO_REFEREES, poll_s: float = 0.5):
        from orchestrator.store.postgres import PgConnection

        self.opened, self.name, self.say, self.poll_s = opened, name, say, poll_s
        self.referees = referees
        self.store = opened.store
        self.conn = self.store.conn
        self.lease_s = float(opened.protocol.protocol.stations.lease_s)
        self.unit: int | None = None
        self.skip: set[int] = set()
        self.claim_seconds: list[float] = []
        install_station_tables(self.conn)
        self._register()
        self._beat_conn = PgConnection(self.conn.url)
        self._stop = threading.Event()
        self._lost = threading.Event()
        self._thread = threading.Thread(target=self._heartbeat, name=f"lease-{name}", daemon=True)
        self._thread.start()
        self.store.guard = self.guard

    def _register(self) -> None:
        rig = self.opened.rig
        self.conn.raw.execute(
            f"INSERT INTO stations VALUES (%s, %s, %s, %s, %s, %s, %s, {NOW}, {NOW})"
            " ON CONFLICT (name) DO UPDATE SET host = EXCLUDED.host, pid = EXCLUDED.pid,"
            " rig_path = EXCLUDED.rig_path, rig_text = EXCLUDED.rig_text, rig_sha256 = EXCLUDED.rig_sha256,"
            " calibration_sha256 = EXCLUDED.calibration_sha256, last_seen = EXCLUDED.last_seen",
            (self.name, platform.node(), os.getpid(), str(rig.path), rig.text, rig.sha256,
             calibration_sha256(self.opened)))

    # ------------------------------------------------------------ the lease

    def _heartbeat(self) -> None:
        period = max(0.2, self.lease_s / 4)
        while not self._stop.wait(period):
            try:
                unit = self.unit
                self._beat_conn.raw.execute(f"UPDATE stations SET last_seen = {NOW} WHERE name = %s", (self.name,))
                if unit is None:
                    continue
                cur = self._beat_conn.raw.execute(
                    f"UPDATE blocks SET lease_until = {NOW} + %s WHERE unit = %s AND station = %s"
                    " AND state = 'claimed'", (self.lease_s, unit, self.name))
                if cur.rowcount == 0 and unit == self.unit:
                    self._lost.set()
            except Exception:
                continue  # a network blip: the next beat retries; the guard decides at commit

    def guard(self, conn, slot: int) -> None:
        row = conn.execute("SELECT b.unit FROM blocks b JOIN trials t ON t.unit = b.unit WHERE t.slot = ?"
                           " AND b.station = ? AND b.state = 'claimed' FOR UPDATE OF b",
                           (slot, self.name)).fetchone()
        if row is None or self._lost.is_set():
            raise LeaseLost(f"station {self.name} lost its claim on the block of trial {slot + 1} "
                            f"(lease of {self.lease_s:g} s ran out); another station re-runs it")

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
            left = self.conn.raw.execute("SELECT count(*) FROM blocks WHERE state <> 'done' AND"
                                         " NOT (unit = ANY(%s))", (list(self.skip),)).fetchone()[0]
            if left == 0:
                return []
            time.sleep(self.poll_s)  # other stations hold the rest; one may die and free its block

    def _claim(self) -> tuple[int, str | None] | None:
        self.conn.execute("BEGIN")
        try:
            row = self.conn.raw.execute(
                "SELECT unit, station FROM blocks WHERE state <> 'done' AND NOT (unit = ANY(%s))"
                f" AND (state = 'pending' OR station = %s OR lease_until < {NOW})"
                " ORDER BY (station IS NOT DISTINCT FROM %s) DESC, unit LIMIT 1 FOR UPDATE SKIP LOCKED",
                (list(self.skip), self.name, self.name)).fetchone()
            if row is not None:
                self.conn.raw.execute(
                    f"UPDATE blocks SET state = 'claimed', station = %s, lease_until = {NOW} + %s,"
                    f" claimed_at = {NOW}, finished_at = NULL, claims = claims + 1 WHERE unit = %s",
                    (self.name, self.lease_s, row[0]))
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        if row is None:
            return None
        self.unit = int(row[0])
        self._lost.clear()
        return int(row[0]), row[1]

    def _recover(self, unit: int, previous: str | None) -> None:
        """What the block's previous holder left: running attempts become interrupted; when the
        holder was another station, its finished trials of the block are re-run here."""
        who = "this station before a restart" if previous == self.name else f"station {previous}"
        running = self.conn.execute(
            "SELECT a.id, a.episode_id, a.slot FROM attempts a JOIN trials t ON t.slot = a.slot"
            " WHERE t.unit = ? AND a.status = 'running'", (unit,)).fetchall()
        for attempt_id, episode_id, slot in running:
            self.store.abort_attempt(attempt_id, f"interrupted: {who} stopped during the episode "
                                                 "(its claim on the block ran out)", INTERRUPTED_CLASS)
            remove_episode_files(self.store.directory, episode_id)
            self.say(f"trial {slot + 1}: interrupted on {who}; it will be re-run")
        if previous is None or previous == self.name:
            return
        done = self.conn.execute("SELECT episode_id FROM trials WHERE unit = ? AND state = 'done'",
                                 (unit,)).fetchall()
        for (episode_id,) in done:
            self.store.invalidate_episode(episode_id, f"block taken over from station {previous}: "
                                                      "a pair is never split between two arms")
            remove_episode_files(self.store.directory, episode_id)

    def _close_block(self) -> None:
        unit, self.unit = self.unit, None
        if unit is None:
            return
        left = self.conn.execute("SELECT count(*) FROM trials WHERE unit = ? AND state <> 'done'",
                                 (unit,)).fetchone()[0]
        if left:
            self.skip.add(unit)  # trials aborted too often this session: leave it to the queue
            self.conn.execute("UPDATE blocks SET state = 'pending', lease_until = NULL WHERE unit = ?"
                              " AND station = ?", (unit, self.name))
        else:
            self.conn.execute(f"UPDATE blocks SET state = 'done', finished_at = {NOW}, lease_until = NULL"
                              " WHERE unit = ? AND station = ?", (unit, self.name))

    def close(self) -> None:
        """Stop the heartbeat; a block left unfinished (Ctrl-C, error) goes back to the queue."""
        self._stop.set()
        self._thread.join(timeout=5)
        self.store.guard = None
        try:
            if self.unit is not None:
                self.conn.execute("UPDATE blocks SET state = 'pending', lease_until = NULL"
                                  " WHERE unit = ? AND station = ? AND state = 'claimed'", (self.unit, self.name))
        finally:
            self._beat_conn.close()


def run_station(opened: OpenedCampaign, name: str, operator=None, say: Callable[[str], None] | None = None,
                stop_after: int | None = None, referees=None):
    """Run blocks of the campaign as station `name` until none is left or the stopping rule
    says stop (one arm, trials in order); returns the runner's `RunSummary`."""
    import statistics

    from orchestrator.run.bookkeeping import RunSummary
    from orchestrator.run.operator_protocol import AutoOperator
    from orchestrator.run.sequential import _run_sequential, run_session, say_flushed

    say = say or say_flushed
    store = opened.store
    trials = store.trials()
    summary = RunSummary(total=len(trials), done_total=sum(t.state == "done" for t in trials))
    finished = store.campaign()["stop_reason"]
    if finished:
        summary.stopped_early = None if finished == "complete" else finished
        say("campaign is complete" + (f" ({finished})" if finished != "complete" else ""))
        return summary
    station = Station(opened, name, say, referees or NO_REFEREES)
    with run_session(store, f" (station {name})"):
        try:
            _run_sequential(opened, [], operator or AutoOperator(say), summary, say, stop_after,
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
