"""`orchestrator compare` in process: the comparison of campaign stores written here (no rig),
checked against counts made independently from the stores and against scipy and rliable's
definitions; the refusals; the compare CSV; the JSON contract; the verdict's words."""

from __future__ import annotations

import itertools
import json
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from orchestrator.analysis.compare import (
    SCHEMA,
    CampaignSource,
    build_comparison,
    read_comparison,
    read_inputs,
    render,
    to_dict,
)
from orchestrator.analysis.compare.scores import rng_for
from orchestrator.analysis.stats.aggregate import improvement_interval
from orchestrator.core.errors import BadInput
from orchestrator.store.sqlite import CampaignStore
from support.compare_campaigns import POLICIES, make_campaign, make_suite

REPS = 2000


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    root = tmp_path_factory.mktemp("suite")
    dirs = make_suite(root)
    inputs = read_inputs([CampaignSource(d) for d in dirs], [])
    return dirs, inputs, build_comparison(inputs, reps=REPS, seed=3)


def _store_counts(directory: Path) -> dict[tuple[str, str], list[int]]:
    """{(policy, stratum): [successes, trials]} read from the store's own rows (physics labels)."""
    store = CampaignStore.open_readonly(directory)
    try:
        physics = {e["id"]: e["physics_success"] for e in store.episodes()}
        out: dict = defaultdict(lambda: [0, 0])
        for t in store.trials():
            if t.episode_id in physics:
                out[t.policy][0] += bool(physics[t.episode_id])
                out[t.policy][1] += 1
        return out
    finally:
        store.close()


def test_per_seed_counts_and_t_intervals_match_the_stores_and_scipy(suite):
    dirs, inputs, comparison = suite
    # sim_demo and sim_hard hold nothing out: their seed counts are the stores' counts
    checked = 0
    for directory, task in ((dirs[0], "sim-demo"), (dirs[1], "sim-hard")):
        counts = _store_counts(directory)
        for m in comparison.main.methods:
            t = next(t for t in m.tasks if t.task == task)
            for s in t.seeds:
                label = next(lab for lab, (meth, seed, step, _) in POLICIES.items()
                             if meth == m.method and seed == s.seed and step == s.step)
                assert [s.successes, s.trials] == counts[label]
                checked += 1
            rates = [s.successes / s.trials for s in t.seeds]
            half = sps.t.ppf(0.975, len(rates) - 1) * np.std(rates, ddof=1) / np.sqrt(len(rates))
            assert t.t95.lo == pytest.approx(max(0, np.mean(rates) - half))        # clipped to [0, 1]
            assert t.t95.hi == pytest.approx(min(1, np.mean(rates) + half))
    assert checked == 12


def test_across_task_aggregates_follow_rliables_definitions(suite):
    _, _, comparison = suite
    for m in comparison.main.methods:
        runs = np.array([[s.successes / s.trials for s in t.seeds] for t in m.tasks])   # tasks x seeds
        assert m.mean.estimate == pytest.approx(runs.mean(axis=1).mean())
        assert m.iqm.estimate == pytest.approx(sps.trim_mean(runs.ravel(), 0.25))
        assert m.mean.lo <= m.mean.estimate <= m.mean.hi and m.iqm.lo <= m.iqm.estimate <= m.iqm.hi
    (poi,) = comparison.main.improvements
    x = next(m for m in comparison.main.methods if m.method == poi.x)
    y = next(m for m in comparison.main.methods if m.method == poi.y)
    by_hand = np.mean([np.mean([(a.rate > b.rate) + 0.5 * (a.rate == b.rate) for a in tx.seeds for b in ty.seeds])
                       for tx, ty in zip(x.tasks, y.tasks, strict=True)])
    assert poi.interval.estimate == pytest.approx(by_hand)
    # the bootstrap's percentile interval widened about the estimate by sqrt(3/2) (3 seeds a task)
    raw = improvement_interval([[s.rate for s in t.seeds] for t in x.tasks],
                               [[s.rate for s in t.seeds] for t in y.tasks], reps=REPS,
                               rng=rng_for(3)(comparison.main.label, "improvement", x.method, y.method))
    widened = (max(0.0, by_hand - 1.5 ** 0.5 * (by_hand - raw.lo)), min(1.0, by_hand + 1.5 ** 0.5 * (raw.hi - by_hand)))
    assert (poi.interval.lo, poi.interval.hi) == pytest.approx(widened)
    assert [p.method for p in comparison.main.profiles] == ["narrow", "wide"]
    for p, m in zip(comparison.main.profiles, (x, y) if x.method == "narrow" else (y, x), strict=True):
        runs = [s.rate for t in m.tasks for s in t.seeds]
        k = sum(r > 0.5 for r in runs)
        cp = sps.binomtest(k, len(runs)).proportion_ci(0.95, method="exact")      # scipy's Clopper-Pearson
        i = p.taus.index(0.5)
        assert (p.values[i], p.lo[i], p.hi[i]) == pytest.approx((k / len(runs), cp.low, cp.high))


