""""a is more than k times b" (or less than b / k): a direction against log k instead of 0
(the `factor` of a compare, e.g. "more than double": k = 2). Holds when the CI of log(a/b)
lies above log k (below -log k); does not hold when it lies below (above) it. The power
estimate (stats/power.py) has no rule for a threshold other than 0 or a margin: none is given.
"""

from __future__ import annotations

import math

from congestlab.stats.effect import Effect, to_percent
from congestlab.stats.rules import ALPHA, FAILS, HOLDS, INCONCLUSIVE, Verdict


def beyond_factor(e: Effect, factor: float, greater: bool = True, alpha: float = ALPHA, label: str = "") -> Verdict:
    threshold = math.log(factor) if greater else -math.log(factor)
    if greater:
        p_holds, p_fails = e.p_above(threshold), e.p_below(threshold)
        rule = f"a > {factor:g} × b: the CI of log(a/b) lies above log {factor:g}"
    else:
        p_holds, p_fails = e.p_below(threshold), e.p_above(threshold)
        rule = f"a < b / {factor:g}: the CI of log(a/b) lies below -log {factor:g}"
    lo, hi = e.ci(1 - 2 * alpha)
    verdict = FAILS if p_fails < alpha else HOLDS if p_holds < alpha else INCONCLUSIVE
    return Verdict(verdict, rule, to_percent(e.estimate) if e.determined else math.nan,
                   (to_percent(lo), to_percent(hi)), p_holds, p_fails, sum(e.n), sum(e.censored), sum(e.invalid),
                   alpha, label, e.note, kind="factor", effect=e)
