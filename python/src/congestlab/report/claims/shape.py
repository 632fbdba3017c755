"""Rule `shape`: least-squares fits of the samples against the numeric values of `along`,
linear and exponential (stats/fits.py); the better by AIC by at least AIC_DECIDES decides, and
fewer than MIN_SHAPE_POINTS values of `along` is inconclusive (model selection, no test).
"""

from __future__ import annotations

from congestlab.report.claims.check import NOT_MEASURED, CheckContext, CheckResult, cells_along, decided
from congestlab.report.claims.formatting import fmt_num
from congestlab.stored import number_of
from congestlab.spec.metric import MetricSpec, Selector
from congestlab.spec.report import CheckSpec
from congestlab.stats.fits import aic, fit_shapes, r_squared
from congestlab.stats.rules import FAILS, HOLDS, INCONCLUSIVE
from congestlab.stats.summary import mean_with_ci

MIN_SHAPE_POINTS = 4
AIC_DECIDES = 2.0


def decide_shape(ctx: CheckContext, check: CheckSpec, metric: MetricSpec, selection: Selector,
                 label: str) -> CheckResult:
    cells = cells_along(ctx, check, metric, selection)
    points = frozenset().union(*(c.points for _, c in cells)) if cells else frozenset()
    xs, ys = [], []
    for v, c in cells:
        x = number_of(v)
        if x is None:
            return CheckResult(label, INCONCLUSIVE, "–", "", f"{check.along}={v} is not a number", points=points)
        done = c.cell.completed()
        xs += [x] * len(done)
        ys += done
    ours = ", ".join(f"{v}: {fmt_num(mean_with_ci(c.cell.completed())[0], metric.digits)}" for v, c in cells) or "–"
    rule = (f"{check.shape} and {check.direction}: the fit better than the other shape by AIC ≥ {AIC_DECIDES:g} "
            "(model selection, no test)")
    if not cells or not ys:
        return CheckResult(label, NOT_MEASURED, ours, "", "no samples", points=points)
    if len(cells) < MIN_SHAPE_POINTS:
        v = decided(INCONCLUSIVE, rule, ctx.alpha, len(ys))
        return CheckResult(label, INCONCLUSIVE, ours, "", f"{len(cells)} values of {check.along}, a fit needs "
                                                         f"{MIN_SHAPE_POINTS} — {rule}", v, points)
    fits = fit_shapes(xs, ys)
    n = len(xs)
    aics = {name: aic(f[2], n) for name, f in fits.items()}
    other = "linear" if check.shape == "exponential" else "exponential"
    delta = aics[other] - aics[check.shape]
    r2 = {name: r_squared(f[2], ys) for name, f in fits.items()}
    slope = fits[check.shape][1]
    direction_ok = (slope < 0) == (check.direction == "decreasing")
    how = (f"R² linear {r2['linear']:.3f}, exponential {r2['exponential']:.3f}; "
           f"AIC({other}) − AIC({check.shape}) = {delta:+.1f}")
    if not direction_ok:
        verdict, how = FAILS, how + f"; the fit is not {check.direction}"
    elif delta >= AIC_DECIDES:
        verdict = HOLDS
    elif delta <= -AIC_DECIDES:
        verdict = FAILS
    else:
        verdict, how = INCONCLUSIVE, how + f" (|Δ| < {AIC_DECIDES:g})"
    return CheckResult(label, verdict, ours, "", f"{how} — {rule}", decided(verdict, rule, ctx.alpha, n), points)
