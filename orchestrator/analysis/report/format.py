"""Number formatting shared by every rendering of the report (text, Markdown, HTML) and by the
exported dataset card."""

from __future__ import annotations

import math

from orchestrator.analysis import stats


def fmt_p(p: float) -> str:
    """A p-value: 3 decimals, 4 below 0.001, '< 0.0001' below that."""
    if p < 0.0001:
        return "< 0.0001"
    if p < 0.001:
        return f"{p:.4f}"
    return f"{p:.3f}"


def p_eq(p: float) -> str:
    """'= 0.012' or '< 0.0001', to follow a 'p'."""
    text = fmt_p(p)
    return text if text.startswith("<") else f"= {text}"


def kappa_text(kappa: float | None, digits: int = 2) -> str:
    """A kappa, or `undefined` where it is 0/0 (NaN, None: every label of both raters one class,
    `stats.cohen_kappa`)."""
    if kappa is None or kappa != kappa:
        return "undefined (every label one class)"
    return f"{kappa:.{digits}f}"


def p_name(primary: str) -> str:
    """The primary test's p-value, as the report names it."""
    return "exact p" if primary == "mcnemar_exact" else "mid-p"


def interval(iv: stats.Interval, digits: int = 3) -> str:
    return f"[{iv.lo:.{digits}f}, {iv.hi:.{digits}f}]"


def k_of_n(k: int, n: int) -> str:
    """'7/10 (70%)'; '0/0' with no trials."""
    return f"{k}/{n}" + (f" ({100 * k / n:.0f}%)" if n else "")


def ms(x: float | None) -> str:
    """Milliseconds: two decimals below 10 ms, one above; '-' when unknown."""
    return "-" if x is None else (f"{x:.2f} ms" if x < 10 else f"{x:.1f} ms")


def points(*values: float) -> list[str]:
    """Signed percentage points of several values (an estimate and its bounds) with one common
    number of decimals, enough that distinct values print distinctly: none when every two
    distinct values are at least 1 point apart (+16, -3); otherwise ceil(-log10(gap)) + 1
    decimals for the smallest gap in points (gap 0.44 -> 2: +0.56 to +1.44), more if rounding
    still merges two of them (at most 6). 0 counts as one of the values, so a value that is not 0
    never prints as 0. Zero prints without a sign; -0.00 never appears."""
    pts = [100 * v for v in values]
    # 0 takes part as a reference value: a bound just below 0 must never print as "0" (a reader
    # would take "-78 to 0" for an interval that reaches 0)
    ref = pts + [0.0]
    gaps = [abs(x - y) for i, x in enumerate(ref) for y in ref[i + 1:] if abs(x - y) > 1e-9]
    small = min(gaps, default=1.0)
    digits = 0 if small >= 1 else min(6, math.ceil(-math.log10(small)) + 1)
    while digits < 6 and _merged(ref, digits):
        digits += 1
    return [_signed(round(x, digits), digits) for x in pts]


def _merged(pts: list[float], digits: int) -> bool:
    """True if two values more than 1e-9 apart round to the same text at `digits` decimals."""
    shown: dict[float, float] = {}
    for x in pts:
        key = round(x, digits)
        if key in shown and abs(shown[key] - x) > 1e-9:
            return True
        shown.setdefault(key, x)
    return False


def _signed(v: float, digits: int) -> str:
    if v == 0:
        return f"{0:.{digits}f}"
    return f"{v:+.{digits}f}"

