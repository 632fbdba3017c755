"""Rule `share`: each record of a point x repetition (e.g. each TCP session) gets about the
group's total / n (r/n), within `tolerance_pct`: tested over the repetitions. Each repetition
gives its worst session's deviation from r/n (the largest |value / (r/n) - 1|); "holds" when the
mean worst deviation's CI lies below the tolerance (one-sided, Student t over the repetitions,
stats/equivalence.py), "does not hold" when it lies above it. One repetition: descriptive.
"""

from __future__ import annotations

import math

from congestlab.report.claims.check import NOT_MEASURED, CheckContext, CheckResult, descriptive
from congestlab.report.claims.formatting import numbers
from congestlab.report.data import matches
from congestlab.spec.metric import MetricSpec, Selector
from congestlab.spec.report import CheckSpec
from congestlab.stats.equivalence import mean_band, within


def decide_share(ctx: CheckContext, check: CheckSpec, metric: MetricSpec, selection: Selector,
                 label: str) -> CheckResult:
    where = {**metric.where, **selection}
    groups: dict[tuple[str, str], list[float]] = {}
    for row in ctx.data.rows(metric.kind):
        if matches(row, where) and (ctx.keep is None or row.get("repetition") in ctx.keep):
            value = row.number(metric.column)
            if value is not None:
                groups.setdefault((row["point_id"], row["repetition"]), []).append(value * metric.scale)
    points = frozenset(p for p, _ in groups)
    if not groups:
        return CheckResult(label, NOT_MEASURED, "–", "", "no records")
    worst, n_max = [], 0
    for values in groups.values():
        fair = sum(values) / len(values)
        n_max = max(n_max, len(values))
        worst.append(100 * max(abs(v / fair - 1) for v in values) if fair > 0
                     else (0.0 if not any(values) else math.inf))
    ours = (f"worst session's deviation from r/n {sum(worst) / len(worst):.1f} % (mean of {len(worst)} "
            f"repetitions, up to {n_max} records each)")
    if n_max < 2:
        return descriptive(label, ours, "r/n", "one record: it is r/n by definition", points)
    band = mean_band(worst)
    if band.effect is None:
        return descriptive(label, ours, "r/n", band.descriptive, points)
    rule = (f"every record within ±{check.tolerance_pct:g} % of its group's r/n: the mean worst deviation's CI "
            f"below {check.tolerance_pct:g} % (Student t over the repetitions); does not hold: above it "
            f"(reason: {check.reason})")
    v = within(band, -math.inf, check.tolerance_pct, ctx.alpha, rule, label)
    return CheckResult(label, v.verdict, ours, "r/n", numbers(v), v, points)
