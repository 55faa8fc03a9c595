"""The `auto` rater against the simulator's truth per episode, and the calibration of its bands.

Reads a campaign recorded on the simulated rig with the physics label's note (the simulator's
highest cube bottom and longest hold: `store.records.physics_truth`; campaigns recorded before it
give neither), measures each episode's front video once (`judging.auto.camera.front_lift`; with
`--cache DIR` the tracks are kept there, so a rule is re-checked in seconds), and prints:

- per campaign: the joints alone and both senses, how many episodes each left unsure, how many it
  labelled wrong against physics, and Cohen's kappa against physics on the episodes it rated;
  with `--episodes`, one line per episode (physics' lift and hold, both labels, the reason);
- with `--calibrate`: the figures the rater's bands are set from (`judging.auto.seat.BELOW_M`, `ABOVE_M`,
  `rater.HOLD_EARLY_S`, `rater.HOLD_LATE_S`, `sim.holding.STILL_PCT`: the gripper's readings after
  each squeeze; the hold's start by the joints' seat range and by the camera's crossing of the
  height interpolated between frames, against physics'): the pooled seat's highest bottom less physics' (its
  range over the squeezes not set aside is the band; how many were set aside), and physics' longest hold less the certain and the possible hold
  of both senses and of the joints alone (the certain hold must never be longer than the truth;
  the possible hold is at most `HOLD_LATE_S` shorter). Run it on a calibration campaign, never on
  the one whose figures are reported.

    uv run python bench/rater_truth.py --campaign DIR [DIR ...] [--cache DIR] [--episodes] [--calibrate]
"""

from __future__ import annotations

import argparse
import pickle
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def episodes(campaign: Path) -> tuple[tuple[float, float, float], list[dict]]:
    """(cube, height, hold) of the campaign's test and, per episode: id, physics' label and truth
    (highest bottom m, longest hold s; None when not stored), the time series' path."""
    from orchestrator.judging.auto.labels import campaign_test
    from orchestrator.store.episode_files import EpisodeFiles
    from orchestrator.store.records import PHYSICS_JUDGE, physics_truth
    from orchestrator.store.sqlite import CampaignStore

    with CampaignStore.open_readonly(campaign) as store:
        test = campaign_test(store)
        notes = {e: j.note for e, j in store.latest_labels(PHYSICS_JUDGE).items()}
        rows = []
        for e in store.episodes():
            series = EpisodeFiles.from_dict(e["files"]).timeseries
            if series is None:
                raise SystemExit(f"{campaign}: episode {e['id']} lists no time series")
            rows.append({"id": e["id"], "physics": bool(e["physics_success"]),
                         "truth": physics_truth(notes.get(e["id"])), "series": campaign / series})
    return test, rows


def camera_track(row: dict, cube: float, cache: Path | None):
    """(the front camera's LiftTrack or None, why not), measured once per episode with `cache`."""
    from orchestrator.judging.auto.camera import front_lift, recorded_front
    from orchestrator.store.episode_files import read_series

    kept = cache / f"{row['id']}.pickle" if cache else None
    if kept is not None and kept.is_file():
        return pickle.loads(kept.read_bytes())
    video, poses = recorded_front(row["series"])
    result = front_lift(video, poses, read_series(row["series"]), cube)
    if kept is not None:
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_bytes(pickle.dumps(result))
    return result


def wrist_of(row: dict, cube: float, cache: Path | None, height: float | None = None):
    """The wrist camera's WristTrack or None, measured once per episode with `cache` (the
    simulated rig's mount taken as recorded: campaigns recorded before the rig wrote it): every
    held frame, or with `height` those the rater fits (where the height is in question)."""
    from orchestrator.judging.auto.rater import SEAT_HIGH_M, SEAT_LOW_M
    from orchestrator.judging.auto.wrist import in_question, recorded_wrist, wrist_track
    from orchestrator.store.episode_files import read_series

    kept = cache / f"{row['id']}.{'wrist' if height is None else 'wrist-asked'}.pickle" if cache else None
    if kept is not None and kept.is_file():
        return pickle.loads(kept.read_bytes())
    rise = None if height is None else in_question(height, (SEAT_LOW_M, SEAT_HIGH_M))
    result = wrist_track(recorded_wrist(row["series"]), read_series(row["series"]), cube, rise)[0]
    if kept is not None:
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_bytes(pickle.dumps(result))
    return result


def label(verdict) -> str:
    return "unsure" if verdict.unsure else ("success" if verdict.success else "failure")


