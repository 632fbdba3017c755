"""Verdicts on the seeds' claims, decided by the statistics engine (congestlab/stats;
docs/reports.md, "Verdict rules"; docs/statistics.md).

Every check ends in one of five verdicts: holds, does not hold, inconclusive, not measured,
descriptive. A tested check is two one-sided tests, each at alpha/2 of the check's `alpha` (5 %:
the sides of a 95 % CI), one whose rejection says "holds" and one whose rejection says "does not
hold"; neither rejected is inconclusive, so an underpowered run is never "holds" by default.
The same rule at every n. A check that cannot be tested at its n (one sample, a fixed value, a
statistic whose smallest p cannot reach the level) is descriptive: its numbers are shown apart,
it never reads "holds" and it keeps its claim from holding.

A cell is the samples of one selection, one per point x repetition, with its outcome: a GET
that timed out is censored at its timeout (a delay beyond it, a throughput below the file over
it, a count of retransmissions at least what was seen), an invalid one is excluded and counted
(report/data.py, RunData.cell). The block of a sample is its repetition.

One module per rule (the `rule` of a check):
compare   relation.py: a <relation> b on the effect log(median a / median b) of the censored
          log-normal model with the repetition as block (stats/median_ratio.py). > and <: the
          CI excludes 0 on the claimed side (stats.rules.direction); with `factor` k it
          excludes log k (stats/factor.py). ~: TOST against +-margin_pct; >= / <=:
          non-inferiority. `range_pct`: a/b - 1 lies in the seed's range; `range`: a - b in the
          metric's unit, paired by repetition (stats/location.py); with `seed_n` the seed's own
          error is allowed for (stats/replication.py). Cells with values <= 0 have no ratio:
          Gehan's permutation test decides their direction (stats/gehan.py).
range     median_range.py: the cell's (geometric) median lies in [lo, hi]; with `trials`, the
          cell's share of counted events (stats/equivalence.py, logit scale).
matches   matches.py: the cell within `tolerance_pct` of `expected` (a number, or the seed's
          value for that cell): TOST of the mean (or, with `trials`, of the share).
monotone  monotone.py: along `along`, Kendall's tau significantly in `direction`, and no step
          significantly against it by more than `tolerance_pct` (Holm over the steps).
shape     shape.py: the declared curve against the Box-Cox family's others (linear,
          exponential, reciprocal, inverse square root) by profile likelihood, and its slope's
          sign by a t-test (stats/shapes.py).
share     share.py: each record of a point x repetition within `tolerance_pct` of the group's
          total / n: the mean worst deviation over the repetitions below the tolerance.
best      best.py: the cells are the combinations of the `among` dimensions' values. With `a`:
          cell a is better than every other cell (intersection-union; Holm). With `along`: no
          cell is better than every other at every value (stats/consistently_best.py).

A claim's checks (its parts, one per declared `for_each` combination: coverage.py) are combined
by stats.rules.every_cell (evaluate.py): it holds when every check holds (intersection-union, no
adjustment), does not hold when one does after Holm's adjustment over the checks, else it is
inconclusive. A part with quantifier "some" enters as one (stats/some_cell.py). A declared check
not measured, a planned repetition missing or a descriptive check keeps a claim from holding.
Each check carries the point ids that fed it (`points`) and, when undecided, the rounds a power
estimate says it needs; the claim, the rounds at which it decides as a whole (stats/power.py).
check.py holds what the rules share, bands.py a cell against a band, formatting.py the text.
"""

from congestlab.report.claims.check import NOT_MEASURED, CheckResult
from congestlab.report.claims.evaluate import ClaimResult, evaluate_claim, evaluate_claims
from congestlab.report.claims.formatting import fmt_cell
from congestlab.report.claims.relation import seed_agrees
from congestlab.stats.rules import DESCRIPTIVE, FAILS, HOLDS, INCONCLUSIVE

__all__ = ["DESCRIPTIVE", "FAILS", "HOLDS", "INCONCLUSIVE", "NOT_MEASURED", "CheckResult", "ClaimResult", "evaluate_claim",
           "evaluate_claims", "fmt_cell", "seed_agrees"]