def test_the_checkpoint_pairs_are_every_x_with_every_y_on_a_layout_run(suite):
    dirs, _, comparison = suite
    (paired,) = comparison.main.paired
    # independent count from the stores: every narrow scored checkpoint (N0, N1, N2) against every
    # wide policy (W0, W1, W2) on the same mark (seed numbers pair nothing), held-out marks
    # (sim_near's centre) left out
    pairs = {"both": 0, "x_only": 0, "y_only": 0, "neither": 0}
    centre = {"M06", "M07", "M10", "M11", "M14", "M15"}
    for directory in dirs:
        store = CampaignStore.open_readonly(directory)
        try:
            physics = {e["id"]: bool(e["physics_success"]) for e in store.episodes()}
            got = {(t.policy, t.mark_id): physics[t.episode_id] for t in store.trials()}
        finally:
            store.close()
        for (policy, mark), ok in got.items():
            if policy not in ("N0", "N1", "N2") or ("near" in str(directory) and mark in centre):
                continue
            for wide in ("W0", "W1", "W2"):
                pairs[{(True, True): "both", (True, False): "x_only", (False, True): "y_only",
                       (False, False): "neither"}[(ok, got[(wide, mark)])]] += 1
    t = paired.checkpoints.table
    assert {"both": t.both, "x_only": t.a_only, "y_only": t.b_only, "neither": t.neither} == pairs
    assert sum(pairs.values()) == 9 * (20 + 20 + 14)
    assert paired.checkpoints.units == 20 + 20 + 14
    assert paired.checkpoints.statement.startswith("narrow's seeds 0-2 vs wide's seeds 0-2 on these layouts")
    # the verdict is the method-level test: 3 seeds a method in each of 3 tasks, every narrow seed
    # above every wide seed: 2 of the 20^3 label arrangements are as extreme (p = 1/4000)
    assert (paired.seeds.seeds_x, paired.seeds.seeds_y, paired.seeds.tasks) == (9, 9, 3)
    assert paired.seeds.exact and paired.seeds.arrangements == 20 ** 3
    assert paired.p == pytest.approx(2 / 20 ** 3)
    assert paired.significant and paired.verdict.startswith(
        "narrow better than wide across 3 tasks (the training seed the unit): permutation of method labels")


def test_held_out_strata_are_a_section_of_their_own(suite):
    _, inputs, comparison = suite
    held = comparison.held_out
    assert held is not None and held.label == "held-out strata" and comparison.main.label == "in distribution"
    assert {t.task for m in held.methods for t in m.tasks} == {"sim-near"}
    assert all(s.trials == 6 for m in held.methods for t in m.tasks for s in t.seeds)   # 6 centre marks
    near_main = [s.trials for m in comparison.main.methods for t in m.tasks if t.task == "sim-near" for s in t.seeds]
    assert near_main == [14] * 6
    assert sum(1 for t in inputs.trials if t.held_out) == 6 * len(POLICIES)


