"""Rule `best`: the cells are the combinations of the `among` dimensions' values. With `a`: cell
a is better than every other cell (intersection-union; does not hold when another is
significantly better, Holm). With `along`: no cell is consistently the best, i.e. better than
every other at every value of `along` (stats/consistently_best.py: every cell significantly
beaten somewhere; does not hold when one is significantly best everywhere).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

from congestlab.report.claims.check import NOT_MEASURED, CheckContext, CheckResult, effect, untested, without_outcome
from congestlab.report.claims.formatting import fmt_cell, numbers, short
from congestlab.report.data import EngineCell, matches
from congestlab.spec.metric import MetricSpec, Selector
from congestlab.spec.report import CheckSpec
from congestlab.stats.outcomes import TIMED_OUT
from congestlab.stats.consistently_best import no_cell_consistently_best
from congestlab.stats.rules import FAILS, direction, every_cell
from congestlab.stats.samples import RIGHT


def _cells_among(ctx: CheckContext, check: CheckSpec, metric: MetricSpec,
                 selection: Selector) -> list[tuple[dict, EngineCell]]:
    """(cell coordinates, cell) for every combination of the `among` values the selection has samples of."""
    where = without_outcome(metric, {**metric.where, **selection})
    lists = [ctx.data.values(dim, [metric.kind], where) for dim in check.among]
    coords = [dict(zip(check.among, vals)) for vals in itertools.product(*lists)]
    out = [(c, ctx.cell(metric, {**selection, **c})) for c in coords]
    return [(c, ec) for c, ec in out if ec.cell.n]


def _typical(ec: EngineCell) -> float:
    """For naming the best cell only: the mean of completed samples, or the bound of a cell
    whose samples are all censored."""
    done = ec.cell.completed()
    if done:
        return sum(done) / len(done)
    limits = [lim for lim, o in zip(ec.cell.limits, ec.cell.outcomes) if o == TIMED_OUT]
    return max(limits) if ec.cell.censoring == RIGHT and limits else min(limits) if limits else math.nan


def decide_best(ctx: CheckContext, check: CheckSpec, metric: MetricSpec, selection: Selector,
                label: str) -> CheckResult:
    highest = check.best == "highest"
    alpha = ctx.alpha
    if check.a:
        cells = _cells_among(ctx, check, metric, selection)
        points = frozenset().union(*(ec.points for _, ec in cells)) if cells else frozenset()
        claimed = [(c, ec) for c, ec in cells if all(matches(c, {k: v}) for k, v in check.a.items())]
        if not claimed:
            return CheckResult(label, NOT_MEASURED, "–", "", "no samples of the claimed cell", points=points)
        coords_a, cell_a = claimed[0]
        others = [(c, ec) for c, ec in cells if c != coords_a]
        if not others:
            return CheckResult(label, NOT_MEASURED, "–", "", "no other cell to compare with", points=points)
        top = (max if highest else min)(cells, key=lambda cec: _typical(cec[1]))
        ours = f"{short(check.a)} {fmt_cell(cell_a.cell, metric.digits)}; the {check.best} mean " \
               f"{short(top[0])} of {len(cells)} cells"
        verdicts = [direction(effect(cell_a, ec), highest, alpha, short(c)) for c, ec in others]
        v = every_cell(verdicts, alpha=alpha, rule=(
            f"{short(check.a)} {'above' if highest else 'below'} each of the {len(others)} other cells "
            f"(CI of log(a/other) excludes 0, every one: intersection–union); does not hold: another cell "
            f"significantly {'above' if highest else 'below'} it (Holm)"), label=label)
        worse = [c.label for c in v.cells if c.verdict == FAILS]
        if worse:
            v = replace(v, note="significantly better: " + ", ".join(worse))
        return CheckResult(label, v.verdict, ours, "", numbers(v), v, points)
    levels = ctx.data.values(check.along, [metric.kind], without_outcome(metric, {**metric.where, **selection}))
    by_level: dict = {}
    winners = []
    points: frozenset[str] = frozenset()
    for value in levels:
        cells = _cells_among(ctx, check, metric, {**selection, check.along: value})
        if cells:
            by_level[value] = {short(c): ec.cell for c, ec in cells}
            points |= frozenset().union(*(ec.points for _, ec in cells))
            winners.append((value, short((max if highest else min)(cells, key=lambda cec: _typical(cec[1]))[0])))
            if not all(ec.positive for _, ec in cells):
                v = untested("no cell consistently the best", alpha, note="values <= 0: no ratio to rank by")
                return CheckResult(label, v.verdict, "", "", numbers(v), v, points)
    ours = "; ".join(f"{v}: {c}" for v, c in winners) or "–"
    if not winners:
        return CheckResult(label, NOT_MEASURED, ours, "", "no samples")
    if len(winners) < 2:
        v = untested(f"one value of {check.along}: no cell can be beaten elsewhere", alpha)
        return CheckResult(label, v.verdict, ours, "", numbers(v), v, points)
    v = no_cell_consistently_best(by_level, check.best, alpha, label)
    return CheckResult(label, v.verdict, f"the {check.best} mean per {check.along}: {ours}", "", numbers(v), v, points)
