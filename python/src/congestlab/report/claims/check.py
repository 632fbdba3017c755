"""What every rule of report/claims/ works with: the context a check reads its cells through
(only the repetitions of a sequential look, when given), the result it returns, and the helpers
several rules share.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Collection

from congestlab.report.data import EngineCell, RunData, Stats
from congestlab.stored import norm
from congestlab.spec.metric import MetricSpec, Selector
from congestlab.spec.report import CheckSpec
from congestlab.stats.effect import Effect
from congestlab.stats.gehan import rank_effect
from congestlab.stats.median_ratio import compare
from congestlab.stats.outcomes import COMPLETE
from congestlab.stats.rules import DESCRIPTIVE, INCONCLUSIVE, Verdict

NOT_MEASURED = "not measured"


@dataclass
class CheckResult:
    """One check on one combination of for_each values."""

    label: str
    verdict: str
    ours: str
    seed: str = ""
    detail: str = ""                      # how it was decided: the numbers and the rule in words
    decision: Verdict | None = None       # the engine's verdict (after the claim's Holm adjustment)
    points: frozenset[str] = frozenset()  # the point ids whose samples fed it
    rounds_needed: int | None = None      # inconclusive: rounds (repetitions) a power estimate says decide it


class CheckContext:
    """A check's view of the run: its cells and samples, only those of `repetitions` when given
    (the rounds of a sequential look); `alpha` the level of each one-sided test."""

    def __init__(self, data: RunData, alpha: float, repetitions: Collection[str] | None):
        self.data, self.alpha = data, alpha
        self.keep = None if repetitions is None else {norm(r) for r in repetitions}

    def cell(self, metric: MetricSpec, selection: Selector) -> EngineCell:
        ec = self.data.cell(metric, selection)
        if self.keep is None:
            return ec
        cell = ec.cell.first_blocks(self.keep)
        return EngineCell(cell, ec.points if len(cell) else frozenset(), ec.positive)

    def stats(self, metric: MetricSpec, selection: Selector) -> Stats:
        samples = self.data.samples(metric, selection)
        return Stats([s.value for s in samples if self.keep is None or s.repetition in self.keep])


# a rule: (context, check, metric, selection, label) -> the check's result on that selection
Rule = Callable[[CheckContext, CheckSpec, MetricSpec, Selector, str], CheckResult]


def untested(rule: str, alpha: float, n: int = 0, note: str = "") -> Verdict:
    """A check whose test has nothing to decide on (values <= 0 without a ratio, one value of
    a dimension that must vary): inconclusive, p 1 on both sides."""
    return Verdict(INCONCLUSIVE, rule, math.nan, (math.nan, math.nan), 1.0, 1.0, n, 0, 0, alpha, note=note)


def descriptive(label: str, ours: str, seed: str, why: str, points: frozenset[str] = frozenset()) -> CheckResult:
    """A check that cannot be tested at its n (a single sample, a deterministic count): shown
    with its numbers, apart from the tested ones; it never reads "holds"."""
    return CheckResult(label, DESCRIPTIVE, ours, seed, f"descriptive, not tested: {why}", None, points)


def without_outcome(metric: MetricSpec, where: Selector) -> Selector:
    """A selection of GETs of any outcome: a cell whose GETs all timed out is still a cell."""
    if metric.kind != "request":
        return where
    return {k: v for k, v in where.items() if not (k == "outcome" and v == COMPLETE) and not (k == "ok" and v is True)}


def cells_along(ctx: CheckContext, check: CheckSpec, metric: MetricSpec, selection: Selector):
    where = without_outcome(metric, {**metric.where, **selection})
    values = ctx.data.values(check.along, [metric.kind], where)
    if check.along in selection:
        wanted = selection[check.along]
        wanted = {norm(w) for w in (wanted if isinstance(wanted, list) else [wanted])}
        values = [v for v in values if v in wanted]
    cells = [(v, ctx.cell(metric, {**selection, check.along: v})) for v in values]
    return [(v, c) for v, c in cells if c.cell.n]


def effect(a: EngineCell, b: EngineCell) -> Effect:
    """The engine's effect log(a/b); for cells with values <= 0 (no ratio) an undetermined
    effect whose direction Gehan's permutation test decides (margins stay undecided)."""
    if a.positive and b.positive:
        return compare(a.cell, b.cell)
    return rank_effect(a.cell, b.cell)