def test_ladder_and_leaderboard(suite):
    _, _, comparison = suite
    (ladder,) = comparison.main.ladders
    assert (ladder.method, ladder.seed, [s.step for s in ladder.steps]) == ("narrow", 0, [1000, 2000, 3000])
    assert (ladder.last, ladder.previous) == (3000, 2000)
    words = ladder.statement
    # the oracle: the cluster-level sign-flip mid-p over the marks' discordance (later - earlier),
    # over every sign pattern, not computed by the project's code: the 2^n patterns' totals counted
    # by adding one unit at a time (how many patterns give each total), not listed one by one
    units: dict[str, int] = {}
    for name, sign in [(n, 1) for n in ladder.later_only] + [(n, -1) for n in ladder.earlier_only]:
        units[name.split("#")[0]] = units.get(name.split("#")[0], 0) + sign
    d = [abs(x) for x in units.values() if x]
    s = abs(sum(units.values()))
    patterns: Counter[int] = Counter({0: 1})
    for x in d:
        step: Counter[int] = Counter()
        for t, n in patterns.items():
            step[t + x] += n
            step[t - x] += n
        patterns = step
    assert sum(patterns.values()) == 2 ** len(d)
    above, at = sum(n for t, n in patterns.items() if t > s), patterns[s]
    mid = 1.0 if s == 0 else min(1.0, 2 * (above + at / 2) / 2 ** len(d))
    assert len(ladder.later_only) + len(ladder.earlier_only) >= 3 and len(d) >= 2   # a contest, not a tie of nothing
    assert ladder.last_mid_p == pytest.approx(mid, abs=1e-12)
    # this suite's data is one branch of the statement; which one is fixed, so a wrong branch fails
    assert mid <= 0.05 and len(ladder.later_only) > len(ladder.earlier_only), mid
    assert words.startswith("step 3000 still improves on step 2000"), words
    assert f"{len(ladder.later_only)} layouts only step 3000 succeeded" in words
    board = comparison.main.leaderboard
    assert len(board.rows) == len(POLICIES) and len(board.components) == 1
    assert [r.rating for r in board.rows] == sorted((r.rating for r in board.rows), reverse=True)
    assert abs(sum(r.rating for r in board.rows)) < 1e-8
    assert all(r.lo <= r.rating <= r.hi for r in board.rows)
    assert not any("not connected" in n for n in board.notes)


def test_json_contract_and_reader(suite, tmp_path):
    _, _, comparison = suite
    doc = json.loads(render(comparison, "json"))
    assert doc["schema"] == SCHEMA == "orchestrator.compare/2"
    narrow = doc["methods"]["narrow"]
    assert set(narrow["mean"]) >= {"estimate", "ci95"} and set(narrow["iqm"]) >= {"estimate", "ci95"}
    task = narrow["tasks"]["sim-demo"]
    assert set(task) >= {"mean_over_seeds", "t95", "seeds"} and len(task["t95"]) == 2
    assert set(task["seeds"]["0"]) >= {"successes", "trials", "wilson95"}
    assert set(doc["probability_of_improvement"][0]) >= {"x", "y", "estimate", "ci95"}
    assert set(doc["paired"][0]) >= {"x", "y", "unit", "p", "verdict", "checkpoints"}
    assert doc["paired"][0]["unit"] == "training seed" and doc["paired"][0]["checkpoints"]["unit"] == "campaign, mark"
    assert doc["ladders"][0]["last"]["step"] == 3000
    assert set(doc["leaderboard"][0]) >= {"name", "rating", "ci95", "comparisons"}
    assert isinstance(doc["notes"], list) and doc["held_out"]["methods"]
    path = tmp_path / "c.json"
    path.write_text(json.dumps(doc))
    assert read_comparison(path) == doc
    path.write_text(json.dumps({**doc, "schema": "orchestrator.compare/1"}))     # version 1: verdicts on pooled seeds
    with pytest.raises(BadInput, match="this version reads 'orchestrator.compare/2'"):
        read_comparison(path)


def test_seeded(suite):
    _, inputs, comparison = suite
    again = build_comparison(inputs, reps=REPS, seed=3)
    other = build_comparison(inputs, reps=REPS, seed=4)
    assert to_dict(again) == to_dict(comparison)
    keys = ("methods", "probability_of_improvement", "profiles", "leaderboard")
    assert [to_dict(other)[k] for k in keys] != [to_dict(comparison)[k] for k in keys]


# ------------------------------------------------------------------ refusals


def test_one_task_with_two_success_tests_is_refused(tmp_path):
    a = make_campaign(tmp_path / "a", "sim_demo")
    b = make_campaign(tmp_path / "b", "sim_demo", edit=("hold_s: 1.0", "hold_s: 2.0"))
    with pytest.raises(BadInput) as info:
        read_inputs([CampaignSource(a), CampaignSource(b)], [])
    (line,) = str(info.value).splitlines()
    assert "task 'sim-demo' has two success tests" in line and "for 1.0 s" in line and "for 2.0 s" in line
    # named apart, they are two tasks (positive control)
    inputs = read_inputs([CampaignSource(a), CampaignSource(b, task="sim-demo-long")], [])
    assert inputs.tasks == ("sim-demo", "sim-demo-long")


