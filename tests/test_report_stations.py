"""The station stratum of the report: per-station paired tables, the exact discordance test,
per-station block times and the warning for an arm that behaves differently."""

from __future__ import annotations

from scipy.stats import fisher_exact

from orchestrator.analysis.outcomes import OutcomeSet, TrialOutcome
from orchestrator.analysis.report import build_report, render
from orchestrator.analysis.stats.homogeneity import discordance_homogeneity


def _campaign(per_station: dict[str, list[tuple[bool, bool]]]) -> OutcomeSet:
    outcomes, blocks, unit = [], [], 0
    for station, pairs in per_station.items():
        for sa, sb in pairs:
            for position, (policy, ok) in enumerate((("A", sa), ("B", sb))):
                outcomes.append(TrialOutcome(layout=f"M{unit:02d}", repeat=0, policy=policy, success=ok,
                                             slot=2 * unit + position, unit=unit, position=position))
            blocks.append({"unit": unit, "station": station, "state": "done",
                           "claimed_at": 100.0 * unit, "finished_at": 100.0 * unit + 10 + len(station)})
            unit += 1
    return OutcomeSet(outcomes=tuple(outcomes), policies=("A", "B"), source="test", label_source="physics",
                      station_blocks=tuple(blocks), scheduled_trials=len(outcomes))


def test_per_station_tables_and_exact_discordance_test():
    data = _campaign({"s1": [(True, False)] * 5 + [(True, True)] * 2,
                      "s2": [(False, True)] * 4 + [(True, False)],
                      "s3": [(True, False)] * 2 + [(False, False)]})
    report = build_report(data)
    rows = {r.station: r for r in report.stations.rows}
    assert (rows["s1"].both, rows["s1"].a_only, rows["s1"].b_only, rows["s1"].neither) == (2, 5, 0, 0)
    assert (rows["s2"].a_only, rows["s2"].b_only, rows["s3"].neither, rows["s3"].blocks) == (1, 4, 1, 3)
    assert rows["s1"].median_block_s == 12.0 and rows["s3"].successes == (("A", 2, 3), ("B", 0, 3))
    expected = discordance_homogeneity({"s1": (5, 0), "s2": (1, 4), "s3": (2, 0)})
    assert report.stations.homogeneity.p_value == expected.p_value
    text = render(report, "text")
    assert "Stations (A vs B, paired per station)" in text and "Freeman-Halton" in text
    assert render(report, "json").count('"per_station"') == 1


def test_two_stations_discordance_is_fisher_and_a_far_arm_is_flagged():
    data = _campaign({"good1": [(True, True)] * 6 + [(True, False)] * 2,
                      "good2": [(True, True)] * 6 + [(True, False)] * 2,
                      "bad": [(False, False)] * 7 + [(True, False)]})
    report = build_report(data)
    flagged = [w for w in report.warnings if w.startswith("station ")]
    assert len(flagged) == 1 and flagged[0].startswith("station bad:")
    k, n, k_o, n_o = 1, 16, 28, 32   # bad: 1 of 16; the others: 14 of 16 each
    assert f"{fisher_exact([[k, n - k], [k_o, n_o - k_o]])[1]:.3g}" in flagged[0]
    two = build_report(_campaign({"x": [(True, False)] * 3 + [(False, True)], "y": [(False, True)] * 3}))
    assert abs(two.stations.homogeneity.p_value - fisher_exact([[3, 1], [0, 3]])[1]) < 1e-12
    assert not [w for w in two.warnings if w.startswith("station ")]


def test_a_single_arm_has_no_station_section():
    data = _campaign({"only": [(True, False)] * 3})
    assert build_report(data).stations is not None  # one station: table, no test
    plain = OutcomeSet(outcomes=data.outcomes, policies=("A", "B"), source="t", label_source="physics")
    report = build_report(plain)
    assert report.stations is None and "Stations" not in render(report, "text")
