"""Rule `shape`: which curve the samples follow against the numeric values of `along`, tested
(stats/shapes.py): the declared form against the others of the Box-Cox family (linear,
exponential, and the physically expected reciprocal 1/(a + b x), throughput ~ 1/RTT, and
1/sqrt(a + b x), Mathis' 1/sqrt(p)) by profile likelihood, and its slope's sign by a t-test;
a sign counts only when significant. Fewer than three values of `along` tell no curves apart:
descriptive.
"""

from __future__ import annotations

import math

from congestlab.report.claims.check import NOT_MEASURED, CheckContext, CheckResult, cells_along, descriptive
from congestlab.report.claims.formatting import fmt_num, numbers
from congestlab.stored import number_of
from congestlab.spec.metric import MetricSpec, Selector
from congestlab.spec.report import CheckSpec
from congestlab.stats.rules import FAILS, HOLDS, INCONCLUSIVE, Verdict
from congestlab.stats.shapes import FORMS, shape_test
from congestlab.stats.summary import mean_with_ci


def decide_shape(ctx: CheckContext, check: CheckSpec, metric: MetricSpec, selection: Selector,
                 label: str) -> CheckResult:
    cells = cells_along(ctx, check, metric, selection)
    points = frozenset().union(*(c.points for _, c in cells)) if cells else frozenset()
    xs, ys = [], []
    for v, c in cells:
        x = number_of(v)
        if x is None:
            return descriptive(label, "–", "", f"{check.along}={v} is not a number", points)
        done = c.cell.completed()
        xs += [x] * len(done)
        ys += done
    ours = ", ".join(f"{v}: {fmt_num(mean_with_ci(c.cell.completed())[0], metric.digits)}" for v, c in cells) or "–"
    if not cells or not ys:
        return CheckResult(label, NOT_MEASURED, ours, "", "no samples", points=points)
    increasing = check.direction == "increasing"
    t = shape_test(xs, ys, check.shape, increasing)
    if t.why_untested:
        return descriptive(label, ours, "", t.why_untested, points)
    alpha = ctx.alpha
    verdict = FAILS if t.p_fails < alpha else HOLDS if t.p_holds < alpha else INCONCLUSIVE
    others = ", ".join(name for name in FORMS if name != check.shape)
    rule = (f"{check.shape} and {check.direction}: its slope significantly {check.direction} and every other form "
            f"({others}) rejected by the profile likelihood (Box-Cox, chi-squared 1 df); does not hold: {check.shape} "
            f"rejected or its slope significantly the other way (Bonferroni over the two)")
    fit = "; ".join(f"{name} R² {r2:.3f}, p(fits as well as the best) {t.p_rejected[name]:.3g}"
                    for name, r2 in t.r_squared.items())
    note = f"{fit}; best power {t.best_lambda:+.2f}; slope p(increasing) {t.p_slope[0]:.3g}, " \
           f"p(decreasing) {t.p_slope[1]:.3g}"
    v = Verdict(verdict, rule, math.nan, (math.nan, math.nan), t.p_holds, t.p_fails, len(ys),
                sum(c.cell.censored for _, c in cells), sum(c.cell.invalid for _, c in cells), alpha, label, note,
                kind="shape")
    return CheckResult(label, verdict, ours, "", numbers(v), v, points)
