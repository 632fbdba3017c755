"""How many rounds a still-inconclusive claim needs (docs/statistics.md, "Power").

Power at n rounds is that of the last look's test at its nominal level (sequential.py: the
paired t-test's own levels, t_levels.py): the paired t-test on log values, noncentral t with
n - 1 degrees of freedom, the within-round sd of a log difference (`sd_pair`) taken as known. Earlier looks only add decisions, so this is a lower
bound. Censoring costs information: the rounds are divided by the share of completed samples.
An interval hypothesis (equivalence's band, a seed's magnitude range) is decided "holds" by two
one-sided tests (TOST); its power is that of both at once, from the same noncentral t.

A claim over cells (rules.every_cell) decides as a whole, so its need is the rounds at which the
claim itself decides with `power`, not the most any one cell needs: "holds" needs every undecided
cell to hold (each at the unadjusted level), so their probabilities combine by Boole's lower bound;
"does not hold" needs one cell to fail at Holm's level, which for the first rejection is
Bonferroni's level / k over the claim's k cells (UndecidedClaim).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy.optimize import brentq
from scipy.stats import nct, t

from congestlab.stats.effect import Effect, from_percent
from congestlab.stats.rules import ALPHA, FAILS, HOLDS, INCONCLUSIVE, Verdict
from congestlab.stats import t_levels
from congestlab.stats.sequential import SequentialDesign, nominal_levels

POWER = 0.80
MANY_LOOKS = 80
CAP_ROUNDS = 200


def final_level(rounds: int, first_look: int = 3, alpha: float = ALPHA) -> float:
    """The last look's level of a design of `rounds` rounds (stats/sequential.py: the paired
    t-test's own levels): exact for one look and for the table's designs, else estimated (a
    power estimate asks for up to CAP_ROUNDS designs; simulating each would take minutes)."""
    first_look = min(first_look, rounds)
    table = t_levels.table()
    largest = max(table["levels"])
    tabled = first_look == table["first_look"] and alpha == table["alpha"]
    if first_look == rounds or (tabled and rounds <= largest):
        return SequentialDesign(rounds, first_look, alpha).final_level()
    if not tabled:  # another level or first look: its z-level times the t/z ratio of the table's nearest design
        nearest = min(rounds, largest)
        ratio = table["levels"][nearest][-1] / _z_final_level(nearest, table["first_look"], table["alpha"])
        return ratio * _z_final_level(rounds, first_look, alpha)
    # beyond the table: the last look's level hardly depends on where the first looks were (they
    # spend next to nothing), and the t-test's levels come nearer the z-test's as the degrees of
    # freedom grow. So the table's largest design's t/z ratio (0.947) times the z-level of 80
    # equally spaced looks: below the exact level up to 80 rounds (80 looks' z-level lies below
    # that of any such design, and the ratio rises towards 1), so the power is, if anything,
    # underestimated; at 100 rounds the z-level is 1.6 % below 80 looks
    ratio = table["levels"][largest][-1] / _z_final_level(largest, first_look, alpha)
    return ratio * nominal_levels(tuple(i / MANY_LOOKS for i in range(1, MANY_LOOKS + 1)), alpha)[-1]


def _z_final_level(rounds: int, first_look: int, alpha: float) -> float:
    """The z-test's last level of a design with a look after every round from `first_look`
    (at most MANY_LOOKS looks, equally spaced, beyond that: below the exact level)."""
    if rounds - first_look + 1 > MANY_LOOKS:
        return nominal_levels(tuple(i / MANY_LOOKS for i in range(1, MANY_LOOKS + 1)), alpha)[-1]
    return nominal_levels(tuple(r / rounds for r in range(first_look, rounds + 1)), alpha)[-1]


def power_one_sided(rounds: int, distance: float, sd_pair: float, level: float) -> float:
    """P(a one-sided test at `level` decides) when the truth lies `distance` beyond its threshold."""

    if rounds < 2 or not sd_pair > 0:
        return 0.0
    df = rounds - 1
    se = sd_pair / math.sqrt(rounds)
    return float(nct.sf(t.isf(level, df), df, distance / se))


def power_interval(rounds: int, effect: float, lo: float, hi: float, sd_pair: float, level: float) -> float:
    """P(TOST decides "holds": the CI inside [lo, hi]) when the truth is `effect`, on the
    effect's own scale. Both one-sided tests must reject; P(A and B) >= P(A) + P(B) - 1, so
    this is a lower bound (tight once the interval is several standard errors wide)."""

    if rounds < 2 or not sd_pair > 0:
        return 0.0
    df = rounds - 1
    se = sd_pair / math.sqrt(rounds)
    tc = t.isf(level, df)
    return max(0.0, float(nct.sf(tc, df, (effect - lo) / se) + nct.cdf(-tc, df, (effect - hi) / se) - 1))


def power_equivalence(rounds: int, effect: float, margin: float, sd_pair: float, level: float) -> float:
    """P(TOST decides "holds") when the truth is `effect` and the band +-margin (log scale); a lower bound."""
    return power_interval(rounds, effect, -margin, margin, sd_pair, level)


def rounds_needed(sd_pair: float, distance: float | None = None, equivalence: tuple[float, float] | None = None,
                  censored_fraction: float = 0.0, first_look: int = 3, alpha: float = ALPHA,
                  power: float = POWER, interval: tuple[float, float, float] | None = None,
                  tests: int = 1) -> int | None:
    """The fewest rounds (max_rounds of a design) whose power reaches `power`; None beyond CAP_ROUNDS.
    Give `distance` (the truth's distance beyond a one-sided threshold, log scale),
    `equivalence` = (effect, margin) on the log scale, or `interval` = (effect, lo, hi) on the
    effect's own scale (a magnitude range). `tests`: the test runs at the last look's level
    divided by it (Bonferroni over that many tests; 1: the level itself)."""
    if not 0 <= censored_fraction < 1:
        return None
    if equivalence is not None:
        interval = (equivalence[0], -equivalence[1], equivalence[1])

    def reached(n: int) -> bool:
        level = final_level(n, first_look, alpha) / tests
        if distance is not None:
            return power_one_sided(n, distance, sd_pair, level) >= power
        return power_interval(n, *interval, sd_pair, level) >= power

    if not reached(CAP_ROUNDS):
        return None
    for n in range(2, CAP_ROUNDS + 1):
        if reached(n):
            return max(first_look, math.ceil(n / (1 - censored_fraction)))
    return None


def detectable_distance(rounds: int, sd_pair: float, first_look: int = 3, alpha: float = ALPHA,
                        power: float = POWER) -> float:
    """The distance beyond a one-sided threshold (log scale) that `rounds` detect with `power`."""

    level = final_level(rounds, first_look, alpha)
    return brentq(lambda d: power_one_sided(rounds, d, sd_pair, level) - power, 1e-9, 100 * sd_pair)


@dataclass(frozen=True)
class UndecidedCell:
    """One undecided cell's test if the truth were its estimate: the verdict within reach (`side`)
    and what its power needs. One-sided (`distance` beyond the threshold, log scale) or, for
    "holds" of an interval hypothesis, TOST (`interval` = (effect, lo, hi))."""

    side: str                                            # HOLDS or FAILS
    sd_pair: float
    distance: float | None = None
    interval: tuple[float, float, float] | None = None
    censored_fraction: float = 0.0
    alpha: float = ALPHA

    def power(self, rounds: int, first_look: int = 3, tests: int = 1) -> float:
        """P(it decides `side` by the last look of a `rounds`-round design); a lower bound. Of the
        rounds only the completed share informs (as rounds_needed). `tests`: the number of tests
        a "does not hold" shares its level with (Bonferroni); "holds" is never adjusted."""
        n = math.floor(rounds * (1 - self.censored_fraction) + 1e-9)
        if n < 2:
            return 0.0
        level = final_level(n, first_look, self.alpha) / (tests if self.side == FAILS else 1)
        if self.distance is not None:
            return power_one_sided(n, self.distance, self.sd_pair, level)
        return power_interval(n, *self.interval, self.sd_pair, level)


@dataclass(frozen=True)
class UndecidedClaim:
    """A claim over cells (rules.every_cell) still undecided, as its undecided cells.

    every_cell holds when every cell holds, each at the unadjusted level (intersection–union), and
    does not hold when some cell does after Holm's adjustment of the cells' "does not hold" p-values.
    `side` FAILS: some undecided cell's estimate lies on its "does not hold" side, so the claim
    decides when one of them (`cells`) fails. Holm rejects anything at all exactly when the
    smallest p lies below level / k (its first step, Bonferroni's level), k = `tests` the claim's
    cells, decided ones included; P(some cell fails) >= the largest single cell's probability at
    level / k. `side` HOLDS: every undecided cell (`cells`) must hold; they share rounds (and a
    round's conditions), so rather than the product, which needs independence, P(all hold) >=
    1 - sum(1 - p_i) (Boole), which holds under any dependence and is the same lower bound as
    power_interval's for TOST's two tests. Cells already decided "holds" are taken to stay so.
    A cell that is itself a claim over cells (a `best` check) nests, its level divided again."""

    side: str
    cells: tuple["UndecidedCell | UndecidedClaim", ...]
    tests: int

    def power(self, rounds: int, first_look: int = 3, tests: int = 1) -> float:
        ps = [c.power(rounds, first_look, tests * self.tests) for c in self.cells]
        if self.side == FAILS:
            return max(ps)
        return max(0.0, 1.0 - sum(1.0 - p for p in ps))


def undecided_cell(e: Effect, rule: str, margin_pct: float = 0.0, alpha: float = ALPHA,
                   interval: tuple[float, float] | None = None) -> UndecidedCell | None:
    """The test an undecided check decides by if the truth were its current estimate; None when
    there is none (no estimate, the estimate on a threshold). rule and margins as rounds_needed_for."""
    if not e.determined or not math.isfinite(e.sd_pair):
        return None
    n = sum(e.n)
    cf = sum(e.censored) / n if n else 0.0
    if not 0 <= cf < 1:
        return None
    est, m = e.estimate, from_percent(margin_pct)
    if rule in ("equivalence", "magnitude"):
        lo, hi = (-m, m) if rule == "equivalence" else interval
        if lo < est < hi:  # "holds" is the verdict within reach: both one-sided tests must reject
            return UndecidedCell(HOLDS, e.sd_pair, interval=(est, lo, hi), censored_fraction=cf, alpha=alpha)
        distance, side = (lo - est if est <= lo else est - hi), FAILS  # "does not hold": wholly outside
    else:
        threshold = {"greater": 0.0, "less": 0.0, "at_most": m, "at_least": from_percent(-margin_pct)}[rule]
        distance = abs(est - threshold)
        above_holds = rule in ("greater", "at_least")
        side = HOLDS if (est > threshold) == above_holds else FAILS
    if distance <= 0:
        return None
    return UndecidedCell(side, e.sd_pair, distance=distance, censored_fraction=cf, alpha=alpha)


def rounds_needed_for(e: Effect, rule: str, margin_pct: float = 0.0, first_look: int = 3,
                      alpha: float = ALPHA, power: float = POWER,
                      interval: tuple[float, float] | None = None, tests: int = 1) -> int | None:
    """The rounds an undecided check needs if the truth were its current estimate.
    rule: "greater", "less", "equivalence", "at_most", "at_least" (margins as in rules.py), or
    "magnitude" with `interval` = (lo, hi) on the effect's own scale (Verdict.interval).
    `tests`: the check's "does not hold" is Holm-adjusted over that many checks (a cell of a claim
    over cells): its test then runs at the level / tests, Bonferroni's (Holm's first step)."""
    cell = undecided_cell(e, rule, margin_pct, alpha, interval)
    return None if cell is None else _cell_rounds_needed(cell, first_look, power, tests)


def _cell_rounds_needed(cell: UndecidedCell, first_look: int, power: float, tests: int) -> int | None:
    return rounds_needed(cell.sd_pair, distance=cell.distance, interval=cell.interval,
                         censored_fraction=cell.censored_fraction, first_look=first_look, alpha=cell.alpha,
                         power=power, tests=tests if cell.side == FAILS else 1)


def undecided(v: Verdict, alpha: float | None = None) -> UndecidedCell | UndecidedClaim | None:
    """What an inconclusive verdict decides by if the truth were its estimates (UndecidedClaim for
    a claim over cells); None when some undecided cell that matters has no estimate ("the best
    changes", a trend, no completed sample) or the verdict is decided."""
    if v.verdict != INCONCLUSIVE:
        return None
    if v.cells:
        nodes = [undecided(c, alpha) for c in v.cells if c.verdict == INCONCLUSIVE]
        failing = tuple(c for c in nodes if c is not None and c.side == FAILS)
        if failing:  # one failing cell decides; cells without an estimate cannot stop that
            return UndecidedClaim(FAILS, failing, len(v.cells))
        if not nodes or None in nodes:
            return None
        return UndecidedClaim(HOLDS, tuple(nodes), len(v.cells))
    if v.effect is None or v.kind not in ("greater", "less", "equivalence", "at_most", "at_least", "magnitude"):
        return None
    if v.kind == "magnitude" and v.interval is None:
        return None
    return undecided_cell(v.effect, v.kind, v.margin_pct, v.alpha if alpha is None else alpha, v.interval)


def claim_rounds_needed(claim: UndecidedCell | UndecidedClaim, first_look: int = 3, power: float = POWER,
                        tests: int = 1) -> int | None:
    """The fewest rounds (max_rounds of a design, at least first_look) at which `claim` decides
    with `power`; None beyond CAP_ROUNDS rounds."""
    if claim.power(CAP_ROUNDS, first_look, tests) < power:
        return None
    for n in range(2, CAP_ROUNDS + 1):
        if claim.power(n, first_look, tests) >= power:
            return max(first_look, n)
    return None


def rounds_needed_for_verdict(v: Verdict, first_look: int = 3, power: float = POWER, tests: int = 1,
                              alpha: float | None = None) -> int | None:
    """The rounds an inconclusive verdict needs: its own (rounds_needed_for), or for a claim over
    cells the rounds at which the claim itself decides with `power` (UndecidedClaim: every
    undecided cell holding, Boole's bound, or one failing at the Holm level). None when decided,
    when a cell's need that matters is unknown, or beyond CAP_ROUNDS. `tests`: the verdict is one
    of that many cells Holm adjusts over (report/claims/evaluate.py: the checks of one claim). `alpha`: the
    design's level per side, when the verdict was judged at another (a sequential look's nominal
    level, decisive/claims.py); default the verdict's own."""
    pending = undecided(v, alpha)
    if pending is None:
        return None
    if isinstance(pending, UndecidedClaim):
        return claim_rounds_needed(pending, first_look, power, tests)
    return _cell_rounds_needed(pending, first_look, power, tests)  # as rounds_needed_for: its own rounds