def rate_episode(row: dict, test: tuple[float, float, float], cache: Path | None, use_wrist: bool = False,
                 calibrate: bool = False) -> dict:
    """Both labels of one episode and the quantities its calibration reads."""
    from orchestrator.judging.auto.rater import HOLD_BANDS, SEAT_HIGH_M, SEAT_LOW_M, grip, joint_bottoms, rate
    from orchestrator.judging.auto.seat import Pooled, pooled_bounds, set_aside
    from orchestrator.judging.auto.two_senses import combine
    from orchestrator.store.episode_files import read_series
    from orchestrator.vision.lift_track import longest_run

    cube, height, hold = test
    data = read_series(row["series"])
    t, state, action = data["t"], data["state"], data.get("action")
    lift, why = camera_track(row, cube, cache)
    joints = rate(t, state, cube, height, hold, action)
    both = rate(t, state, cube, height, hold, action, lift, camera=why)
    wrist = wrist_of(row, cube, cache) if use_wrist and lift is not None and calibrate else None
    if use_wrist and lift is not None and both.unsure:   # as `rater.rate_file` does on a simulated episode
        asked = wrist_of(row, cube, cache, height)
        if asked is not None:
            both = rate(t, state, cube, height, hold, action, lift, camera=why, wrist=asked)
    closed, z = grip(state, cube, action)
    j_low, j_high = joint_bottoms(closed, z, SEAT_HIGH_M), joint_bottoms(closed, z, SEAT_LOW_M)
    out = {"release": release_readings(state, action, cube), "start": hold_start(t, state, action, cube, height, lift),
           "joints": label(joints), "both": label(both), "reason": both.reason, "decided_by": both.decided_by,
           "joints_sure": longest_run(t, j_low >= height - 1e-9), "joints_maybe": longest_run(t, j_high >= height - 1e-9),
           "pooled_top": None, "aside": False, "both_sure": None, "both_maybe": None, "bands": HOLD_BANDS,
           "wrist_top": None, "wedged": False}
    if wrist is not None:
        from orchestrator.judging.auto.wrist_sense import wedged, wrist_bounds

        out["wedged"] = bool((wedged(wrist) & wrist.visible).any())
        every = replace(wrist, turn_deg=np.where(np.isnan(wrist.turn_deg), np.nan, 0.0))   # wedged frames too
        w_low = wrist_bounds(t, closed, z, every if out["wedged"] else wrist, band_m=(0.0, 0.0))[0]
        if not np.isnan(w_low[closed]).all():
            out["wrist_top"] = float(np.nanmax(w_low[closed]))
    if lift is not None:
        low, _, seat = pooled_bounds(t, closed, z, lift.times_s, lift.bottom_m, band_m=(0.0, 0.0))
        kept = closed & ~set_aside(seat, SEAT_LOW_M, SEAT_HIGH_M)
        out["aside"] = bool((closed & ~kept).any())
        if not np.isnan(low[kept]).all():
            out["pooled_top"] = float(np.nanmax(low[kept]))
        low, high, seat = pooled_bounds(t, closed, z, lift.times_s, lift.bottom_m)
        combined = combine(t, closed, j_low, j_high, lift, height, hold, (0.0, 0.0), True,
                           Pooled(low, high, seat, set_aside(seat, SEAT_LOW_M, SEAT_HIGH_M), seat > SEAT_HIGH_M))
        if not combined.reason.startswith("unsure: the camera and the joints disagree") and not out["aside"]:
            out["both_sure"], out["both_maybe"] = combined.hold_s, combined.possible_s
    return out


def release_readings(state: np.ndarray, action: np.ndarray | None, cube: float) -> list[tuple[float, float]]:
    """Per squeeze (`holding.closed_on_cube`) followed by two steps: the measured gripper at each of
    them less its reading at the squeeze's last step (rig units; `holding.squeezed_when_read` counts
    the first as squeezed when it is within `STILL_PCT`)."""
    from orchestrator.judging.auto.seat import squeezes
    from orchestrator.sim.holding import closed_on_cube

    measured = np.asarray(state, float)[:, 5]
    closed = closed_on_cube(measured, cube, None if action is None else np.asarray(action, float)[:, 5])
    return [(float(measured[last + 1] - measured[last]), float(measured[last + 2] - measured[last]))
            for _, last in squeezes(closed) if last + 2 < len(measured)]


