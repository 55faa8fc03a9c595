"""Number formatting shared by every rendering of the report (text, Markdown, HTML) and by the
exported dataset card."""

from __future__ import annotations

from .. import stats


def pct(x: float) -> str:
    """Signed percentage points, e.g. +16 or -3."""
    v = round(100 * x)
    return f"{'+' if v > 0 else ('-' if v < 0 else '')}{abs(v)}" if v != 0 else "0"


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
