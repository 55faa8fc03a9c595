"""The comparison's plots, as base64 PNGs for the self-contained HTML: per section, the
performance profiles with their bootstrap bands, the mean and IQM intervals, the probability of
improvement, the leaderboard and each checkpoint ladder. matplotlib is imported only here."""

from __future__ import annotations

from typing import Any

from orchestrator.analysis.compare.model import Comparison, Ladder, Section
from orchestrator.analysis.report.plots import png


def _profiles(plt: Any, s: Section) -> tuple[str, str]:
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for i, p in enumerate(s.profiles):
        ax.step(p.taus, p.values, where="post", color=f"C{i}", label=p.method)
        ax.fill_between(p.taus, p.lo, p.hi, step="post", color=f"C{i}", alpha=0.2)
    ax.set_xlabel("success rate tau")
    ax.set_ylabel("fraction of runs with success > tau")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize=8)
    return f"Performance profiles ({s.label}, Clopper-Pearson 95% bands over the runs)", png(fig)


def _aggregates(plt: Any, s: Section) -> tuple[str, str]:
    fig, axes = plt.subplots(1, 2, figsize=(7, 0.8 + 0.45 * len(s.methods)), sharey=True)
    for ax, what in zip(axes, ("mean", "iqm"), strict=True):
        for i, m in enumerate(s.methods):
            iv = getattr(m, what)
            ax.errorbar([iv.estimate], [i], xerr=[[iv.estimate - iv.lo], [iv.hi - iv.estimate]], fmt="o",
                        capsize=4, color=f"C{i}")
        ax.set_xlim(-0.02, 1.02)
        ax.set_title("mean" if what == "mean" else "IQM", fontsize=10)
        ax.set_yticks(range(len(s.methods)), [m.method for m in s.methods])
    axes[0].invert_yaxis()
    return f"Mean and IQM across tasks ({s.label}, stratified bootstrap 95%)", png(fig)


def _improvement(plt: Any, s: Section) -> tuple[str, str]:
    fig, ax = plt.subplots(figsize=(6, 0.8 + 0.45 * len(s.improvements)))
    for i, p in enumerate(s.improvements):
        iv = p.interval
        ax.errorbar([iv.estimate], [i], xerr=[[iv.estimate - iv.lo], [iv.hi - iv.estimate]], fmt="o", capsize=4,
                    color="C0")
    ax.axvline(0.5, color="grey", linestyle=":")
    ax.set_yticks(range(len(s.improvements)), [f"P({p.x} > {p.y})" for p in s.improvements])
    ax.set_xlim(-0.02, 1.02)
    ax.invert_yaxis()
    return f"Probability of improvement ({s.label}, 95%)", png(fig)


def _board(plt: Any, s: Section) -> tuple[str, str]:
    rows = s.leaderboard.rows if s.leaderboard else ()
    fig, ax = plt.subplots(figsize=(6, 0.8 + 0.4 * len(rows)))
    for i, r in enumerate(rows):
        ax.errorbar([r.rating], [i], xerr=[[r.rating - r.lo], [r.hi - r.rating]], fmt="o", capsize=4, color="C2")
    ax.axvline(0, color="grey", linestyle=":")
    ax.set_yticks(range(len(rows)), [r.name for r in rows])
    ax.set_xlabel("Bradley-Terry rating (log-odds)")
    ax.invert_yaxis()
    return f"Leaderboard ({s.label}, 95% bootstrap over marks)", png(fig)


def _ladder(plt: Any, s: Section, lad: Ladder) -> tuple[str, str]:
    fig, ax = plt.subplots(figsize=(5, 3))
    xs = [x.step for x in lad.steps]
    ys = [x.successes / x.trials if x.trials else 0.0 for x in lad.steps]
    ax.errorbar(xs, ys, yerr=[[y - x.wilson.lo for y, x in zip(ys, lad.steps, strict=True)],
                              [x.wilson.hi - y for y, x in zip(ys, lad.steps, strict=True)]], fmt="o-", capsize=4)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("training step")
    ax.set_ylabel("success rate (Wilson 95%)")
    name = lad.method + (f" seed {lad.seed}" if lad.seed is not None else "")
    return f"Checkpoint ladder {name} ({s.label})", png(fig)


def plots(c: Comparison) -> list[tuple[str, str]]:
    """(caption, base64 PNG) for every plot of every section."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    out = []
    for s in [c.main] + ([c.held_out] if c.held_out else []):
        if s.profiles:
            out.append(_profiles(plt, s))
        if s.methods:
            out.append(_aggregates(plt, s))
        if s.improvements:
            out.append(_improvement(plt, s))
        if s.leaderboard:
            out.append(_board(plt, s))
        out += [_ladder(plt, s, lad) for lad in s.ladders]
    return out
