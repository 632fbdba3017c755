"""Rule `share`: in every point x repetition, each record's value within `tolerance_pct` of the
group's total / n (TCP sessions sharing r/n): a property, no test.
"""

from __future__ import annotations

import math

from congestlab.report.claims.check import NOT_MEASURED, CheckContext, CheckResult, decided
from congestlab.report.data import matches
from congestlab.spec.metric import MetricSpec, Selector
from congestlab.spec.report import CheckSpec
from congestlab.stats.rules import FAILS, HOLDS


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
    worst, worst_key, n_max = 0.0, None, 0
    for key, values in groups.items():
        fair = sum(values) / len(values)
        n_max = max(n_max, len(values))
        dev = max(abs(v - fair) for v in values) / fair * 100 if fair > 0 else (0.0 if not any(values) else math.inf)
        if dev >= worst:
            worst, worst_key = dev, key
    verdict = HOLDS if worst <= check.tolerance_pct else FAILS
    rule = f"every record within ±{check.tolerance_pct:g} % of its group's r/n (a property, no test)"
    ours = f"largest deviation from r/n {worst:.1f} % ({len(groups)} point×repetition groups, up to {n_max} records)"
    return CheckResult(label, verdict, ours, "r/n", f"worst in {worst_key[0]} r{worst_key[1]} — {rule}",
                       decided(verdict, rule, ctx.alpha, len(groups)), points)