def _crossing(times: np.ndarray, values: np.ndarray, level: float) -> float | None:
    """The first upward crossing of `level` between two consecutive samples (neither NaN), interpolated."""
    for k in range(1, len(values)):
        a, b = values[k - 1], values[k]
        if not (np.isnan(a) or np.isnan(b)) and a < level <= b:
            return float(times[k - 1] + (level - a) / (b - a) * (times[k] - times[k - 1]))
    return None


def hold_start(t: np.ndarray, state: np.ndarray, action: np.ndarray | None, cube: float, height: float,
               lift) -> dict | None:
    """For the longest squeeze, when it ends with the jaws read still shut at the command's step
    (`holding.squeezed_when_read`): that step's time (physics' hold ends within the next step), when
    the grasp point's rise less the deepest and the shallowest seat first reaches `height`, and the
    camera's bottom crossing it upwards, interpolated between its frames (sub-frame timing)."""
    from orchestrator.judging.auto.rater import SEAT_HIGH_M, SEAT_LOW_M, grip
    from orchestrator.judging.auto.seat import squeezes
    from orchestrator.sim.holding import closed_on_cube

    held, z = grip(state, cube, action)
    runs = squeezes(held)
    if action is None or not runs:
        return None
    first, last = max(runs, key=lambda run: run[1] - run[0])
    if closed_on_cube(np.asarray(state, float)[last:last + 1, 5], cube, np.asarray(action, float)[last:last + 1, 5])[0]:
        return None                                   # not ended by the command with the jaws still shut
    rise = z[first:last + 1] - z[first]
    out = {"end": float(t[last]), "camera": None}
    for name, seat in (("deepest", SEAT_HIGH_M), ("shallowest", SEAT_LOW_M)):
        up = np.flatnonzero(rise - seat >= height - 1e-9)
        out[name] = float(t[first + up[0]]) if up.size else None
    if lift is not None:
        inside = (lift.times_s >= t[first]) & (lift.times_s <= t[last])
        out["camera"] = _crossing(lift.times_s[inside], lift.bottom_m[inside], height)
    return out


def start_figures(name: str, truths: list) -> None:
    """The hold's start by the joints' seat range and by the camera's sub-frame crossing, less
    physics' start (its end, taken mid-way through the step after the command's, less its hold)."""
    rows = [(hold, x["start"]) for (_, hold), x in truths if x["start"] is not None and 0.2 < hold < 3.0]
    for key in ("deepest", "shallowest", "camera"):
        errors = [1000 * (s[key] - (s["end"] + 1 / 60 - hold)) for hold, s in rows if s[key] is not None]
        if errors:
            print(f"{name}: the hold's start by {key if key == 'camera' else 'the ' + key + ' seat'} - physics' "
                  f"(+-17 ms), {len(errors)} holds ended by the command: min {min(errors):+.0f}, p5 "
                  f"{np.percentile(errors, 5):+.0f}, p50 {np.median(errors):+.0f}, p95 {np.percentile(errors, 95):+.0f}, "
                  f"max {max(errors):+.0f} ms", flush=True)


def release_figures(name: str, rated: list[dict]) -> None:
    """The figures `holding.STILL_PCT` is set from: the gripper's reading at the step after a
    squeeze (the one that commanded the jaws open) and at the next."""
    from orchestrator.sim.holding import STILL_PCT

    after = [pair for x in rated for pair in x["release"]]
    still = [(a, b) for a, b in after if abs(a) <= STILL_PCT]
    shut = sum(a < -STILL_PCT for a, _ in after)
    if still:
        print(f"{name}: the gripper after {len(after)} squeezes: still within {STILL_PCT:g} of the squeeze's "
              f"reading at the next step on {len(still)} (at most {max(abs(a) for a, _ in still):.2g} off), opened "
              f"by {min(b for _, b in still):.2f} or more at the step after; shut further on {shut}, opened at "
              f"once on {len(after) - len(still) - shut}", flush=True)


def kappa(pairs: list[tuple[str, str]]) -> str:
    from orchestrator.analysis.stats.agreement import cohen_kappa

    if not pairs or len({a for a, _ in pairs} | {b for _, b in pairs}) < 2:
        return "undefined (one class)"
    return f"{cohen_kappa([a for a, _ in pairs], [b for _, b in pairs]):.3f}"


