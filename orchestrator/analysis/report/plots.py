"""The report's plots, as base64 PNGs for the self-contained HTML. matplotlib (Agg) is imported
only here, and only when HTML is rendered: the text, Markdown and JSON paths never load it."""

from __future__ import annotations

import math
from itertools import accumulate
from typing import Any

from orchestrator.analysis.report.model import Comparison, Report


def png(fig: Any) -> str:
    """A matplotlib figure as a base64 PNG (the figure is closed)."""
    import base64
    import io

    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _intervals(plt: Any, r: Report) -> tuple[str, str]:
    fig, ax = plt.subplots(figsize=(6, 0.6 + 0.5 * len(r.policies)))
    for i, p in enumerate(r.policies):
        if (rate := p.rate) is not None:   # None: no trial
            ax.errorbar([rate], [i], xerr=[[rate - p.interval.lo], [p.interval.hi - rate]], fmt="o",
                        capsize=4, color="C0")
            ax.text(p.interval.hi + 0.01, i, f"{p.successes}/{p.trials}", va="center", fontsize=8)
    ax.set_yticks(range(len(r.policies)), [p.label for p in r.policies])
    ax.set_xlim(0, 1.12)
    ax.set_xlabel("success rate (Wilson 95%)")
    ax.invert_yaxis()
    return "Success rate per policy", png(fig)


def _paired_table(plt: Any, c: Comparison) -> tuple[str, str]:
    t = c.table
    fig, ax = plt.subplots(figsize=(3.6, 3.0))
    m = [[t.both, t.a_only], [t.b_only, t.neither]]
    # each cell coloured by its count (darker: more pairs); the cells' names say which
    # are the discordant ones
    ax.imshow(m, cmap="Oranges", vmin=0, vmax=max(1, t.both, t.a_only, t.b_only, t.neither) * 1.4)
    names = [["both", f"{c.a} only"], [f"{c.b} only", "neither"]]
    for i in range(2):
        for j in range(2):
            ax.text(j, i, f"{names[i][j]}\n{m[i][j]}", ha="center", va="center", fontsize=10)
    ax.set_xticks([0, 1], [f"{c.b} succeeds", f"{c.b} fails"])
    ax.set_yticks([0, 1], [f"{c.a} succeeds", f"{c.a} fails"])
    ax.set_title(f"{c.a} vs {c.b}: {t.n} pairs", fontsize=10)
    return f"Paired table {c.a} vs {c.b}", png(fig)


def _grid_at_positions(ax: Any, r: Report, colours: dict[str, str]) -> None:
    """One circle per layout run at its mark; repeats of a mark are stacked just above it."""
    placed: dict[tuple, int] = {}
    xs, ys, cs = [], [], []
    labels: dict[tuple[float, float], tuple[float, float, str]] = {}
    for lab, x, y, _s, cat in r.grid:
        if x is None or y is None:   # the caller draws this only when every run has its position
            continue
        base = (round(x, 4), round(y, 4))
        shift = placed.get(base, 0)
        placed[base] = shift + 1
        if shift >= 12:
            continue
        xs.append(y)
        ys.append(x + 0.006 * shift)   # robot view: y across, x away from the base
        cs.append(colours.get(cat, "#999999"))
        labels.setdefault(base, (y, x, lab.split("#")[0]))
    ax.scatter(xs, ys, s=260 if len(placed) <= 60 else 60, c=cs, edgecolors="black", linewidths=0.5)
    if len(placed) <= 60:
        for px, py, text in labels.values():
            ax.text(px, py, text, ha="center", va="center", fontsize=6)
    ax.set_xlabel("y (m, robot's left is +)")
    ax.set_ylabel("x (m, away from the base)")
    ax.invert_xaxis()


def _grid_in_order(ax: Any, r: Report, colours: dict[str, str]) -> None:
    """Positions unknown (CSV input): the layouts in order, in a square-ish grid."""
    cats = list(colours)
    count = len(r.grid)
    cols = max(1, math.ceil(math.sqrt(count)))
    if count <= 400:
        px = [i % cols for i in range(count)]
        py = [-(i // cols) for i in range(count)]
        ax.scatter(px, py, s=260 if count <= 100 else 40, c=[colours.get(g[4], "#999999") for g in r.grid],
                   edgecolors="black", linewidths=0.5)
        if count <= 100:
            for i, g in enumerate(r.grid):
                ax.text(px[i], py[i], g[0].split("#")[0], ha="center", va="center", fontsize=6)
    else:
        from matplotlib.colors import ListedColormap

        rows = math.ceil(count / cols)
        codes = [[len(cats)] * cols for _ in range(rows)]
        for i, g in enumerate(r.grid):
            codes[i // cols][i % cols] = cats.index(g[4]) if g[4] in cats else len(cats)
        ax.imshow(codes, cmap=ListedColormap(list(colours.values()) + ["#ffffff"]),
                  vmin=-0.5, vmax=len(cats) + 0.5, interpolation="nearest")
    ax.set_axis_off()
    ax.set_title("positions unknown (CSV input): layouts in order", fontsize=9)


def _grid(plt: Any, r: Report) -> tuple[str, str]:
    c0 = r.comparisons[0]
    colours = {"both": "#2ca02c", f"{c0.a} only": "#1f77b4", f"{c0.b} only": "#ff7f0e",
               "neither": "#d62728", "incomplete": "#bbbbbb"}
    fig, ax = plt.subplots(figsize=(6, 4.5))
    if all(g[1] is not None for g in r.grid):
        _grid_at_positions(ax, r, colours)
    else:
        _grid_in_order(ax, r, colours)
    for cat, col in colours.items():
        ax.scatter([], [], color=col, label=cat, s=60)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    return f"Per layout: which policy succeeded ({c0.a} vs {c0.b})", png(fig)


def _over_time(plt: Any, r: Report) -> tuple[str, str]:
    fig, ax = plt.subplots(figsize=(6, 3))
    for i, (p, seq) in enumerate(r.timeline):
        if not seq:
            continue
        cum = [v / (k + 1) for k, v in enumerate(accumulate(int(x) for x in seq))]
        ax.plot(range(1, len(seq) + 1), cum, label=p, color=f"C{i}")
        ax.scatter(range(1, len(seq) + 1), [1.03 + 0.03 * i if s else -0.03 - 0.03 * i for s in seq],
                   s=8, color=f"C{i}")
    ax.set_ylim(-0.15, 1.15)
    ax.set_xlabel("trial of this policy, in run order")
    ax.set_ylabel("cumulative success rate")
    ax.legend(fontsize=8)
    return "Success over time", png(fig)


def plots(r: Report) -> list[tuple[str, str]]:
    """(title, base64 PNG) for each plot: intervals, each paired table, the per-layout grid, and
    success over time."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    out = [_intervals(plt, r)]
    out += [_paired_table(plt, c) for c in r.comparisons]
    if r.grid and r.comparisons:
        out.append(_grid(plt, r))
    if any(seq for _, seq in r.timeline):
        out.append(_over_time(plt, r))
    return out
