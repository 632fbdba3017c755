"""Rule `compare`: a <relation> b on the effect log(median a / median b) (stats/median_ratio.py),
or with `range` on a - b paired by repetition (stats/location.py); the seed's own two numbers
beside ours. `factor`: a more than k times b (stats/factor.py). A range with `seed_n` is the
seed's, its own error allowed for (stats/replication.py). One sample a side: descriptive.
"""

from __future__ import annotations

import math
from dataclasses import replace

from congestlab.report.claims.check import NOT_MEASURED, CheckContext, CheckResult, descriptive, effect
from congestlab.report.claims.formatting import fmt_cell, fmt_num, numbers, short
from congestlab.report.data import RunData
from congestlab.spec.metric import MetricSpec, Selector
from congestlab.spec.report import CheckSpec
from congestlab.stats import replication
from congestlab.stats.effect import Effect, from_percent
from congestlab.stats.factor import beyond_factor
from congestlab.stats.location import paired_difference
from congestlab.stats.rules import (FAILS, HOLDS, INCONCLUSIVE, Verdict, at_least, at_most, direction, equivalence,
                                    magnitude, raw_magnitude)


def seed_agrees(pa: float, pb: float, check: CheckSpec) -> bool:
    """Do the seed's own two numbers go the way its words say (one value each, no test)?"""
    if check.range_pct is not None and pb:
        return check.range_pct[0] <= (pa / pb - 1) * 100 <= check.range_pct[1]
    if check.factor is not None and pb:
        return pa > check.factor * pb if check.relation == ">" else pa < pb / check.factor
    if check.range is not None:
        return check.range[0] <= pa - pb <= check.range[1]
    if check.relation == "~":
        return pb != 0 and abs(pa / pb - 1) * 100 <= (check.margin_pct or 0)
    margin = (check.margin_pct or 0) / 100
    return {">": pa > pb, "<": pa < pb, ">=": pa >= pb * (1 - margin), "<=": pa <= pb * (1 + margin)}[check.relation]


def _seed_pair(data: RunData, metric_name, sel_a, sel_b, name_a, name_b, check: CheckSpec) -> str:
    pa, pb = data.published_value(metric_name, sel_a), data.published_value(metric_name, sel_b)
    if pa is None and pb is None:
        return ""
    fa = "–" if pa is None else f"{pa:g}"
    fb = "–" if pb is None else f"{pb:g}"
    text = f"{name_a} {fa}, {name_b} {fb}"
    if pa is not None and pb is not None and not seed_agrees(pa, pb, check):
        text += " (the seed's own numbers go the other way)"
    return text


def decide_compare(ctx: CheckContext, check: CheckSpec, metric: MetricSpec, selection: Selector,
                   label: str) -> CheckResult:
    sel_a, sel_b = {**selection, **check.a}, {**selection, **check.b}
    a, b = ctx.cell(metric, sel_a), ctx.cell(metric, sel_b)
    name_a, name_b = short(check.a) or "a", short(check.b) or "b"
    ours = f"{name_a} {fmt_cell(a.cell, metric.digits)} vs {name_b} {fmt_cell(b.cell, metric.digits)}"
    seed = _seed_pair(ctx.data, check.metric, sel_a, sel_b, name_a, name_b, check)
    points = a.points | b.points
    if not a.cell.n or not b.cell.n:
        return CheckResult(label, NOT_MEASURED, ours, seed, "a side has no samples", points=points)
    if a.cell.n < 2 and b.cell.n < 2:
        return descriptive(label, ours, seed, "one sample a side: no spread to compare with", points)
    alpha = ctx.alpha
    if check.range is not None:
        lo, hi = check.range
        e = paired_difference(a.cell, b.cell)
        v = raw_magnitude(e, lo, hi, f"{name_a} − {name_b} within {lo:g}..{hi:g} {metric.unit} in every cell, "
                          f"paired by repetition: the CI lies inside the range (reason: {check.reason})", alpha, label)
        v = _with_seed_error(v, e, lo, hi, check.seed_n, alpha, lambda x: f"{x:.{metric.digits}f} {metric.unit}")
        if e.determined:
            ci = e.ci(1 - 2 * alpha)
            ours += f"; difference {e.estimate:+.{metric.digits}f} [{fmt_num(ci[0], metric.digits)}, " \
                    f"{fmt_num(ci[1], metric.digits)}] {metric.unit}"
    else:
        e = effect(a, b)
        if check.range_pct is not None:
            v = magnitude(e, check.range_pct[0], check.range_pct[1], alpha, label)
            v = replace(v, rule=v.rule + f" (reason: {check.reason})")
            v = _with_seed_error(v, e, from_percent(check.range_pct[0]), from_percent(check.range_pct[1]),
                                 check.seed_n, alpha, lambda x: f"{(math.exp(x) - 1) * 100:+.1f} %")
        elif check.factor is not None:
            v = beyond_factor(e, check.factor, check.relation == ">", alpha, label)
        elif check.relation in (">", "<"):
            v = direction(e, check.relation == ">", alpha, label)
        elif check.relation == "~":
            v = equivalence(e, check.margin_pct, alpha, label)
        elif check.relation == ">=":
            v = at_least(e, check.margin_pct, alpha, label)
        else:
            v = at_most(e, check.margin_pct, alpha, label)
        if check.margin_pct is not None and check.relation in ("~", ">=", "<=") and check.range_pct is None:
            v = replace(v, rule=v.rule + f" (reason: {check.reason})")
    return CheckResult(label, v.verdict, ours, seed, numbers(v), v, points)


def _with_seed_error(v: Verdict, e: Effect, lo: float, hi: float, seed_n, alpha: float, show) -> Verdict:
    """A seed's range with the seed's own error allowed for (stats/replication.py), when the
    check gives the seed's n and the effect has a spread to stand in for the seed's (with
    censored samples the engine's own test stands: stats/median_ratio.py)."""
    if seed_n is None or not e.determined or not math.isfinite(e.sd_pair) or sum(e.censored):
        return v
    p_holds, p_fails, (wlo, whi) = replication.range_p_values(e.estimate, e.se, e.df, lo, hi, e.sd_pair, seed_n)
    verdict = FAILS if p_fails < alpha else HOLDS if p_holds < alpha else INCONCLUSIVE
    note = f"the seed's range with its error (n = {seed_n}): holds inside {show(wlo)}..{show(whi)}"
    return replace(v, verdict=verdict, p_holds=p_holds, p_fails=p_fails, interval=(wlo, whi),
                   note="; ".join(filter(None, [v.note, note])))
