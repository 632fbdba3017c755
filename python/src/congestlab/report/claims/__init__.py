"""Verdicts on the seeds' claims, decided by the statistics engine (congestlab/stats;
docs/reports.md, "Verdict rules"; docs/statistics.md).

Every check ends in one of four verdicts: holds, does not hold, inconclusive, not measured. It
is two one-sided tests, each at alpha/2 of the check's `alpha` (5 %: the sides of a 95 % CI),
one whose rejection says "holds" and one whose rejection says "does not hold"; neither rejected
is inconclusive, so an underpowered run is never "holds" by default. The same rule at every n.

A cell is the samples of one selection, one per point x repetition, with its outcome: a GET
that timed out is censored at its timeout (a delay beyond it, a throughput below the file over
it), an invalid one is excluded and counted (report/data.py, RunData.cell). The block of a
sample is its repetition.

One module per rule (the `rule` of a check):
compare   relation.py: a <relation> b on the effect log(median a / median b) of the censored
          log-normal model with the repetition as block (stats/median_ratio.py). > and <: the
          CI excludes 0 on the claimed side (stats.rules.direction). ~: TOST against
          +-margin_pct; >= / <=: non-inferiority, a at most margin_pct below / above b.
          `range_pct`: a/b - 1 lies in the seed's range (magnitude: holds when the CI lies
          inside it, does not hold when it lies wholly outside, else inconclusive). `range`:
          a - b in the metric's unit lies in the range, on the differences paired by repetition
          (censored normal model, stats/location.py). Cells with values <= 0 have no ratio:
          Gehan's permutation test decides their direction (stats/gehan.py); margins undecided.
range     median_range.py: the cell's (geometric) median lies in [lo, hi]: a magnitude check of
          one cell.
matches   matches.py: every cell's mean of completed samples within `tolerance_pct` of
          `expected` (a number, or the seed's published value for that cell): a comparison with
          the seed.
monotone  monotone.py: along `along`, the samples' trend (Kendall's tau against the values of
          `along`, stats/trend.py) significantly in `direction`, and no step between neighbours
          significantly against it by more than `tolerance_pct` (Holm over the steps); does not
          hold when a step is (Holm) or the trend goes significantly the other way.
shape     shape.py: least-squares fits of the samples against the numeric values of `along`
          (stats/fits.py): linear y = a + b*x and exponential y = A*exp(b*x); the better by AIC
          by at least 2 decides; closer is inconclusive; fewer than 4 values of `along` is
          inconclusive.
share     share.py: in every point x repetition, each record's value within `tolerance_pct` of
          the group's total / n (TCP sessions sharing r/n).
best      best.py: the cells are the combinations of the `among` dimensions' values. With `a`:
          cell a is better than every other cell (direction against each, intersection-union;
          does not hold when another is significantly better, Holm). With `along`: the best cell
          changes with the value of `along` (stats.rules.best_changes: a significant swap).

A claim's checks (its parts, one per `for_each` combination) are combined by
stats.rules.every_cell (evaluate.py): it holds when every measured check holds
(intersection-union, no adjustment), does not hold when one does after Holm's adjustment over
the checks, else it is inconclusive; not measured when nothing was measured. Each check carries
the point ids that fed it (`points`) and, when undecided, the rounds a power estimate says it
needs (its "does not hold" at the Holm level over the claim's checks); the claim, the rounds at
which it decides as a whole (stats/power.py, UndecidedClaim). check.py holds what the rules
share, formatting.py the text of cells and verdicts.
"""

from congestlab.report.claims.check import NOT_MEASURED, CheckResult
from congestlab.report.claims.evaluate import ClaimResult, evaluate_claim, evaluate_claims
from congestlab.report.claims.formatting import fmt_cell
from congestlab.report.claims.relation import seed_agrees
from congestlab.stats.rules import FAILS, HOLDS, INCONCLUSIVE

__all__ = ["FAILS", "HOLDS", "INCONCLUSIVE", "NOT_MEASURED", "CheckResult", "ClaimResult", "evaluate_claim",
           "evaluate_claims", "fmt_cell", "seed_agrees"]
