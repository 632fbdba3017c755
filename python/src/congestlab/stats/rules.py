"""Rules that can fail both ways (docs/statistics.md).

Every rule is two one-sided tests on an effect (log(a / b), congestlab/stats/median_ratio.py), each
at level `alpha` (default 2.5 %, the sides of a 95 % CI): one whose rejection says the claim
holds, one whose rejection says it does not. Neither rejected: inconclusive. So an underpowered
run is inconclusive, never "holds" by default.

direction      a > b: holds when the CI lies above 0 (p_holds = P(effect <= 0)); does not hold
               when it lies below 0.
equivalence    a ~ b within a margin m (%): TOST; holds when the CI lies inside
               (-log(1+m), log(1+m)); does not hold when it lies wholly outside.
at_most        a <= b, at most m % above it (non-inferiority where lower is better, e.g. a
               delay): holds when the CI lies below log(1+m); does not hold when above it.
at_least       a >= b, at most m % below it: the mirror image.
magnitude      the effect lies in [lo, hi] % (a seed's stated range): an interval hypothesis
               like equivalence; holds when the CI lies inside [lo, hi]; does not hold when it
               lies wholly above hi or below lo. A CI that merely meets the range (e.g. an
               underpowered one that also covers 0) is inconclusive.
raw_magnitude  the same on the effect's own scale (a difference or a level, stats/location.py).

A claim over several cells (`every_cell`) is an intersection–union test: it holds when every
cell holds at `alpha`, unadjusted; it does not hold when some cell does not, after Holm's
adjustment of the cells' "does not hold" p-values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from congestlab.errors import StatsInputError
from congestlab.stats.effect import Effect, from_percent, to_percent
from congestlab.stats.median_ratio import compare

HOLDS, FAILS, INCONCLUSIVE = "holds", "does not hold", "inconclusive"
# no test at this n (a single sample, a deterministic count): shown apart, never "holds"
DESCRIPTIVE = "descriptive"
ALPHA = 0.025  # per side: the two sides of a 95 % CI


@dataclass(frozen=True)
class Verdict:
    """One decided (or undecided) check, with what the report shows beside it."""

    verdict: str
    rule: str                       # the rule in words
    effect_pct: float               # (a / b - 1) x 100; NaN where the rule has no one effect
    ci_pct: tuple[float, float]     # the (1 - 2 alpha) CI of it
    p_holds: float                  # p of the test whose rejection says "holds" (adjusted where the rule adjusts)
    p_fails: float                  # p of the test whose rejection says "does not hold" (adjusted likewise)
    n: int
    censored: int
    invalid: int
    alpha: float = ALPHA
    label: str = ""
    note: str = ""
    cells: tuple["Verdict", ...] = field(default=())
    # what the power estimate needs (power.rounds_needed_for_verdict)
    kind: str = ""                  # greater, less, equivalence, at_most, at_least, magnitude
    margin_pct: float = 0.0
    interval: tuple[float, float] | None = None  # magnitude: [lo, hi] on the effect's own scale
    effect: Effect | None = field(default=None, compare=False, repr=False)

    def text(self, digits: int = 1) -> str:
        parts = [self.verdict]
        if math.isfinite(self.effect_pct):
            lo, hi = self.ci_pct
            parts.append(f"effect {self.effect_pct:+.{digits}f} % [{_pct(lo, digits)}, {_pct(hi, digits)}]")
        parts.append(f"p(holds) {self.p_holds:.3g}, p(does not hold) {self.p_fails:.3g}")
        parts.append(f"n={self.n}, censored {self.censored}, invalid {self.invalid}")
        text = "; ".join(parts) + f" — {self.rule}"
        return text + (f" ({self.note})" if self.note else "")


def _pct(x: float, digits: int) -> str:
    return "∞" if x == math.inf else "-∞" if x == -math.inf else f"{x:+.{digits}f} %"


def _decide(p_holds: float, p_fails: float, alpha: float) -> str:
    if p_fails < alpha:
        return FAILS
    if p_holds < alpha:
        return HOLDS
    return INCONCLUSIVE


def _verdict(e: Effect, p_holds: float, p_fails: float, rule: str, alpha: float, label: str, kind: str,
             margin_pct: float = 0.0, interval: tuple[float, float] | None = None) -> Verdict:
    lo, hi = e.ci(1 - 2 * alpha)
    return Verdict(_decide(p_holds, p_fails, alpha), rule,
                   to_percent(e.estimate) if e.determined else math.nan, (to_percent(lo), to_percent(hi)),
                   p_holds, p_fails, sum(e.n), sum(e.censored), sum(e.invalid), alpha, label, e.note,
                   kind=kind, margin_pct=margin_pct, interval=interval, effect=e)


def direction(e: Effect, greater: bool = True, alpha: float = ALPHA, label: str = "") -> Verdict:
    if greater:
        return _verdict(e, e.p_above(0.0), e.p_below(0.0), "a > b: the CI of log(a/b) lies above 0", alpha, label,
                        "greater")
    return _verdict(e, e.p_below(0.0), e.p_above(0.0), "a < b: the CI of log(a/b) lies below 0", alpha, label,
                    "less")


def equivalence(e: Effect, margin_pct: float, alpha: float = ALPHA, label: str = "") -> Verdict:
    m = from_percent(margin_pct)
    p_holds = max(e.p_above(-m), e.p_below(m))
    p_fails = min(e.p_below(-m), e.p_above(m))
    return _verdict(e, p_holds, p_fails, f"a ~ b: TOST, a/b within 1/(1+{margin_pct:g} %) .. 1+{margin_pct:g} %",
                    alpha, label, "equivalence", margin_pct)


def at_most(e: Effect, margin_pct: float, alpha: float = ALPHA, label: str = "") -> Verdict:
    m = from_percent(margin_pct)
    return _verdict(e, e.p_below(m), e.p_above(m),
                    f"a <= b: non-inferiority, a at most {margin_pct:g} % above b", alpha, label, "at_most", margin_pct)


def at_least(e: Effect, margin_pct: float, alpha: float = ALPHA, label: str = "") -> Verdict:
    m = from_percent(-margin_pct)
    return _verdict(e, e.p_above(m), e.p_below(m),
                    f"a >= b: non-inferiority, a at most {margin_pct:g} % below b", alpha, label, "at_least",
                    margin_pct)


def magnitude(e: Effect, lo_pct: float, hi_pct: float, alpha: float = ALPHA, label: str = "") -> Verdict:
    lo, hi = from_percent(lo_pct), from_percent(hi_pct)
    if not e.determined and e.rank_test is None:
        return _verdict(e, 1.0, 1.0, f"a/b - 1 within {lo_pct:g}..{hi_pct:g} %", alpha, label, "magnitude",
                        interval=(lo, hi))
    return _verdict(e, *range_p_values(e, lo, hi), f"a/b - 1 within {lo_pct:g}..{hi_pct:g} %: the CI lies inside "
                    "the range (does not hold: wholly outside)", alpha, label, "magnitude", interval=(lo, hi))


def range_p_values(e: Effect, lo: float, hi: float) -> tuple[float, float]:
    """(p_holds, p_fails) of "lo <= effect <= hi" on the effect's own scale: two one-sided tests
    (above lo, below hi) for holds, as equivalence's TOST; wholly below lo or above hi for fails."""
    return max(e.p_above(lo), e.p_below(hi)), min(e.p_below(lo), e.p_above(hi))