def summary(name: str, rows: list[dict], rated: list[dict]) -> None:
    for sense in ("joints", "both"):
        truth = ["success" if r["physics"] else "failure" for r in rows]
        labels = [x[sense] for x in rated]
        unsure = sum(lab == "unsure" for lab in labels)
        pairs = [(lab, tru) for lab, tru in zip(labels, truth, strict=True) if lab != "unsure"]
        wrong = sum(a != b for a, b in pairs)
        print(f"{name}: {sense}: {unsure} of {len(rows)} unsure ({100 * unsure / max(len(rows), 1):.0f} %), "
              f"{wrong} wrong, {len(pairs) - wrong} right; kappa against physics on the rated {kappa(pairs)}", flush=True)
    deciders: dict[str, int] = {}
    for x in rated:
        if x["both"] != "unsure":
            deciders[x["decided_by"]] = deciders.get(x["decided_by"], 0) + 1
    print(f"{name}: decided by {deciders}", flush=True)


def calibration(name: str, rows: list[dict], rated: list[dict]) -> None:
    """The figures the bands are set from (module docstring)."""
    release_figures(name, rated)
    truths = [(r["truth"], x) for r, x in zip(rows, rated, strict=True) if r["truth"] is not None]
    print(f"{name}: {len(truths)} of {len(rows)} episodes with physics' truth stored", flush=True)
    start_figures(name, truths)
    errors = [1000 * (x["pooled_top"] - lift) for (lift, _), x in truths if x["pooled_top"] is not None]
    aside = sum(x["aside"] for _, x in truths)
    if errors:
        print(f"{name}: pooled seat set aside (outside the joints' range) on {aside} episodes; on the other "
              f"{len(errors)}, its highest bottom - physics': min {min(errors):.2f}, "
              f"p5 {np.percentile(errors, 5):.2f}, p50 {np.percentile(errors, 50):.2f}, p95 "
              f"{np.percentile(errors, 95):.2f}, max {max(errors):.2f} mm; largest |error| "
              f"{max(abs(e) for e in errors):.2f} mm", flush=True)
    for kind, flag in (("well seated (no frame wedged)", False), ("with a wedged frame (its every frame)", True)):
        wrist = [1000 * (x["wrist_top"] - lift) for (lift, _), x in truths if x["wrist_top"] is not None and x["wedged"] == flag]
        if wrist:
            print(f"{name}: the wrist camera (its seat per frame), {kind}, on {len(wrist)} episodes: its highest bottom - "
                  f"physics': min {min(wrist):.2f}, p5 {np.percentile(wrist, 5):.2f}, p50 {np.percentile(wrist, 50):.2f}, "
                  f"p95 {np.percentile(wrist, 95):.2f}, max {max(wrist):.2f} mm", flush=True)
    for sense in ("joints", "both"):
        held = [(hold, x) for (_, hold), x in truths if x[f"{sense}_sure"] is not None and hold > 0.2]
        if not held:
            continue
        early = [hold - x[f"{sense}_sure"] for hold, x in held if x[f"{sense}_sure"] > 0]
        late = [hold - x[f"{sense}_maybe"] for hold, x in held]
        print(f"{name}: {sense}: physics' hold - the certain hold on {len(early)} episodes held: min "
              f"{min(early, default=np.nan):+.3f}, p50 {np.median(early) if early else np.nan:+.3f} s; physics' hold - "
              f"the possible hold on {len(late)}: p50 {np.median(late):+.3f}, max {max(late):+.3f} s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--campaign", type=Path, nargs="+", required=True)
    parser.add_argument("--cache", type=Path, help="keep each episode's camera track here")
    parser.add_argument("--episodes", action="store_true", help="one line per episode")
    parser.add_argument("--calibrate", action="store_true", help="the figures the bands are set from")
    parser.add_argument("--wrist", action="store_true",
                        help="measure the wrist video too, taking the simulated rig's wrist mount")
    args = parser.parse_args()
    for campaign in args.campaign:
        test, rows = episodes(campaign)
        cache = args.cache / campaign.name if args.cache else None
        rated = [rate_episode(row, test, cache, args.wrist, args.calibrate) for row in rows]
        if args.episodes:
            for row, x in zip(rows, rated, strict=True):
                lift, hold = row["truth"] or (np.nan, np.nan)
                print(f"{row['id']}: physics {'success' if row['physics'] else 'failure'} (bottom {1000 * lift:.1f} mm, "
                      f"hold {hold:.3f} s); joints {x['joints']}, both {x['both']}: {x['reason']}", flush=True)
        summary(campaign.name, rows, rated)
        if args.calibrate:
            calibration(campaign.name, rows, rated)


if __name__ == "__main__":
    main()
