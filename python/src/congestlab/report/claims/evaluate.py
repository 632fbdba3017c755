"""A claim's verdict: each of its checks (one per `for_each` combination of each part) decided
by its rule, then combined by stats.rules.every_cell (intersection-union; Holm over the checks'
"does not hold"), with its coverage and the rounds a power estimate says decide it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Collection

from congestlab.report.claims.best import decide_best
from congestlab.report.claims.check import NOT_MEASURED, CheckContext, CheckResult, Rule, without_outcome
from congestlab.report.claims.formatting import describe, short
from congestlab.report.claims.matches import decide_matches
from congestlab.report.claims.median_range import decide_range
from congestlab.report.claims.monotone import decide_monotone
from congestlab.report.claims.relation import decide_compare
from congestlab.report.claims.shape import decide_shape
from congestlab.report.claims.share import decide_share
from congestlab.report.data import RunData, matches
from congestlab.stored import norm
from congestlab.spec.metric import MetricSpec
from congestlab.spec.report import CheckSpec, ClaimSpec
from congestlab.stats.power import rounds_needed_for_verdict
from congestlab.stats.rules import FAILS, HOLDS, INCONCLUSIVE, Verdict, every_cell

RULES: dict[str, Rule] = {"compare": decide_compare, "range": decide_range, "matches": decide_matches,
                          "monotone": decide_monotone, "shape": decide_shape, "share": decide_share,
                          "best": decide_best}


@dataclass
class ClaimResult:
    claim: ClaimSpec
    verdict: str
    checks: list[CheckResult] = field(default_factory=list)
    decision: Verdict | None = None

    @property
    def property_failed(self) -> bool:
        return self.claim.property and self.verdict == FAILS

    @property
    def coverage(self) -> str:
        measured = sum(c.verdict != NOT_MEASURED for c in self.checks)
        return f"{measured}/{len(self.checks)}"

    @property
    def points(self) -> frozenset[str]:
        """The point ids that feed the claim (for repetitions until decisive)."""
        return frozenset().union(*(c.points for c in self.checks)) if self.checks else frozenset()

    @property
    def rounds_needed(self) -> int | None:
        """For an inconclusive claim: the repetitions at which the claim itself decides with 80 %
        power (stats/power.py, rounds_needed_for_verdict on its every_cell verdict: every undecided
        check holding, or one failing at Holm's level); None when decided or when an undecided
        check that matters has no estimate."""
        if self.verdict != INCONCLUSIVE or self.decision is None:
            return None
        return rounds_needed_for_verdict(self.decision)


def combine(verdicts: list[str]) -> str:
    """The claim's verdict from decided check verdicts (the checks already Holm-adjusted)."""
    measured = [v for v in verdicts if v != NOT_MEASURED]
    if not measured:
        return NOT_MEASURED
    if FAILS in measured:
        return FAILS
    if INCONCLUSIVE in measured:
        return INCONCLUSIVE
    return HOLDS


def evaluate_claims(data: RunData, alpha: float | None = None,
                    repetitions: Collection[str] | None = None) -> list[ClaimResult]:
    """Every declared claim. alpha: the level of each one-sided test (default: each check's
    alpha / 2), e.g. a sequential look's nominal level; repetitions: only these (as
    results/*.csv write them), e.g. the rounds done at a look."""
    return [evaluate_claim(data, claim, alpha, repetitions) for claim in data.report.claims]


def evaluate_claim(data: RunData, claim: ClaimSpec, alpha: float | None = None,
                   repetitions: Collection[str] | None = None) -> ClaimResult:
    results: list[CheckResult] = []
    for check in claim.checks():
        results.extend(run_check(data, check, alpha, repetitions))
    measured = [r for r in results if r.verdict != NOT_MEASURED and r.decision is not None]
    if not measured:
        return ClaimResult(claim, combine([r.verdict for r in results]), results)
    side = alpha if alpha is not None else claim.checks()[0].alpha / 2
    combined = every_cell([r.decision for r in measured], alpha=side)
    for r, adjusted in zip(measured, combined.cells):
        if adjusted.verdict != r.verdict:
            r.detail += f"; after Holm over the claim's {len(measured)} checks: {adjusted.verdict}"
        r.verdict, r.decision = adjusted.verdict, adjusted
        # a check's "does not hold" is Holm-adjusted over the claim's checks: its power at that level
        r.rounds_needed = (rounds_needed_for_verdict(adjusted, tests=len(measured))
                           if adjusted.verdict == INCONCLUSIVE else None)
    return ClaimResult(claim, combined.verdict, results, combined)


def run_check(data: RunData, check: CheckSpec, alpha: float | None = None,
              repetitions: Collection[str] | None = None) -> list[CheckResult]:
    ctx = CheckContext(data, alpha if alpha is not None else check.alpha / 2, repetitions)
    metric = data.report.metrics[check.metric]
    combos = _combinations(data, metric, check)
    if not combos:
        label = check.label or describe(check.where)
        return [CheckResult(label, NOT_MEASURED, "no results for this selection")]
    if check.rule == "matches" and check.expected == "published":
        # only the cells the seed gives a number for
        stated = [c for c in combos if data.published_value(check.metric, {**check.where, **c}) is not None]
        combos = stated or combos
    rule = RULES[check.rule]
    out = []
    for combo in combos:
        selection = {**check.where, **combo}
        label = ", ".join(filter(None, [check.label, short(combo)])) or short(check.where) or check.rule
        out.append(rule(ctx, check, metric, selection, label))
    return out


def _combinations(data: RunData, metric: MetricSpec, check: CheckSpec) -> list[dict]:
    if not check.for_each:
        return [{}]
    where = {**metric.where, **check.where}
    lists = []
    for dim in check.for_each:
        if dim in where and isinstance(where[dim], list):
            values = [norm(v) for v in where[dim]]
        elif dim in where:
            values = [norm(where[dim])]
        else:
            values = data.values(dim, [metric.kind], without_outcome(metric, where))
        lists.append(values)
    combos = [dict(zip(check.for_each, vals)) for vals in itertools.product(*lists)]
    # keep combinations the run has any record of (a Cartesian product of two dimensions
    # may name cells that no point has; a compare's cells are its a and b selections); if
    # none, keep all so that they show as not measured
    sides = [check.a, check.b] if check.rule == "compare" else [{}]
    rows = data.rows(metric.kind)
    loose = without_outcome(metric, where)
    present = [c for c in combos if any(matches(r, {**loose, **c, **side}) for side in sides for r in rows)]
    return present or combos
