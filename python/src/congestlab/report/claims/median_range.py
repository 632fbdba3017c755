"""Rule `range`: the cell's (geometric) median lies in [lo, hi], a magnitude check of one cell
(stats/location.py, level_effect).
"""

from __future__ import annotations

import math

from congestlab.report.claims.check import NOT_MEASURED, CheckContext, CheckResult, decided
from congestlab.report.claims.formatting import fmt_cell, numbers
from congestlab.spec.metric import MetricSpec, Selector
from congestlab.spec.report import CheckSpec
from congestlab.stats.location import level_effect
from congestlab.stats.rules import INCONCLUSIVE, raw_magnitude


def decide_range(ctx: CheckContext, check: CheckSpec, metric: MetricSpec, selection: Selector,
                 label: str) -> CheckResult:
    ec = ctx.cell(metric, selection)
    lo, hi = check.range
    ours = fmt_cell(ec.cell, metric.digits)
    if not ec.cell.n:
        return CheckResult(label, NOT_MEASURED, ours, "", "no samples", points=ec.points)
    rule = (f"the median lies in {lo:g}..{hi:g} {metric.unit}: its CI lies inside the range; does not hold when "
            f"the CI lies wholly outside (reason: {check.reason})")
    if not ec.positive:
        v = decided(INCONCLUSIVE, rule, ctx.alpha, ec.cell.n, "values <= 0: no log-normal median")
        return CheckResult(label, v.verdict, ours, "", numbers(v), v, ec.points)
    e = level_effect(ec.cell)
    v = raw_magnitude(e, math.log(lo), math.log(hi), rule, ctx.alpha, label)
    if e.determined:
        ci = e.ci(1 - 2 * ctx.alpha)
        ours += f"; median {math.exp(e.estimate):.{metric.digits}f} [{math.exp(ci[0]):.{metric.digits}f}, " \
                f"{math.exp(ci[1]):.{metric.digits}f}]"
    return CheckResult(label, v.verdict, ours, "", numbers(v), v, ec.points)
