"""The comparison as a format-neutral document: the single-campaign report's blocks
(`report.document`: headings, lines, items, tables), one function per section, so text,
Markdown and HTML say the same thing."""

from __future__ import annotations

from collections.abc import Callable

from orchestrator.analysis import stats
from orchestrator.analysis.compare.model import Comparison, Ladder, Leaderboard, PairedAcross, Section, TaskScore
from orchestrator.analysis.report.document import Block, Gap, Heading, Item, Line, Title, table
from orchestrator.analysis.report.format import fmt_p, interval, k_of_n

# the per-task t interval's coverage, measured by compare_sim.aggregate_coverage (3 tasks, 3-10 seeds, seed
# log-odds sd 0.6 and 1.0, 1200 intervals each; bench/compare_sims.py --section intervals)
TASK_T_COVERAGE = "0.93-0.94 (0.926 at 3 seeds, seed log-odds sd 1)"
PROFILE_TAUS = (0.25, 0.5, 0.75, 0.9)       # the profile's points shown in text (the HTML plots all)


def _iv(iv: stats.Interval) -> str:
    return f"{iv.estimate:.3f} {interval(iv)}"


def header(c: Comparison) -> list[Block]:
    tasks = list(dict.fromkeys(x.task for x in c.campaigns))
    methods = sorted({i.method for x in c.campaigns for _, i in x.policies})
    out: list[Block] = [
        Title("Comparison across campaigns"),
        Line(f"{len(c.campaigns)} campaign{'s' if len(c.campaigns) != 1 else ''}, {len(tasks)} task"
             f"{'s' if len(tasks) != 1 else ''} ({', '.join(tasks)}), {len(methods)} methods ({', '.join(methods)})"),
        Line(f"Stratified bootstrap: {c.reps} resamples ({c.board_reps} for the leaderboard; the profiles' bands "
             f"are Clopper-Pearson), seed {c.seed}; alpha {c.alpha:g}"),
        Gap(),
        table(["campaign", "task", "source", "protocol sha256", "labels", "trials known", "held out"],
              [[x.key, x.task, x.source, x.protocol_sha256[:12] or "-", x.label_source, f"{x.known} of {x.scheduled}",
                ", ".join(x.held_out_strata) or "-"] for x in c.campaigns])]
    if c.notes:
        out += [Heading("Warnings"), *(Item(n) for n in c.notes)]
    return out


def per_seed(s: Section) -> list[Block]:
    rows = []
    for m in s.methods:
        for t in m.tasks:
            for seed in t.seeds:
                rows.append([m.method, t.task, "-" if seed.seed is None else str(seed.seed),
                             "-" if seed.step is None else str(seed.step), k_of_n(seed.successes, seed.trials),
                             interval(seed.wilson), ", ".join(seed.policies)])
    return [Heading(f"Per method, task and training seed ({s.label}; Wilson 95% clustered over (campaign, mark) units)"),
            table(["method", "task", "seed", "step", "successes", "95% CI", "policies (campaign:label)"], rows)]


def _t95(t: TaskScore) -> tuple[str, str]:
    if t.t95 is None:
        return "-", "-"
    if t.t95.sd == 0:
        return f"none: every seed scored {t.mean_over_seeds:.3f}, no spread to estimate", "0"
    return f"[{t.t95.lo:.3f}, {t.t95.hi:.3f}]", f"{t.t95.sd:.3f}"


def per_task(s: Section) -> list[Block]:
    rows = [[m.method, t.task, str(len(t.seeds)), f"{t.mean_over_seeds:.3f}", *_t95(t)] for m in s.methods
            for t in m.tasks]
    return [Heading(f"Per method and task: mean over training seeds ({s.label}; Student t 95%, clipped to [0, 1]; "
                    f"it covered {TASK_T_COVERAGE} in simulation, docs/statistics.md)"),
            table(["method", "task", "seeds", "mean", "t 95% CI", "sd over seeds"], rows)]


def across_tasks(s: Section) -> list[Block]:
    return [Heading(f"Across tasks ({s.label}; mean: Student t over seeds, Welch-Satterthwaite; IQM: stratified "
                    "bootstrap 95%, runs redrawn within each task)"),
            table(["method", "tasks", "runs", "mean", "IQM"],
                  [[m.method, str(len(m.tasks)), str(m.runs), _iv(m.mean), _iv(m.iqm)] for m in s.methods]),
            Gap(),
            Line("mean: over tasks of the mean over seeds; IQM: 25% trimmed mean of every run of every task "
                 "(Agarwal et al. 2021)")]


def improvement(s: Section) -> list[Block]:
    if not s.improvements:
        return []
    return [Heading(f"Probability of improvement ({s.label}; stratified bootstrap over seeds, widened by "
                    "sqrt(n/(n-1)) for n seeds)"),
            table(["X", "Y", "tasks", "P(X > Y)", "95% CI"],
                  [[p.x, p.y, str(len(p.tasks)), f"{p.interval.estimate:.3f}", interval(p.interval)]
                   for p in s.improvements])]