def raw_magnitude(e: Effect, lo: float, hi: float, rule: str, alpha: float, label: str) -> Verdict:
    """A range on the effect's own scale (a difference or a level, stats/location.py): holds when
    the CI lies inside [lo, hi], does not hold when it lies wholly above or below (as magnitude,
    without the log-ratio scale)."""
    if not e.determined:  # not weak: an undetermined range stays inconclusive under every_cell
        return Verdict(INCONCLUSIVE, rule, math.nan, (math.nan, math.nan), 1.0, 1.0, sum(e.n), sum(e.censored),
                       sum(e.invalid), alpha, label, e.note, kind="magnitude", interval=(lo, hi), effect=e)
    p_holds, p_fails = range_p_values(e, lo, hi)
    verdict = FAILS if p_fails < alpha else HOLDS if p_holds < alpha else INCONCLUSIVE
    return Verdict(verdict, rule, math.nan, (math.nan, math.nan), p_holds, p_fails, sum(e.n), sum(e.censored),
                   sum(e.invalid), alpha, label, e.note, kind="magnitude", interval=(lo, hi), effect=e)


def holm(pvalues: list[float]) -> list[float]:
    """Holm's step-down adjusted p-values. The same numbers as statsmodels' multipletests(method=
    "holm") (python/tests/unit/test_stats_censored.py checks), which runs gc.collect() on every call
    (a quarter second each: too slow for the calibration's thousands of claims)."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def every_cell(cells: list[Verdict], rule: str = "", alpha: float | None = None, label: str = "") -> Verdict:
    """Intersection–union over the cells; Holm on the "does not hold" side."""
    if not cells:
        raise StatsInputError("every_cell needs at least one cell")
    alpha = cells[0].alpha if alpha is None else alpha
    adjusted = holm([c.p_fails for c in cells])
    cells = [replace(c, p_fails=p, verdict=_decide(c.p_holds, p, alpha)) for c, p in zip(cells, adjusted)]
    if any(c.verdict == FAILS for c in cells):
        verdict = FAILS
    elif all(c.verdict == HOLDS for c in cells):
        verdict = HOLDS
    else:
        verdict = INCONCLUSIVE
    p_holds = max(c.p_holds for c in cells)
    rule = rule or f"in every cell ({len(cells)}): each cell at {alpha:g}, unadjusted; does not hold: Holm"
    return Verdict(verdict, rule, math.nan, (math.nan, math.nan), p_holds, min(adjusted), sum(c.n for c in cells),
                   sum(c.censored for c in cells), sum(c.invalid for c in cells), alpha, label,
                   cells=tuple(cells))


def best_changes(levels: dict, best: str = "highest", alpha: float = ALPHA, label: str = "",
                 blocked: bool = True) -> Verdict:
    """"The best cell changes with the level": {level: {cell: Cell}}.

    Holds when some two cells X, Y swap places significantly: X better than Y at one level and Y
    better than X at another (each a one-sided test; a swap needs both, so its p is the larger);
    the smallest such p is Bonferroni-adjusted over every swap that could have been found. Does
    not hold when one cell is significantly better than every other at every level (the larger
    of its p's), Bonferroni-adjusted over the cells. Otherwise inconclusive."""

    higher = best == "highest"
    names = sorted({c for cells in levels.values() for c in cells}, key=str)
    p_better: dict[tuple, float] = {}
    n = censored = invalid = 0
    for level, cells in levels.items():
        for c in cells.values():
            n, censored, invalid = n + c.n, censored + c.censored, invalid + c.invalid
        for i, x in enumerate(names):
            for y in names[i + 1:]:
                if x in cells and y in cells:
                    e = compare(cells[x], cells[y], blocked)
                    up, down = e.p_above(0.0), e.p_below(0.0)
                    p_better[level, x, y] = up if higher else down
                    p_better[level, y, x] = down if higher else up
    level_list = list(levels)
    swaps = [max(p_better[l1, x, y], p_better[l2, y, x])
             for i, x in enumerate(names) for y in names[i + 1:]
             for l1 in level_list for l2 in level_list
             if l1 != l2 and (l1, x, y) in p_better and (l2, y, x) in p_better]
    p_holds = min(1.0, min(swaps) * len(swaps)) if swaps else 1.0
    always = []
    for x in names:
        ps = [p for (lvl, a, b), p in p_better.items() if a == x]
        if ps and all(x in cells for cells in levels.values()):
            always.append(max(ps))
    p_fails = min(1.0, min(always) * len(always)) if always and len(level_list) >= 2 else 1.0
    rule = (f"the {best} cell changes with the level: a significant swap of two cells between two levels "
            f"({len(swaps)} possible, Bonferroni); does not hold: one cell significantly {best} at every level")
    verdict = FAILS if p_fails < alpha else HOLDS if p_holds < alpha else INCONCLUSIVE
    return Verdict(verdict, rule, math.nan, (math.nan, math.nan), p_holds, p_fails, n, censored, invalid, alpha, label)
