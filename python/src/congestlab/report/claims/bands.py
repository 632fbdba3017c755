"""A cell as stats/equivalence.py tests it against a band: the mean of its repetitions, or, for
a share of counted events (`trials`), each repetition's events and trials (rules `matches` and
`range`).

A share's counts: with trials = "divide_by" the metric's own numerator and denominator (e.g.
RESETs of requests sent); with a column (e.g. the RTT samples a bin's percentage is of) each
record's percentage times its count, summed over the repetition's records.
"""

from __future__ import annotations

from congestlab.report.claims.check import CheckContext
from congestlab.report.data import matches, reduce_rows
from congestlab.spec.metric import MetricSpec, Selector
from congestlab.spec.report import CheckSpec
from congestlab.stats.equivalence import Band, mean_band, proportion_band


def cell_band(ctx: CheckContext, check: CheckSpec, metric: MetricSpec, selection: Selector,
              exact_at_bounds: bool) -> tuple[Band, frozenset[str]]:
    """The selection's band and the points that fed it. exact_at_bounds: a share with no event
    (or only events) in every repetition is tested on its pooled counts (stats/equivalence.py)."""
    if check.trials is None:
        samples = [s for s in ctx.data.samples(metric, selection) if ctx.keep is None or s.repetition in ctx.keep]
        return mean_band([s.value for s in samples]), frozenset(s.point_id for s in samples)
    events, trials, points = _counts(ctx, check, metric, selection)
    band = proportion_band(events, trials)
    if band.exact is not None and not exact_at_bounds:
        k, n = band.exact
        band = Band(None, "logit", band.n, f"{k} of {n} in every repetition alike: a fixed share, nothing to test")
    return band, points


def _counts(ctx: CheckContext, check: CheckSpec, metric: MetricSpec,
            selection: Selector) -> tuple[list[float], list[float], frozenset[str]]:
    where = {**metric.where, **selection}
    groups: dict[tuple[str, str], list] = {}
    for row in ctx.data.rows(metric.kind):
        if matches(row, where) and (ctx.keep is None or row.get("repetition") in ctx.keep):
            groups.setdefault((row.get("point_id", ""), row.get("repetition", "")), []).append(row)
    events, trials = [], []
    if check.trials == "divide_by":
        column, operand_where = metric.operand()
        below = {**where, **operand_where}
        denominators: dict[tuple[str, str], list] = {}
        for row in ctx.data.rows(metric.kind):
            if matches(row, below):
                denominators.setdefault((row.get("point_id", ""), row.get("repetition", "")), []).append(row)
        for key, rows in groups.items():
            k = reduce_rows(rows, metric.column, metric.per_repetition)
            n = reduce_rows(denominators.get(key, []), column, metric.per_repetition) if column else None
            if k is not None and n:
                events.append(k), trials.append(n)
    else:
        for rows in groups.values():
            pairs = [(r.number(metric.column), r.number(check.trials)) for r in rows]
            pairs = [(pct * metric.scale / 100 * n, n) for pct, n in pairs if pct is not None and n]
            if pairs:
                events.append(sum(k for k, _ in pairs)), trials.append(sum(n for _, n in pairs))
    return events, trials, frozenset(p for p, _ in groups)
