"""The progress ladder: reached, grasped, lifted, held with their times, from
the recorded joints (`judging/auto/ladder.py`) and from physics (`sim/success.py`), on planted
episodes that stop at each stage, each with a positive control that differs in the one thing
the next stage needs; the funnel's intervals against an oracle written from the formula."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from orchestrator.judging.auto.ladder import ladder
from orchestrator.sim import fk
from orchestrator.sim.success import REACH_CUBES, LiftHoldTracker
from orchestrator.store.records import NO_STAGE, STAGES, furthest_stage

CUBE = 0.03
MARK = (0.2, 0.0)
FPS = 30.0


@pytest.fixture(scope="module")
def kinematics():
    from orchestrator.sim.kinematics import arm_kinematics

    return arm_kinematics()


def pose(kinematics, x: float, y: float, z: float) -> np.ndarray:
    """Joint degrees putting the grasp point at (x, y, z), gripper pointing down."""
    q, _ = kinematics.ik([x, y, z], kinematics.down_rotation(0.0))
    return np.degrees(q)


def episode(kinematics, *, arrive_at=(0.2, 0.0), squeeze=True, lift_m=0.055, hold_steps=45):
    """4 s at 30 Hz: the arm waits 12 cm above the mark's side (steps 0-14), goes down to
    `arrive_at` at the cube's centre height (step 15), squeezes from step 30 (the jaws stopped by
    the cube), raises the grasp point by `lift_m` from step 45 for `hold_steps`, then puts it down."""
    from orchestrator.judging.auto.rater import SEAT_M

    holding = float(np.interp(CUBE * 0.95, fk.GAP_M, fk.GAP_PCT))
    n = 120
    away = pose(kinematics, 0.12, 0.15, 0.12)
    down = pose(kinematics, arrive_at[0], arrive_at[1], CUBE / 2)
    up = pose(kinematics, arrive_at[0], arrive_at[1], CUBE / 2 + lift_m + SEAT_M)
    state = np.tile(np.append(away, 60.0), (n, 1))
    state[15:, :5] = down
    state[30:, 5] = holding
    state[45:45 + hold_steps, :5] = up
    action = state.copy()
    if squeeze:
        action[30:, 5] = 0.0
    else:
        action[30:, 5] = holding          # stopped at the cube's width without pushing: no squeeze
    return np.arange(n) / FPS, state, action


def rungs(kinematics, **kwargs) -> dict[str, float | None]:
    t, state, action = episode(kinematics, **kwargs)
    return ladder(t, state, CUBE, 0.04, 1.0, MARK, action)


def test_planted_episodes_reach_each_stage_with_its_time(kinematics):
    """One series: never near / reached only / grasped only / lifted only / held; each next one
    differs only in what the missing stage needs (the positive control of that stage)."""
    series = [
        ("none", dict(arrive_at=(0.2, 0.09))),                 # 9 cm beside the mark: never reached
        ("reached", dict(squeeze=False)),                        # ... at the mark: reached, no squeeze
        ("grasped", dict(lift_m=0.03)),                          # ... squeezed: grasped, lifted 3 cm only
        ("lifted", dict(hold_steps=20)),                         # ... 5.5 cm: lifted, for 0.67 s only
        ("held", dict()),                                        # ... for 1.5 s: held
    ]
    seen = []
    for expected, kwargs in series:
        got = rungs(kinematics, **kwargs)
        assert furthest_stage(got) == expected, (expected, got)
        seen.append(expected)
    assert seen == [NO_STAGE, *STAGES]                            # count guard: every stage planted
    held = rungs(kinematics)
    assert held == pytest.approx({"reached": 15 / FPS, "grasped": 30 / FPS, "lifted": 45 / FPS,
                                  "held": 75 / FPS}, abs=1e-3)
    # monotone: the squeeze and lift 9 cm from the mark count for nothing (nothing was reached) ...
    far = rungs(kinematics, arrive_at=(0.2, 0.09))
    assert far == dict.fromkeys(STAGES)
    # ... and within the reach distance they count (the reach's positive control at its bound)
    near = rungs(kinematics, arrive_at=(0.2, REACH_CUBES * CUBE * 0.9))
    assert furthest_stage(near) == "held"


def test_physics_ladder_on_a_planted_trajectory():
    """`LiftHoldTracker.ladder` fed contact and position samples at 500 Hz: each stage at the first
    sample its condition holds after the one before, `held` at the hold's completion."""
    def run(touch_from: float | None, lift_from: float | None, drop_at: float, near_from: float = 0.5):
        tr = LiftHoldTracker(0.04, 1.0, CUBE)
        cube = (0.2, 0.0, CUBE / 2)
        for k in range(2000):                                    # 4 s
            t = k / 500
            grasp = cube if t >= near_from else (0.2, 0.2, 0.1)
            touch = touch_from is not None and touch_from <= t < drop_at
            bottom = 0.05 if (lift_from is not None and lift_from <= t < drop_at) else 0.0
            tr.update(t, bottom, touch, touch, grasp, cube)
        return tr
    full = run(1.0, 1.5, 3.5)
    assert full.ladder() == pytest.approx({"reached": 0.5, "grasped": 1.0, "lifted": 1.5, "held": 2.5})
    assert full.success and full.time_to_success_s == pytest.approx(2.5)
    assert furthest_stage(run(1.0, 1.5, 2.0).ladder()) == "lifted"       # held 0.5 s
    assert furthest_stage(run(1.0, None, 3.5).ladder()) == "grasped"     # never high
    assert furthest_stage(run(None, None, 3.5).ladder()) == "reached"    # never touched
    assert furthest_stage(run(1.0, 1.5, 3.5, near_from=9.0).ladder()) == NO_STAGE   # never near it


