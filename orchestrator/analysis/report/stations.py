"""The station stratum of a campaign run by several arms (`run --station`, stations.py).

Per station: its paired table of the first two policies (both, A only, B only, neither), each
policy's successes, how many layout blocks it ran and its median block time (claim to last
commit). Across stations: the exact conditional test of whether the A-vs-B discordance
differs between them (`stats.homogeneity`, Freeman and Halton 1951), and a warning when one
station's arm behaves differently: its success rate over both policies differs from the other
stations' pooled rate (two-sided Fisher exact p < 0.05, `scipy.stats.fisher_exact`), both
policies' rates on it lie on the same side of the others' rates, and it is the most extreme
station (smallest p; one odd arm also pulls the others' comparison, so only it is named).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass

from orchestrator.analysis.outcomes import OutcomeSet
from orchestrator.analysis.stats.homogeneity import Homogeneity, discordance_homogeneity

FAR_P = 0.05


@dataclass(frozen=True)
class StationRow:
    station: str
    blocks: int
    pairs: int
    both: int
    a_only: int
    b_only: int
    neither: int
    successes: tuple[tuple[str, int, int], ...]   # policy, successes, judged trials
    median_block_s: float | None


@dataclass(frozen=True)
class StationSection:
    a: str
    b: str
    rows: tuple[StationRow, ...]
    homogeneity: Homogeneity
    warnings: tuple[str, ...]


def build_stations(data: OutcomeSet) -> StationSection | None:
    """The station section, or None for a single arm (no station blocks recorded)."""
    station_of = {int(b["unit"]): b["station"] for b in data.station_blocks if b.get("station")}
    if not station_of or len(data.policies) < 2:
        return None
    a, b = data.policies[0], data.policies[1]
    unit_of = {o.key: o.unit for o in data.outcomes if o.unit is not None}
    cells: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for key, sa, sb in data.pairs(a, b):
        station = station_of.get(unit_of.get(key, -1))
        if station is not None:
            cells[station][(0 if sa else 2) + (0 if sb else 1)] += 1
    judged: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for o in data.outcomes:
        station = station_of.get(o.unit if o.unit is not None else -1)
        if station is not None and o.success is not None:
            judged[station][o.policy][0] += int(o.success)
            judged[station][o.policy][1] += 1
    times: dict[str, list[float]] = defaultdict(list)
    blocks: dict[str, int] = defaultdict(int)
    for block in data.station_blocks:
        if block.get("station"):
            blocks[block["station"]] += 1
            if block.get("finished_at") and block.get("claimed_at"):
                times[block["station"]].append(float(block["finished_at"]) - float(block["claimed_at"]))
    rows = tuple(
        StationRow(station=s, blocks=blocks[s], pairs=sum(cells[s]), both=cells[s][0], a_only=cells[s][1],
                   b_only=cells[s][2], neither=cells[s][3],
                   successes=tuple((p, judged[s][p][0], judged[s][p][1]) for p in data.policies),
                   median_block_s=statistics.median(times[s]) if times[s] else None)
        for s in sorted(set(station_of.values())))
    homogeneity = discordance_homogeneity({r.station: (r.a_only, r.b_only) for r in rows})
    return StationSection(a, b, rows, homogeneity, tuple(_far_stations(rows, data.policies)))


def _far_stations(rows: tuple[StationRow, ...], policies: tuple[str, ...]) -> list[str]:
    from scipy.stats import fisher_exact

    found: list[tuple[float, str]] = []
    for row in rows:
        others = [r for r in rows if r is not row]
        if not others:
            continue
        k = sum(s[1] for s in row.successes)
        n = sum(s[2] for s in row.successes)
        k_o = sum(s[1] for r in others for s in r.successes)
        n_o = sum(s[2] for r in others for s in r.successes)
        if not n or not n_o:
            continue
        p = float(fisher_exact([[k, n - k], [k_o, n_o - k_o]])[1])
        sides = set()
        for policy in policies:
            mine = next(s for s in row.successes if s[0] == policy)
            theirs_k = sum(s[1] for r in others for s in r.successes if s[0] == policy)
            theirs_n = sum(s[2] for r in others for s in r.successes if s[0] == policy)
            if mine[2] and theirs_n:
                sides.add((mine[1] / mine[2] > theirs_k / theirs_n) - (mine[1] / mine[2] < theirs_k / theirs_n))
        if p < FAR_P and len(sides) == 1 and 0 not in sides:
            found.append((p, f"station {row.station}: success rate {100 * k / n:.0f}% over both policies against "
                       f"{100 * k_o / n_o:.0f}% on the other stations (Fisher exact p {p:.3g}), lower or higher "
                       "for every policy: check that arm (calibration, cameras, cube, lighting)"))
    return [min(found)[1]] if found else []