def test_a_method_with_no_trials_is_refused(tmp_path):
    a = make_campaign(tmp_path / "a", "sim_demo", skip=("W0", "W1", "W2"))
    with pytest.raises(BadInput, match="method 'wide' has no trial with a known outcome"):
        read_inputs([CampaignSource(a)], [])
    b = make_campaign(tmp_path / "b", "sim_demo", skip=("W1",))
    assert read_inputs([CampaignSource(b)], []).trials


# ------------------------------------------------------------------ the compare CSV


def _csv(path: Path, rows: list[str]) -> Path:
    path.write_text("task,policy,method,training_seed,layout,success,repeat,step\n" + "\n".join(rows) + "\n")
    return path


def test_compare_csv_pairs_on_task_seed_layout_repeat(tmp_path):
    rows = []
    rng = np.random.default_rng(1)
    for task in ("t1", "t2"):
        for seed in (0, 1):
            for layout in range(12):
                rows.append(f"{task},X{seed},X,{seed},L{layout},{int(rng.random() < 0.9)},0,")
                rows.append(f"{task},Y{seed},Y,{seed},L{layout},{int(rng.random() < 0.3)},0,")
    path = _csv(tmp_path / "o.csv", rows)
    comparison = build_comparison(read_inputs([], [path]), reps=REPS)
    (paired,) = comparison.main.paired
    pairs = paired.checkpoints
    assert pairs.table.n == 2 * 12 * 2 * 2 and pairs.units == 2 * 12 and pairs.campaigns == 2   # X0, X1 x Y0, Y1
    assert [m.method for m in comparison.main.methods] == ["X", "Y"]
    assert comparison.held_out is None and comparison.main.label == "all strata"


def test_compare_csv_problems_are_located(tmp_path):
    path = _csv(tmp_path / "bad.csv", ["t1,A,X,0,L1,1,0,", "t1,A,X,0,L1,maybe,0,", "t1,A,X,1,L2,1,0,",
                                       "t1,B,Y,zero,L1,1,0,"])
    with pytest.raises(BadInput) as info:
        read_inputs([], [path])
    problems = info.value.problems
    assert problems[0] == f"{path}:3: success must be one of 1,0,true,false,yes,no, not 'maybe'"
    assert problems[1].startswith(f"{path}:4: task 't1': policy 'A' is X seed 1 here but X seed 0 at line 2")
    assert problems[2] == f"{path}:5: training_seed must be a whole number, not 'zero'"
    assert len(problems) == 3


def test_verdict_words_agree_with_the_test(tmp_path):
    rng = np.random.default_rng(5)
    checked = {True: 0, False: 0}
    for effect in (0.0, 0.0, 0.6, 0.6):
        rows = []
        for task in ("t1", "t2", "t3"):
            for layout in range(16):
                for seed in (0, 1, 2):
                    rows.append(f"{task},X{seed},X,{seed},L{layout},{int(rng.random() < 0.3 + effect)},0,")
                    rows.append(f"{task},Y{seed},Y,{seed},L{layout},{int(rng.random() < 0.3)},0,")
        comparison = build_comparison(read_inputs([], [_csv(tmp_path / f"v{len(rows)}{effect}.csv", rows)]), reps=500)
        (p,) = comparison.main.paired
        assert ("better than" in p.verdict) == p.significant == (p.p <= 0.05)
        assert p.verdict.startswith(f"{p.x} vs {p.y}: not established") != p.significant
        assert "better" not in p.checkpoints.statement       # the checkpoint level never says "better"
        checked[p.significant] += 1
    assert checked[True] >= 1 and checked[False] >= 1      # both words occur


def test_disconnected_leaderboard_warns(tmp_path):
    rows = [f"t1,{p},{p},,L{i},{int((i + k) % 3 == 0)},0," for i in range(9) for k, p in enumerate("AB")]
    rows += [f"t2,{p},{p},,L{i},{int((i + k) % 2 == 0)},0," for i in range(9) for k, p in enumerate("CD")]
    board = build_comparison(read_inputs([], [_csv(tmp_path / "d.csv", rows)]), reps=500).main.leaderboard
    assert len(board.components) == 2 and any("not connected" in n for n in board.notes)
    rows += [f"t2,A,A,,L{i},{int(i % 2)},0," for i in range(9)]          # A now meets C and D too
    board = build_comparison(read_inputs([], [_csv(tmp_path / "e.csv", rows)]), reps=500).main.leaderboard
    assert len(board.components) == 1 and not any("not connected" in n for n in board.notes)