def profiles(s: Section) -> list[Block]:
    if not s.profiles:
        return []
    rows = []
    for p in s.profiles:
        cells = [p.method]
        for tau in PROFILE_TAUS:
            i = p.taus.index(tau)
            cells.append(f"{p.values[i]:.2f} [{p.lo[i]:.2f}, {p.hi[i]:.2f}]")
        rows.append(cells)
    return [Heading(f"Performance profiles ({s.label}): fraction of runs with success above tau "
                    "[Clopper-Pearson 95% over the runs]"),
            table(["method"] + [f"tau {t:g}" for t in PROFILE_TAUS], rows)]


def _checkpoint_lines(p: PairedAcross) -> list[Block]:
    c = p.checkpoints
    if c is None:
        return [Line(f"These checkpoints: no campaign ran {p.x} and {p.y} on one layout run")]
    t = c.table
    return [Line(f"These checkpoints: {t.n} pairs (every {p.x} checkpoint with every {p.y} checkpoint on a layout "
                 f"run) on {c.units} (campaign, mark) units in {c.campaigns} campaign{'s' if c.campaigns != 1 else ''}; "
                 f"both {t.both}, {p.x} only {t.a_only}, {p.y} only {t.b_only}, neither {t.neither}; "
                 f"{c.discordant_units} discordant units; sign-flip mid-p {fmt_p(c.mid_p)}, exact {fmt_p(c.exact_p)}"
                 + (f", Holm-adjusted {fmt_p(c.holm_mid_p)}" if c.holm_mid_p != c.mid_p else "")
                 + f"; Cochran-Mantel-Haenszel (reference) chi2 {c.cmh_chi2:.2f}, p {fmt_p(c.cmh_p)}"),
            Line(c.statement + "."), *(Line(f"Note: {n}") for n in c.notes)]


def _paired(p: PairedAcross) -> list[Block]:
    s = p.seeds
    what = "sign patterns" if s.paired else "label arrangements"
    rows = f"exact over {s.arrangements:,} {what}" if s.exact else f"{s.arrangements:,} random {what}"
    scores = (f"{s.seeds_x} (task, seed number) pairs, seeds paired by number (pre-registered)" if s.paired else
              f"{s.seeds_x} and {s.seeds_y} (task, seed) scores, seeds unpaired")
    return [Line(f"{p.x} vs {p.y}, methods (the training seed the unit): {scores} "
                 f"in {s.tasks} task{'s' if s.tasks != 1 else ''} ({', '.join(p.tasks)}); "
                 f"{'sign-flip' if s.paired else 'permutation'} p {fmt_p(s.p)} ({rows}, stratified by task)"
                 + (f"; Holm-adjusted {fmt_p(p.p)}" if p.p != s.p else "")),
            Line(f"Verdict: {p.verdict}"), *(Line(f"Note: {n}") for n in p.notes),
            *_checkpoint_lines(p), Gap()]


def paired(s: Section) -> list[Block]:
    if not s.paired:
        return []
    return [Heading(f"Methods across tasks ({s.label}; the verdict: permutation over training seeds; these "
                    "checkpoints: pairs on layout runs)"),
            *(b for p in s.paired for b in _paired(p))]


def _ladder(lad: Ladder) -> list[Block]:
    name = lad.method + (f" seed {lad.seed}" if lad.seed is not None else "")
    return [Line(f"{name}:"),
            table(["step", "successes", "95% CI"],
                  [[str(x.step), k_of_n(x.successes, x.trials), interval(x.wilson)] for x in lad.steps]),
            Gap(), Line(lad.trend_statement), Line(lad.statement), Gap()]


def ladders(s: Section) -> list[Block]:
    if not s.ladders:
        return []
    return [Heading(f"Checkpoint ladders ({s.label}; trend test over (campaign, mark) units, last step paired with the one before)"),
            *(b for lad in s.ladders for b in _ladder(lad))]


def board(s: Section) -> list[Block]:
    b: Leaderboard | None = s.leaderboard
    if b is None:
        return []
    return [Heading(f"Leaderboard ({s.label}; Bradley-Terry from paired comparisons, a discordant layout a win)"),
            table(["rank", "checkpoint", "rating", "95% CI", "won-lost"],
                  [[str(i + 1), r.name, f"{r.rating:+.2f}",
                    f"[{r.lo:+.2f}, {r.hi:+.2f}]" + (" (near separation)" if r.near_separation else ""),
                    f"{r.wins}-{r.losses}"] for i, r in enumerate(b.rows)]),
            Gap(), Line("rating: log-odds of winning a discordant layout, mean 0; interval: basic bootstrap over marks "
                        "within campaigns (not a 95% interval near separation: 2 or fewer wins or losses); won-lost: "
                        "discordant layouts; neighbours are separated by a sign-flip test on their own discordant "
                        "layouts over (campaign, mark) units, Holm-adjusted over the neighbours"),
            *(Item(n) for n in b.notes)]


def notes(s: Section) -> list[Block]:
    return [Heading(f"Notes ({s.label})"), *(Item(n) for n in s.notes)] if s.notes else []


SECTION_PARTS: tuple[Callable[[Section], list[Block]], ...] = (
    per_seed, per_task, across_tasks, improvement, profiles, paired, ladders, board, notes)


def section(s: Section) -> list[Block]:
    return [b for part in SECTION_PARTS for b in part(s)]


def document(c: Comparison) -> list[Block]:
    """Every block in reading order: the header, the main section, the held-out section."""
    out = header(c) + section(c.main)
    if c.held_out is not None:
        out += [Heading("Held-out strata (reported apart: not in the training data)")] + section(c.held_out)
    return out

