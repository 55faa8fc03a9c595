"""`orchestrator plan --p-a P --p-b P [--agreement R | --discordant Q] [--power 0.8] [--alpha 0.05]
[--stopping evalue]`."""

from __future__ import annotations

import argparse

from orchestrator.core.errors import BadInput

HELP = "how many layouts a paired A/B campaign needs (exact McNemar power), and what unpaired would cost"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--p-a", type=float, required=True, metavar="P", help="expected success rate of A")
    parser.add_argument("--p-b", type=float, required=True, metavar="P", help="expected success rate of B")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--agreement", type=float, metavar="R",
                       help="expected share of layouts where A and B have the same outcome")
    group.add_argument("--discordant", type=float, metavar="Q",
                       help="expected share of layouts where exactly one policy succeeds (1 - agreement)")
    parser.add_argument("--power", type=float, default=0.8, help="target power (default 0.8)")
    parser.add_argument("--alpha", type=float, default=0.05, help="two-sided level (default 0.05)")
    parser.add_argument("--test", choices=("mcnemar_midp", "mcnemar_exact"), default="mcnemar_midp",
                        help="the paired test the protocol pre-registers (default mcnemar_midp)")
    parser.add_argument("--max-layouts", type=int, default=2000, help="search limit (default 2000)")
    parser.add_argument("--stopping", choices=("none", "evalue"), default="none",
                        help="the protocol's analysis.stopping: evalue also gives the layouts the "
                             "pre-registered e-value rule needs (exact power of the rule)")


def _probability(name: str, value: float, open_interval: bool = False) -> None:
    if value != value or not (0 < value < 1 if open_interval else 0 <= value <= 1):
        rng = "(0, 1)" if open_interval else "[0, 1]"
        raise BadInput(f"plan: {name} must be in {rng}, not {value:g}")


def run(args: argparse.Namespace) -> int:
    from orchestrator.analysis import stats

    _probability("--p-a", args.p_a)
    _probability("--p-b", args.p_b)
    if args.agreement is not None:
        _probability("--agreement", args.agreement)
    if args.discordant is not None:
        _probability("--discordant", args.discordant)
    _probability("--power", args.power, open_interval=True)
    _probability("--alpha", args.alpha, open_interval=True)
    if not 1 <= args.max_layouts <= 100_000:
        raise BadInput(f"plan: --max-layouts must be between 1 and 100000, not {args.max_layouts}")
    if args.p_a == args.p_b:
        raise BadInput(f"plan: --p-a and --p-b are equal ({args.p_a:g}); no number of layouts detects a zero difference")
    try:
        result = stats.plan(args.p_a, args.p_b, args.agreement, args.discordant, args.power, args.alpha,
                            args.test, args.max_layouts, args.stopping)
    except ValueError as exc:
        raise BadInput(f"plan: {exc}") from None
    print(format_plan(result, assumed_independent=args.agreement is None and args.discordant is None))
    return 0


def format_plan(r, assumed_independent: bool = False) -> str:
    from orchestrator.analysis import stats

    test = "mid-p" if r.test == "mcnemar_midp" else "exact p"
    lines = [
        f"Plan: p_A = {r.p_a:g}, p_B = {r.p_b:g}, difference {100 * (r.p_a - r.p_b):+.1f} points, "
        f"two-sided alpha {r.alpha:g}, paired McNemar {test.removesuffix(' p')} test",
        f"Expected layouts where only A succeeds: {r.p10:.3f}; only B: {r.p01:.3f}; "
        f"discordant {r.discordance:.3f} (agreement {r.agreement:.3f})"
        + (" - assumed independent outcomes; give --agreement if the policies share hard layouts" if assumed_independent else ""),
        "",
        "power   paired layouts   discordant expected   unpaired trials per policy",
    ]
    unpaired = dict(r.unpaired_per_policy)
    for target, n in r.targets:
        un = unpaired.get(target)
        paired = f"{n}" if n is not None else f"> {r.max_layouts}"
        disc = f"{n * r.discordance:.1f}" if n is not None else "-"
        unpaired_n = f"{un}" if un is not None else f"> {r.max_layouts}"
        lines.append(f"{100 * target:4.0f}%   {paired:>14}   {disc:>19}   {unpaired_n:>26}")
    if r.evalue_targets:
        lines.append("")
        lines.append("With the pre-registered e-value rule (analysis.stopping: {kind: evalue}; it may stop after any "
                     "layout, as soon as e >= 1/alpha):")
        fixed = dict(r.targets)
        for target, n in r.evalue_targets:
            shown = f"{n}" if n is not None else f"> {r.max_layouts}"
            extra = f" (fixed-n test: {fixed[target]})" if fixed.get(target) is not None else ""
            lines.append(f"{100 * target:4.0f}%   {shown:>14} layouts{extra}")
        lines.append("These are exact: the probability that the rule has stopped, rejecting, by that layout. Set "
                     "max_layouts to at least the figure for your power; the rule often stops well before it.")
    lines.append("")
    lines.append("Each paired layout runs both policies, so the paired design needs 2 x layouts trials in all; "
                 "the unpaired column is per policy (exact power of Fisher's test, the report's unpaired comparison).")
    k = r.min_discordant
    floor = "0.5^k (exact test: 2 x 0.5^k)" if r.test == "mcnemar_midp" else "2 x 0.5^k"
    lines.append(f"Discordant floor: with k discordant layouts the smallest {test} is {floor}; at least {k} "
                 f"discordant layouts are needed before the {test.removesuffix(' p')} test can reach {r.alpha:g} at all.")
    for target, n in r.targets:
        if n is not None:
            expected = n * r.discordance
            lines.append(f"At {n} layouts ({100 * target:.0f}% power) about {expected:.0f} discordant layouts are "
                         f"expected; the smallest {test} they allow is "
                         f"{stats.discordant_floor(int(round(expected)), r.test):.2g}.")
            break
    return "\n".join(lines)
