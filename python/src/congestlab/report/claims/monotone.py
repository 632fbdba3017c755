"""Rule `monotone`: along `along`, the samples' trend (Kendall's tau, stats/trend.py)
significantly in `direction`, and no step between neighbours significantly against it by more
than `tolerance_pct` (Holm over the steps).
"""

from __future__ import annotations

import math

from congestlab.report.claims.check import NOT_MEASURED, CheckContext, CheckResult, cells_along, descriptive, effect
from congestlab.report.claims.formatting import fmt_num, numbers
from congestlab.stored import number_of
from congestlab.spec.metric import MetricSpec, Selector
from congestlab.spec.report import CheckSpec
from congestlab.stats.decidable import kendall_min_p
from congestlab.stats.effect import from_percent
from congestlab.stats.rules import FAILS, HOLDS, INCONCLUSIVE, Verdict, holm
from congestlab.stats.summary import mean_with_ci
from congestlab.stats.trend import kendall_p_values


def decide_monotone(ctx: CheckContext, check: CheckSpec, metric: MetricSpec, selection: Selector,
                    label: str) -> CheckResult:
    cells = cells_along(ctx, check, metric, selection)
    points = frozenset().union(*(c.points for _, c in cells)) if cells else frozenset()
    ours = ", ".join(f"{v}: {fmt_num(mean_with_ci(c.cell.completed())[0], metric.digits)}" for v, c in cells)
    if len(cells) < 2:
        return CheckResult(label, NOT_MEASURED if not cells else INCONCLUSIVE, ours or "–", "",
                           f"{len(cells)} value(s) of {check.along}", points=points)
    alpha = ctx.alpha
    up = check.direction == "increasing"
    xs, ys = [], []
    for v, c in cells:
        x = number_of(v)
        x = float(len(xs)) if x is None else x
        for y in c.cell.completed():
            xs.append(x), ys.append(y)
    reps = min(len(c.cell.completed()) for _, c in cells)
    if kendall_min_p(len(cells), max(reps, 1)) >= alpha:
        return descriptive(label, ours, "", f"Kendall's tau over {len(cells)} values of {check.along} at {reps} "
                           f"repetition(s) cannot reach p < {alpha:g} (its smallest: "
                           f"{kendall_min_p(len(cells), max(reps, 1)):.3g})", points)
    # the trend: Kendall's tau of the samples against x, one-sided each way
    p_up, p_down = kendall_p_values(xs, ys)
    p_trend_holds, p_trend_against = (p_up, p_down) if up else (p_down, p_up)
    # the steps: does a step go against the direction by more than the tolerance?
    steps = []
    for (x1, c1), (x2, c2) in zip(cells, cells[1:]):
        e = effect(c2, c1)
        steps.append(((x1, x2), e.p_below(from_percent(-check.tolerance_pct)) if up
                      else e.p_above(from_percent(check.tolerance_pct))))
    adjusted = holm([p for _, p in steps])
    against = [f"{x1}→{x2}" for ((x1, x2), _), p in zip(steps, adjusted) if p < alpha]
    p_fails = min([*adjusted, p_trend_against])
    if against or p_trend_against < alpha:
        verdict = FAILS
    elif p_trend_holds < alpha:
        verdict = HOLDS
    else:
        verdict = INCONCLUSIVE
    rule = (f"{check.direction}: Kendall's tau of the samples against {check.along} significant that way, and no "
            f"step significantly against it by more than {check.tolerance_pct:g} % (Holm over {len(steps)} steps)")
    v = Verdict(verdict, rule, math.nan, (math.nan, math.nan), p_trend_holds, p_fails,
                sum(c.cell.n for _, c in cells), sum(c.cell.censored for _, c in cells),
                sum(c.cell.invalid for _, c in cells), alpha, label,
                note=("against: " + ", ".join(against)) if against else "")
    return CheckResult(label, verdict, ours, "", numbers(v), v, points)