def test_ladder_statements_say_what_the_test_says(tmp_path):
    rising = [f"t,X@{s},X,0,L{i},{int(i < 4 + 6 * k)},0,{s}" for i in range(20) for k, s in enumerate((100, 200))]
    flat = [f"t,X@{s},X,0,L{i},{int(i % 2)},0,{s}" for i in range(20) for s in (100, 200)]
    other = [f"t,Y,Y,0,L{i},{int(i % 3 == 0)},0," for i in range(20)]
    up = build_comparison(read_inputs([], [_csv(tmp_path / "r.csv", rising + other)]), reps=500).main.ladders[0]
    assert up.statement.startswith("step 200 still improves on step 100: 6 layouts only step 200 succeeded")
    assert up.last_mid_p == pytest.approx(2 * 0.5 ** 6 - 0.5 ** 6)          # McNemar mid-p, 6 to 0
    same = build_comparison(read_inputs([], [_csv(tmp_path / "f.csv", flat + other)]), reps=500).main.ladders[0]
    assert same.statement.startswith("no evidence that step 200 still improves on step 100: 0 layouts")
    assert "no trend established" in same.trend_statement


def test_a_two_step_ladder_with_repeats_says_the_same_in_its_trend_and_its_last_step(tmp_path):
    """On one two-step ladder the trend line said "p < 0.0001: success rises
    with the step" (20 layout runs counted as independent) while the last-step line said mid-p
    0.062. 10 marks x 5 repeats; on marks 0-3 only step 200 succeeds, on every repeat; elsewhere
    the two steps agree. Both lines test the 4 discordant marks: by enumeration of the 2^4 sign
    patterns, exact 2/16, mid-p 1/16."""
    rows = []
    for m in range(10):
        for r in range(5):
            later, earlier = (True, False) if m < 4 else (r % 2 == 0, r % 2 == 0)
            rows += [f"t,X@100,X,0,L{m},{int(earlier)},{r},100", f"t,X@200,X,0,L{m},{int(later)},{r},200"]
    ladder = build_comparison(read_inputs([], [_csv(tmp_path / "l.csv", rows)]), reps=200).main.ladders[0]
    sums = [sum(5 * s for s in signs) for signs in itertools.product((1, -1), repeat=4)]
    upper = sum(1 for x in sums if x >= 20) / len(sums)
    assert (2 * upper, upper) == (0.125, 0.0625)
    assert ladder.trend.exact_p == pytest.approx(2 * upper) and ladder.trend.mid_p == pytest.approx(upper)
    assert ladder.last_mid_p == pytest.approx(upper)
    assert "no trend established" in ladder.trend_statement
    assert ladder.statement.startswith("no evidence that step 200 still improves on step 100: 20 layouts")


def test_seed_numbers_pair_nothing(tmp_path):
    """Y trained from seed 0 only; X's seed 0 is its weak run. Pairing by seed
    number made the verdict rest on X's seed 0 alone ("Y better than X ... mid-p < 0.0001" with
    both methods' means equal)."""
    rows = []
    for layout in range(24):
        rows += [f"t,X0,X,0,L{layout},{int(layout % 8 == 0)},0,", f"t,X1,X,1,L{layout},{int(layout % 8 != 0)},0,",
                 f"t,X2,X,2,L{layout},{int(layout % 2 == 0)},0,", f"t,Y0,Y,0,L{layout},{int(layout % 2 == 1)},0,"]
    comparison = build_comparison(read_inputs([], [_csv(tmp_path / "y0.csv", rows)]), reps=500)
    (p,) = comparison.main.paired
    means = {m.method: m.tasks[0].mean_over_seeds for m in comparison.main.methods}
    assert means["X"] == pytest.approx(0.5) and means["Y"] == pytest.approx(0.5)
    assert not p.significant and p.verdict.startswith("X vs Y: not established across 1 task")
    # every X checkpoint meets Y's on each layout run: 3 x 24 pairs, X only 3 + 9 + 12, Y only 12 + 0 + 12
    pairs = p.checkpoints
    assert pairs.table.n == 3 * 24
    assert (pairs.table.a_only, pairs.table.b_only) == (24, 24) and not pairs.differ
    assert pairs.statement.startswith("X's seeds 0-2 vs Y's seed 0 on these layouts: no difference established")
    # one task, 3 seeds against 1: 4 label arrangements, nothing can reach 0.05, and a note says so
    assert p.seeds.arrangements == 4 and any("no arrangement of the method labels" in n for n in p.notes)