def _oracle_interval(per_mark: list[tuple[int, int]]) -> tuple[float, float]:
    """The clustered rate's interval written out from its definition (Rao & Scott effective
    counts, Wilson's score interval with t(K-1)), not with the project's code."""
    y = np.array([s for s, _ in per_mark], float)
    m = np.array([n for _, n in per_mark], float)
    k, n = len(m), m.sum()
    p = y.sum() / n
    if np.all(m == 1):
        z = sps.norm.ppf(0.975)
        neff, yeff = n, y.sum()
    else:
        v0 = p * (1 - p) / n
        vc = k / (k - 1) * np.sum((y - p * m) ** 2) / n ** 2
        deff = max(1.0, vc / v0) if v0 > 0 else 1.0
        if min(y.sum(), n - y.sum()) < m.max():
            deff = max(deff, n / k)
        z = sps.t.ppf(0.975, k - 1)
        neff, yeff = n / deff, y.sum() / deff
    ph = yeff / neff
    centre = (ph + z * z / (2 * neff)) / (1 + z * z / neff)
    half = z * math.sqrt(ph * (1 - ph) / neff + z * z / (4 * neff * neff)) / (1 + z * z / neff)
    lo = 0.0 if y.sum() == 0 else centre - half
    hi = 1.0 if y.sum() == n else centre + half
    return lo, hi


def test_the_funnel_matches_an_oracle_with_the_mark_as_the_unit():
    """A planted campaign: 8 marks x 3 repeats x 2 policies with known furthest stages; every
    stage's counts, interval (clustered over marks) and median time against the oracle."""
    from orchestrator.analysis.outcomes import OutcomeSet, TrialOutcome
    from orchestrator.analysis.report.funnel import build_funnel

    rng = np.random.default_rng(51)
    outcomes, ladders, truth = [], {}, {}
    for policy, skill in (("A", 0.8), ("B", 0.5)):
        for mark in range(8):
            difficulty = rng.uniform(-0.3, 0.3)                   # repeats of a mark share it
            for repeat in range(3):
                ep = f"ep_{policy}{mark}{repeat}"
                rank = int(sum(rng.uniform() < skill + difficulty for _ in range(4)))
                times = {s: (round(1.0 + i + rng.uniform(), 3) if i < rank else None) for i, s in enumerate(STAGES)}
                ladders[ep] = (furthest_stage(times), times)
                outcomes.append(TrialOutcome(layout=f"M{mark}", repeat=repeat, policy=policy, success=rank == 4,
                                             episode_id=ep, slot=len(outcomes)))
                truth.setdefault(policy, []).append((f"M{mark}", rank, times))
    data = OutcomeSet(outcomes=tuple(outcomes), policies=("A", "B"), source="planted", label_source="physics",
                      ladders={"auto": ladders})
    section = build_funnel(data)
    assert section is not None and "no decision" in section.note
    checked = 0
    for row in section.rows:
        assert row.source == "auto" and row.episodes == 24 and row.marks == 8
        for k, stage in enumerate(row.stages, 1):
            per: dict[str, list[int]] = {}
            for mark, rank, _ in truth[row.policy]:
                per.setdefault(mark, [0, 0])
                per[mark][0] += rank >= k
                per[mark][1] += 1
            assert stage.reached == sum(v[0] for v in per.values())
            lo, hi = _oracle_interval([tuple(v) for v in per.values()])
            assert (stage.interval.lo, stage.interval.hi) == pytest.approx((lo, hi), abs=1e-9)
            times = [t[stage.stage] for _, rank, t in truth[row.policy] if rank >= k]
            assert stage.median_s == (pytest.approx(float(np.median(times))) if times else None)
            checked += 1
    assert checked == 8                                           # 2 policies x 4 stages
