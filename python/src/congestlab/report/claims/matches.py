"""Rule `matches`: the cell lies within `tolerance_pct` of `expected` (a number, or the seed's
published value for that cell): an equivalence test (TOST) of the band
[expected (1 - t), expected (1 + t)] on the cell's own scale (stats/equivalence.py): the mean of
its repetitions (Student t), or with `trials` a share of counted events (logit, quasi-binomial
over the repetitions). With `seed_n` the seed's own error widens it (stats/replication.py). A
cell that cannot be tested (one repetition, a fixed value) is descriptive.
"""

from __future__ import annotations

from congestlab.report.claims.bands import cell_band
from congestlab.report.claims.check import NOT_MEASURED, CheckContext, CheckResult, descriptive
from congestlab.report.claims.formatting import fmt_stats, numbers
from congestlab.spec.metric import MetricSpec, Selector
from congestlab.spec.report import CheckSpec
from congestlab.stats.equivalence import ci_text, within


def decide_matches(ctx: CheckContext, check: CheckSpec, metric: MetricSpec, selection: Selector,
                   label: str) -> CheckResult:
    stats = ctx.stats(metric, selection)
    published = ctx.data.published_value(check.metric, selection)
    expected = published if check.expected == "published" else check.expected
    seed = "" if published is None else f"{published:g}"
    band, points = cell_band(ctx, check, metric, selection, exact_at_bounds=False)
    if not stats.n:
        return CheckResult(label, NOT_MEASURED, "–", seed, "no samples", points=points)
    ours = fmt_stats(stats, metric.digits)
    if expected is None:
        return CheckResult(label, NOT_MEASURED, ours, seed, "the seed gives no value here", points=points)
    if band.effect is None and band.exact is None:
        return descriptive(label, ours, seed or f"{expected:g}", band.descriptive, points)
    tol = check.tolerance_pct / 100
    lo, hi = expected - abs(expected) * tol, expected + abs(expected) * tol
    scale = ("the proportion, logit scale (quasi-binomial over the repetitions)" if check.trials
             else "the mean, Student t over the repetitions")
    rule = (f"within ±{check.tolerance_pct:g} % of {expected:g} ({lo:.{metric.digits}f}..{hi:.{metric.digits}f}): "
            f"TOST on {scale}; does not hold: the CI wholly outside (reason: {check.reason})")
    v = within(band, lo, hi, ctx.alpha, rule, label, check.seed_n)
    if check.trials and band.effect is not None:
        ours += f"; share {ci_text(band, ctx.alpha, metric.digits)} %"
    return CheckResult(label, v.verdict, ours, seed or f"{expected:g}", numbers(v), v, points)