def test_a_near_unbeaten_leader_is_separated_by_its_own_layouts(tmp_path):
    """A succeeds on layouts 0-34 of 40, B on 0 and 35, C on none: A won 34 of its 35 discordant
    layouts against B. The bootstrap interval of the rating difference reached below 0, so the
    board called them "not separated"."""
    rows = []
    for layout in range(40):
        rows += [f"t,A,A,,L{layout},{int(layout < 35)},0,", f"t,B,B,,L{layout},{int(layout in (0, 35))},0,",
                 f"t,C,C,,L{layout},0,0,"]
    comparison = build_comparison(read_inputs([], [_csv(tmp_path / "lead.csv", rows)]), reps=500)
    board = comparison.main.leaderboard
    top = board.neighbours[0]
    assert (top.a, top.b, top.wins, top.losses, top.units) == ("A", "B", 34, 1, 35)
    # one layout run a mark: the sign test; its mid-p by scipy's binomial law, Holm over 2 neighbours
    mid = sps.binomtest(1, 35).pvalue - sps.binom.pmf(1, 35, 0.5)
    assert top.mid_p == pytest.approx(mid) and top.holm_p <= 2 * mid
    assert top.separated and top.lo > 0
    assert any(n.startswith("A and B are separated: A won 34 of their 35 discordant layouts") for n in board.notes)
    flagged = {r.name: (r.wins, r.losses) for r in board.rows if r.near_separation}
    assert flagged == {"A": (34 + 35, 1), "C": (0, 35 + 2)}
    assert any(n.startswith("C has 0 wins and 37 losses: its rating rests on the penalty") for n in board.notes)


def test_t_intervals_over_seeds_stay_in_0_1_and_no_spread_is_said_in_words(tmp_path):
    """Seeds scoring 0.75, 0.75, 0.75 printed "0.750 [0.750, 0.750]"; 0.95, 1, 0.85 ran past 1."""
    rows = []
    for layout in range(20):
        for seed, cut in ((0, 15), (1, 15), (2, 15)):
            rows.append(f"t1,X{seed},X,{seed},L{layout},{int(layout < cut)},0,")
        for seed, cut in ((0, 19), (1, 20), (2, 17)):
            rows.append(f"t2,X{seed},X,{seed},L{layout},{int(layout < cut)},0,")
        rows += [f"t1,Y{s},Y,{s},L{layout},{int(layout < 5 + s)},0," for s in range(3)]
        rows += [f"t2,Y{s},Y,{s},L{layout},{int(layout < 5 + s)},0," for s in range(3)]
    comparison = build_comparison(read_inputs([], [_csv(tmp_path / "t.csv", rows)]), reps=500)
    x = next(m for m in comparison.main.methods if m.method == "X")
    flat, high = (next(t for t in x.tasks if t.task == name) for name in ("t1", "t2"))
    assert flat.t95.sd == 0 and flat.t95.lo == flat.t95.hi == 0.75
    scores = [0.95, 1.0, 0.85]
    ci = sps.t.interval(0.95, 2, loc=np.mean(scores), scale=sps.sem(scores))
    assert ci[1] > 1 and (high.t95.lo, high.t95.hi) == pytest.approx((ci[0], 1.0))
    text = render(comparison, "text")
    assert "none: every seed scored 0.750, no spread to estimate" in text and "[0.750, 0.750]" not in text
    assert "Student t 95%, clipped to [0, 1]; it covered 0.93-0.94 (0.926 at 3 seeds" in text   # measured
    assert "the IQM's stratified bootstrap interval is narrower than 95%: it covered 0.75-0.83 with 3 seeds a task" in text
    assert x.mean.method == "t-satterthwaite" and 0 <= x.mean.lo <= x.mean.hi <= 1
