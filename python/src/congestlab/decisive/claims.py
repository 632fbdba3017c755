"""What the sequential procedure needs of a claim, in one place: the points feeding it, its
verdict at a look's level, and the rounds a power estimate says it needs.

These are the only functions that know how report/claims/ decides (the procedure itself,
procedure.py, takes verdict words). report/claims/'s `alpha` is already the level of each
one-sided test, so a look at level L per side evaluates at L; the points come from the claim's
selectors over the run's rows (so a point whose GETs all time out still feeds its claims); the
power estimate is stats/power.py's on the claim's own engine verdict.
"""

from __future__ import annotations

from congestlab.report.claims import evaluate_claim
from congestlab.report.data import RunData, matches
from congestlab.spec.report import ClaimSpec
from congestlab.stats import power

# outcome columns do not decide which points feed a claim: a timed-out GET is a censored sample
# of its point, and a point whose GETs all time out still feeds the claims over its cell
_OUTCOME_KEYS = ("outcome", "ok")


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


def verdict_at(data: RunData, claim: ClaimSpec, level_per_side: float) -> str:
    """The claim's verdict word with every one-sided test at the look's level."""
    return evaluate_claim(data, claim, alpha=level_per_side, checks_rounds=False).verdict


def rounds_needed(data: RunData, claim: ClaimSpec, first_look: int, level_per_side: float,
                  design_alpha_per_side: float) -> int | None:
    """The rounds (repetitions of every point it compares) at which the claim decides with 80 %
    power if the truth were today's estimate: the claim as a whole (power.UndecidedClaim: every
    undecided check holding, or one failing at Holm's level), in a design of that many rounds
    spending `design_alpha_per_side` (power.final_level takes the design's alpha, not a look's
    nominal level, which it would lower again). None when decided at the look's level, when an
    undecided check that matters has no estimate ("the best changes", a trend) or beyond
    power.CAP_ROUNDS."""
    result = evaluate_claim(data, claim, alpha=level_per_side, checks_rounds=False)
    if result.decision is None:
        return None
    return power.rounds_needed_for_verdict(result.decision, first_look, alpha=design_alpha_per_side)
