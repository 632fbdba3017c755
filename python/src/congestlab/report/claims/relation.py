"""Rule `compare`: a <relation> b on the effect log(median a / median b) (stats/median_ratio.py),
or with `range` on a - b paired by repetition (stats/location.py); the seed's own two numbers
beside ours.
"""

from __future__ import annotations

from dataclasses import replace

from congestlab.report.claims.check import NOT_MEASURED, CheckContext, CheckResult, effect
from congestlab.report.claims.formatting import fmt_cell, fmt_num, numbers, short
from congestlab.report.data import RunData
from congestlab.spec.metric import MetricSpec, Selector
from congestlab.spec.report import CheckSpec
from congestlab.stats.location import paired_difference
from congestlab.stats.rules import at_least, at_most, direction, equivalence, magnitude, raw_magnitude


def seed_agrees(pa: float, pb: float, check: CheckSpec) -> bool:
    """Do the seed's own two numbers go the way its words say (one value each, no test)?"""
    if check.range_pct is not None and pb:
        return check.range_pct[0] <= (pa / pb - 1) * 100 <= check.range_pct[1]
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
    alpha = ctx.alpha
    if check.range is not None:
        lo, hi = check.range
        e = paired_difference(a.cell, b.cell)
        v = raw_magnitude(e, lo, hi, f"{name_a} − {name_b} within {lo:g}..{hi:g} {metric.unit} in every cell, "
                          f"paired by repetition: the CI lies inside the range (reason: {check.reason})", alpha, label)
        if e.determined:
            ci = e.ci(1 - 2 * alpha)
            ours += f"; difference {e.estimate:+.{metric.digits}f} [{fmt_num(ci[0], metric.digits)}, " \
                    f"{fmt_num(ci[1], metric.digits)}] {metric.unit}"
    else:
        e = effect(a, b)
        if check.range_pct is not None:
            v = magnitude(e, check.range_pct[0], check.range_pct[1], alpha, label)
            v = replace(v, rule=v.rule + f" (reason: {check.reason})")
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
