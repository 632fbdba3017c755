"""Rule `matches`: every cell's mean of completed samples within `tolerance_pct` of `expected`
(a number, or the seed's published value for that cell): a comparison with the seed, no test.
"""

from __future__ import annotations

from congestlab.report.claims.check import NOT_MEASURED, CheckContext, CheckResult, decided
from congestlab.report.claims.formatting import fmt_stats
from congestlab.spec.metric import MetricSpec, Selector
from congestlab.spec.report import CheckSpec
from congestlab.stats.rules import FAILS, HOLDS


def decide_matches(ctx: CheckContext, check: CheckSpec, metric: MetricSpec, selection: Selector,
                   label: str) -> CheckResult:
    stats = ctx.stats(metric, selection)
    points = frozenset(s.point_id for s in ctx.data.samples(metric, selection))
    published = ctx.data.published_value(check.metric, selection)
    expected = published if check.expected == "published" else check.expected
    seed = "" if published is None else f"{published:g}"
    if not stats.n:
        return CheckResult(label, NOT_MEASURED, "–", seed, "no samples", points=points)
    if expected is None:
        return CheckResult(label, NOT_MEASURED, fmt_stats(stats, metric.digits), seed, "the seed gives no value here",
                           points=points)
    dev = abs(stats.mean - expected)
    limit = abs(expected) * check.tolerance_pct / 100
    verdict = HOLDS if dev <= limit else FAILS
    rule = f"the mean of completed samples within ±{check.tolerance_pct:g} % of {expected:g} (a comparison, no test)"
    return CheckResult(label, verdict, fmt_stats(stats, metric.digits), seed or f"{expected:g}",
                       f"off by {dev:.{metric.digits}f} (n={stats.n}) — {rule}",
                       decided(verdict, rule, ctx.alpha, stats.n), points)
