"""The text of a check: a cell, a mean with its CI, a verdict's numbers, a selection's values."""

from __future__ import annotations

import math

from congestlab.report.data import Stats
from congestlab.spec.metric import Selector
from congestlab.stats.outcomes import TIMED_OUT
from congestlab.stats.rules import Verdict
from congestlab.stats.samples import RIGHT, Cell
from congestlab.stats.summary import mean_with_ci


def fmt_num(x: float, digits: int) -> str:
    return "∞" if x == math.inf else "-∞" if x == -math.inf else "?" if math.isnan(x) else f"{x:.{digits}f}"


def fmt_cell(cell: Cell, digits: int) -> str:
    """Mean of the completed samples with its 95 % CI, n, and the censored / invalid counts."""
    done = cell.completed()
    if not cell.n and not cell.invalid:
        return "–"
    mean, (lo, hi) = mean_with_ci(done)
    text = f"{fmt_num(mean, digits)} [{fmt_num(lo, digits)}, {fmt_num(hi, digits)}]" if done else "–"
    extra = [f"n={cell.n}"]
    if cell.censored:
        limit = min(lim for lim, o in zip(cell.limits, cell.outcomes) if o == TIMED_OUT) if cell.censoring == RIGHT \
            else max(lim for lim, o in zip(cell.limits, cell.outcomes) if o == TIMED_OUT)
        bound = f"{limit:.{digits}f}"
        bound = bound.rstrip("0").rstrip(".") if "." in bound else bound
        extra.append(f"{cell.censored} censored {'>' if cell.censoring == RIGHT else '<'} {bound}")
    if cell.invalid:
        extra.append(f"{cell.invalid} invalid")
    return f"{text} ({', '.join(extra)})"


def fmt_stats(stats: Stats, digits: int, n: bool = True) -> str:
    """Mean with its 95 % CI (matches, monotone, shape: samples without outcomes)."""
    if not stats.n:
        return "–"
    mean, (lo, hi) = mean_with_ci(stats.values)
    text = f"{mean:.{digits}f}" + (f" [{fmt_num(lo, digits)}, {fmt_num(hi, digits)}]" if stats.n > 1 else "")
    return text + (f" (n={stats.n})" if n else "")


def _pct(x: float) -> str:
    return "∞" if x == math.inf else "-∞" if x == -math.inf else "?" if math.isnan(x) else f"{x:+.1f} %"


def numbers(v: Verdict) -> str:
    """The verdict's numbers inline: effect and 95 % CI, p of each side, n, censored, invalid."""
    parts = []
    if math.isfinite(v.effect_pct):
        parts.append(f"effect {_pct(v.effect_pct)} [{_pct(v.ci_pct[0])}, {_pct(v.ci_pct[1])}]")
    parts.append(f"p(holds) {v.p_holds:.3g}, p(does not hold) {v.p_fails:.3g} at {v.alpha:g} per side")
    parts.append(f"n={v.n}, censored {v.censored}, invalid {v.invalid}")
    text = "; ".join(parts) + f" — {v.rule}"
    return text + (f" ({v.note})" if v.note else "")


def describe(selection: Selector) -> str:
    return ", ".join(f"{k}={'/'.join(map(str, v)) if isinstance(v, list) else v}" for k, v in selection.items())


def short(selection: Selector) -> str:
    """Values only ("apache, C1B"): the dimension names are in the claim's words."""
    return ", ".join("/".join(map(str, v)) if isinstance(v, list) else str(v) for v in selection.values())
