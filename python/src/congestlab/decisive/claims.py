"""What the sequential procedure needs of a claim, in one place: the points feeding it, its
verdict at a look's level, and the rounds a power estimate says it needs.

These are the only functions that know how report/claims.py decides (the procedure itself,
procedure.py, takes verdict words). Today's claims.py tests at a two-sided `alpha` (Welch), so a
look at one-sided level L per side runs it at 2 L; the points come from the claim's selectors
over the run's rows; the power estimate takes each undecided compare check's effect from the
stats engine (congestlab/stats/compare.py, the round as a block).
"""

from __future__ import annotations

import math

from congestlab.errors import StatsInputError
from congestlab.report.claims import INCONCLUSIVE, _combinations, combine, run_check
from congestlab.report.data import RunData, matches
from congestlab.spec.report import CheckSpec, ClaimSpec
from congestlab.stats import power
from congestlab.stats.compare import compare
from congestlab.stats.samples import Cell

# outcome columns do not decide which points feed a claim: a timed-out GET is a censored sample
# of its point, and a point whose GETs all time out still feeds the claims over its cell
_OUTCOME_KEYS = ("outcome", "ok")
_RULE_OF_RELATION = {">": "greater", "<": "less", "~": "equivalence", ">=": "at_least", "<=": "at_most"}


def claim_points(data: RunData, claim: ClaimSpec) -> set[str]:
    """The points whose rows any check of the claim selects (either side of a compare)."""
    points: set[str] = set()
    for check in claim.checks():
        metric = data.report.metrics[check.metric]
        where = {k: v for k, v in {**metric.where, **check.where}.items() if k not in _OUTCOME_KEYS}
        sides = [check.a, check.b] if check.rule == "compare" else [{}]
        for row in data.rows(metric.kind):
            if any(matches(row, {**where, **side}) for side in sides):
                points.add(row.get("point_id", ""))
    points.discard("")
    return points


def _at_level(check: CheckSpec, level_per_side: float) -> CheckSpec:
    return check.model_copy(update={"alpha": min(2 * level_per_side, 0.5)})


def verdict_at(data: RunData, claim: ClaimSpec, level_per_side: float) -> str:
    """The claim's verdict word with every test at the look's one-sided level."""
    return combine([r.verdict for check in claim.checks() for r in run_check(data, _at_level(check, level_per_side))])


def rounds_needed(data: RunData, claim: ClaimSpec, first_look: int, level_per_side: float) -> int | None:
    """The rounds (repetitions of every point it compares) at which the claim decides with 80 %
    power if the truth were today's estimate: the most any cell undecided at the last look's
    level needs. None
    when some undecided check has no estimate (a rule other than compare, a non-positive value,
    fewer than two rounds in common) or needs more than power.CAP_ROUNDS."""
    needs: list[int | None] = []
    for check in claim.checks():
        results = run_check(data, _at_level(check, level_per_side))
        if all(r.verdict != INCONCLUSIVE for r in results):
            continue
        if check.rule != "compare":
            return None
        metric = data.report.metrics[check.metric]
        combos = _combinations(data, metric, check)
        for combo, result in zip(combos, results):
            if result.verdict != INCONCLUSIVE:
                continue
            selection = {**check.where, **combo}
            cells = [_cell(data.samples(metric, {**selection, **side})) for side in (check.a, check.b)]
            if None in cells:
                return None
            try:
                effect = compare(*cells)
            except StatsInputError:  # e.g. no two rounds in common: no estimate
                return None
            needs.append(power.rounds_needed_for(effect, _RULE_OF_RELATION[check.relation], check.tolerance_pct,
                                                 first_look))
    if not needs or None in needs:
        return None
    return max(needs)


def _cell(samples) -> Cell | None:
    values = [s.value for s in samples]
    if len(values) < 2 or not all(math.isfinite(v) and v > 0 for v in values):
        return None
    return Cell.of(values, blocks=[s.repetition for s in samples])
