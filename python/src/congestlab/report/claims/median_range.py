"""Rule `range`: the cell's (geometric) median lies in [lo, hi], a magnitude check of one cell
(stats/location.py, level_effect); with `trials`, the cell's share of counted events lies in
[lo, hi] % (stats/equivalence.py: logit scale, quasi-binomial over the repetitions; no event, or
only events, in every repetition: the exact binomial on the pooled counts). With `seed_n` the
range is the seed's, its own error allowed for (stats/replication.py).
"""

from __future__ import annotations

import math
from dataclasses import replace

from congestlab.report.claims.bands import cell_band
from congestlab.report.claims.check import NOT_MEASURED, CheckContext, CheckResult, descriptive, untested
from congestlab.report.claims.formatting import fmt_cell, numbers
from congestlab.spec.metric import MetricSpec, Selector
from congestlab.spec.report import CheckSpec
from congestlab.stats import replication
from congestlab.stats.equivalence import ci_text, within
from congestlab.stats.location import level_effect
from congestlab.stats.rules import raw_magnitude


def decide_range(ctx: CheckContext, check: CheckSpec, metric: MetricSpec, selection: Selector,
                 label: str) -> CheckResult:
    if check.trials is not None:
        return _proportion(ctx, check, metric, selection, label)
    ec = ctx.cell(metric, selection)
    lo, hi = check.range
    ours = fmt_cell(ec.cell, metric.digits)
    if not ec.cell.n:
        return CheckResult(label, NOT_MEASURED, ours, "", "no samples", points=ec.points)
    rule = (f"the median lies in {lo:g}..{hi:g} {metric.unit}: its CI lies inside the range; does not hold when "
            f"the CI lies wholly outside (reason: {check.reason})")
    if not ec.positive:
        v = untested(rule, ctx.alpha, ec.cell.n, "values <= 0: no log-normal median")
        return CheckResult(label, v.verdict, ours, "", numbers(v), v, ec.points)
    if len(ec.cell.completed()) < 2 and not ec.cell.censored:
        return descriptive(label, ours, "", f"{len(ec.cell.completed())} sample(s): no spread to test with",
                           ec.points)
    e = level_effect(ec.cell)
    v = raw_magnitude(e, math.log(lo), math.log(hi), rule, ctx.alpha, label)
    if check.seed_n is not None and e.determined:
        p_holds, p_fails, (wlo, whi) = replication.range_p_values(e.estimate, e.se, e.df, math.log(lo), math.log(hi),
                                                                  e.sd_pair, check.seed_n)
        verdict = "does not hold" if p_fails < ctx.alpha else "holds" if p_holds < ctx.alpha else "inconclusive"
        v = replace(v, verdict=verdict, p_holds=p_holds, p_fails=p_fails, interval=(wlo, whi),
                    note=f"the seed's range with its error (n = {check.seed_n}): holds inside "
                         f"{math.exp(wlo):.{metric.digits}f}..{math.exp(whi):.{metric.digits}f} {metric.unit}")
    if e.determined:
        ci = e.ci(1 - 2 * ctx.alpha)
        ours += f"; median {math.exp(e.estimate):.{metric.digits}f} [{math.exp(ci[0]):.{metric.digits}f}, " \
                f"{math.exp(ci[1]):.{metric.digits}f}]"
    return CheckResult(label, v.verdict, ours, "", numbers(v), v, ec.points)


def _proportion(ctx: CheckContext, check: CheckSpec, metric: MetricSpec, selection: Selector,
                label: str) -> CheckResult:
    lo, hi = check.range
    band, points = cell_band(ctx, check, metric, selection, exact_at_bounds=True)
    stats = ctx.stats(metric, selection)
    if not band.n:
        return CheckResult(label, NOT_MEASURED, "–", "", "no samples", points=points)
    ours = f"{stats.mean:.{metric.digits}f} % mean of {stats.n} (n={band.n} repetitions)" if stats.n else "–"
    if band.effect is None and band.exact is None:
        return descriptive(label, ours, "", band.descriptive, points)
    if band.effect is not None:
        ours += f"; pooled share {ci_text(band, ctx.alpha, metric.digits)} %"
    rule = (f"the share lies in {lo:g}..{hi:g} %: its CI inside the range (TOST on the logit scale, quasi-binomial "
            f"over the repetitions); does not hold when wholly outside (reason: {check.reason})")
    v = within(band, lo, hi, ctx.alpha, rule, label, check.seed_n)
    return CheckResult(label, v.verdict, ours, "", numbers(v), v, points)
