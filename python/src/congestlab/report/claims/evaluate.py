"""A claim's verdict: each of its checks (one per declared `for_each` combination of each part)
decided by its rule, then combined by stats.rules.every_cell (intersection-union; Holm over the
checks' "does not hold"); a part with quantifier "some" first combines its own checks by
stats/some_cell.py (Holm over them on the "holds" side) and enters as one. With its coverage
against the declaration (coverage.py) and the rounds a power estimate says decide it.

What cannot make a claim "hold": a declared check the run did not measure, a planned
repetition that did not run (coverage.py), a check that is only descriptive (no test at its
n). Such a claim reads "inconclusive" where its tested checks all hold, and lists why; a claim
whose checks are all descriptive reads "descriptive"; one with nothing measured "not measured".
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Collection

from congestlab.report.claims.best import decide_best
from congestlab.report.claims.check import NOT_MEASURED, CheckContext, CheckResult, Rule
from congestlab.report.claims.coverage import declared_combinations, missing_repetitions
from congestlab.report.claims.formatting import describe, short
from congestlab.report.claims.matches import decide_matches
from congestlab.report.claims.median_range import decide_range
from congestlab.report.claims.monotone import decide_monotone
from congestlab.report.claims.relation import decide_compare
from congestlab.report.claims.shape import decide_shape
from congestlab.report.claims.share import decide_share
from congestlab.report.data import RunData
from congestlab.spec.report import CheckSpec, ClaimSpec
from congestlab.stats.power import rounds_needed_for_verdict
from congestlab.stats.rules import DESCRIPTIVE, FAILS, HOLDS, INCONCLUSIVE, Verdict, every_cell
from congestlab.stats.some_cell import some_cell

RULES: dict[str, Rule] = {"compare": decide_compare, "range": decide_range, "matches": decide_matches,
                          "monotone": decide_monotone, "shape": decide_shape, "share": decide_share,
                          "best": decide_best}
UNTESTED = (NOT_MEASURED, DESCRIPTIVE)


@dataclass
class ClaimResult:
    claim: ClaimSpec
    verdict: str
    checks: list[CheckResult] = field(default_factory=list)
    decision: Verdict | None = None
    gaps: list[str] = field(default_factory=list)  # declared but not measured: checks, repetitions
    # a run --until-decisive: the sequential procedure's verdict (report/sequential_view.py);
    # then `verdict` is that one and `reread` this evaluation's, at a fixed level
    sequential: dict | None = None
    reread: str | None = None

    @property
    def property_failed(self) -> bool:
        return self.claim.property and self.verdict == FAILS

    @property
    def tested(self) -> int:
        return sum(c.verdict not in UNTESTED for c in self.checks)

    @property
    def coverage(self) -> str:
        """Checks tested of those declared (descriptive and unmeasured ones are not)."""
        return f"{self.tested}/{len(self.checks)}"

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


def evaluate_claims(data: RunData, alpha: float | None = None,
                    repetitions: Collection[str] | None = None) -> list[ClaimResult]:
    """Every declared claim. alpha: the level of each one-sided test (default: each check's
    alpha / 2), e.g. a sequential look's nominal level; repetitions: only these (as
    results/*.csv write them), e.g. the rounds done at a look."""
    return [evaluate_claim(data, claim, alpha, repetitions) for claim in data.report.claims]


def evaluate_claim(data: RunData, claim: ClaimSpec, alpha: float | None = None,
                   repetitions: Collection[str] | None = None, checks_rounds: bool = True) -> ClaimResult:
    """`checks_rounds`: each inconclusive check's own power estimate (the report's); a
    sequential look (decisive/claims.py) wants the verdict, and the claim's need at the design's
    level, not each check's at the look's."""
    side = alpha if alpha is not None else claim.checks()[0].alpha / 2
    results: list[CheckResult] = []
    units: list[tuple[Verdict, list[CheckResult]]] = []  # what every_cell combines, and the checks behind each
    gaps: list[str] = []
    for check in claim.checks():
        found = run_check(data, check, alpha, repetitions)
        results.extend(found)
        tested = [r for r in found if r.verdict not in UNTESTED and r.decision is not None]
        missing = [r.label for r in found if r.verdict in UNTESTED]
        if check.quantifier == "some":
            if tested:
                units.append((_some(tested, missing, side, check), tested))
        else:
            units += [(r.decision, [r]) for r in tested]
            gaps += [r.label for r in found if r.verdict == NOT_MEASURED]
    result = ClaimResult(claim, NOT_MEASURED, results)
    result.gaps = gaps + missing_repetitions(data, result.points)
    if not units:
        result.verdict = DESCRIPTIVE if any(r.verdict == DESCRIPTIVE for r in results) else NOT_MEASURED
        return result
    combined = every_cell([u for u, _ in units], alpha=side)
    for (unit, checks), adjusted in zip(units, combined.cells):
        if len(checks) == 1 and unit is checks[0].decision:
            r = checks[0]
            if adjusted.verdict != r.verdict:
                r.detail += f"; after Holm over the claim's {len(units)} checks: {adjusted.verdict}"
            r.verdict, r.decision = adjusted.verdict, adjusted
            # a check's "does not hold" is Holm-adjusted over the claim's checks: its power at that level
            r.rounds_needed = (rounds_needed_for_verdict(adjusted, tests=len(units))
                               if adjusted.verdict == INCONCLUSIVE and checks_rounds else None)
        elif adjusted.verdict != unit.verdict:
            checks[0].detail += f"; the part's verdict after Holm over the claim's {len(units)} parts and checks: " \
                                f"{adjusted.verdict}"
    result.decision, result.verdict = combined, combined.verdict
    untested = [r for r in results if r.verdict == DESCRIPTIVE]
    if result.verdict == HOLDS and (result.gaps or untested):
        result.verdict = INCONCLUSIVE  # the tested checks hold; the rest was not shown
    return result


def _some(tested: list[CheckResult], missing: list[str], alpha: float, check: CheckSpec) -> Verdict:
    """A part that needs only some of its checks (stats/some_cell.py), as one unit of the claim;
    its checks carry their Holm-adjusted verdicts. An untested check keeps it from "does not
    hold" (that needs every one)."""
    part = some_cell([r.decision for r in tested], alpha, label=check.label)
    for r, cell in zip(tested, part.cells):
        if cell.verdict != r.verdict:
            r.detail += f"; after Holm over the part's {len(tested)} checks (for some of them): {cell.verdict}"
        r.verdict, r.decision = cell.verdict, cell
    if part.verdict == FAILS and missing:
        part = replace(part, verdict=INCONCLUSIVE, p_fails=1.0, note=f"not tested: {', '.join(missing)}")
    return replace(part, cells=())  # power has no estimate for a union (stats/power.py reads cells as every_cell's)


def run_check(data: RunData, check: CheckSpec, alpha: float | None = None,
              repetitions: Collection[str] | None = None) -> list[CheckResult]:
    ctx = CheckContext(data, alpha if alpha is not None else check.alpha / 2, repetitions)
    metric = data.report.metrics[check.metric]
    combos = declared_combinations(data, metric, check)
    if not combos:
        label = check.label or describe(check.where)
        return [CheckResult(label, NOT_MEASURED, "–", "", "nothing of this selection is declared by the study")]
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
