"""How many rounds a still-inconclusive claim needs (docs/statistics.md, "Power").

Power at n rounds is that of the last look's test at its nominal level (sequential.py): the
paired t-test on log values, noncentral t with n - 1 degrees of freedom, the within-round sd of a
log difference (`sd_pair`) taken as known. Earlier looks only add decisions, so this is a lower
bound. Censoring costs information: the rounds are divided by the share of completed samples.
An interval hypothesis (equivalence's band, a seed's magnitude range) is decided "holds" by two
one-sided tests (TOST); its power is that of both at once, from the same noncentral t.
"""

from __future__ import annotations

import math

from scipy.optimize import brentq
from scipy.stats import nct, t

from congestlab.stats.compare import Effect, from_percent
from congestlab.stats.rules import ALPHA, INCONCLUSIVE, Verdict
from congestlab.stats.sequential import SequentialDesign, nominal_levels

POWER = 0.80
MAX_EXACT_LOOKS = 20  # designs with more looks take the level of MANY_LOOKS equally spaced ones
MANY_LOOKS = 80
CAP_ROUNDS = 200


def final_level(rounds: int, first_look: int = 3, alpha: float = ALPHA) -> float:
    first_look = min(first_look, rounds)
    if rounds - first_look + 1 <= MAX_EXACT_LOOKS:
        return SequentialDesign(rounds, first_look, alpha).final_level()
    # many looks: the last look's level hardly depends on where the first ones were (they spend
    # next to nothing); 80 equally spaced looks, computed once, stand for all. Their level is at
    # or below the exact one up to 80 rounds (0.01589 vs 0.01633 exact at 40 rounds, 0.01588 at
    # 100), so the power is, if anything, underestimated
    return nominal_levels(tuple(i / MANY_LOOKS for i in range(1, MANY_LOOKS + 1)), alpha)[-1]


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
                  power: float = POWER, interval: tuple[float, float, float] | None = None) -> int | None:
    """The fewest rounds (max_rounds of a design) whose power reaches `power`; None beyond CAP_ROUNDS.
    Give `distance` (the truth's distance beyond a one-sided threshold, log scale),
    `equivalence` = (effect, margin) on the log scale, or `interval` = (effect, lo, hi) on the
    effect's own scale (a magnitude range)."""
    if not 0 <= censored_fraction < 1:
        return None
    if equivalence is not None:
        interval = (equivalence[0], -equivalence[1], equivalence[1])

    def reached(n: int) -> bool:
        level = final_level(n, first_look, alpha)
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


def rounds_needed_for(e: Effect, rule: str, margin_pct: float = 0.0, first_look: int = 3,
                      alpha: float = ALPHA, power: float = POWER,
                      interval: tuple[float, float] | None = None) -> int | None:
    """The rounds an undecided check needs if the truth were its current estimate.
    rule: "greater", "less", "equivalence", "at_most", "at_least" (margins as in rules.py), or
    "magnitude" with `interval` = (lo, hi) on the effect's own scale (Verdict.interval)."""
    if not e.determined or not math.isfinite(e.sd_pair):
        return None
    n = sum(e.n)
    cf = sum(e.censored) / n if n else 0.0
    est, m = e.estimate, from_percent(margin_pct)
    if rule in ("equivalence", "magnitude"):
        lo, hi = (-m, m) if rule == "equivalence" else interval
        if lo < est < hi:  # "holds" is the verdict within reach: both one-sided tests must reject
            return rounds_needed(e.sd_pair, interval=(est, lo, hi), censored_fraction=cf, first_look=first_look,
                                 alpha=alpha, power=power)
        distance = lo - est if est <= lo else est - hi  # "does not hold": wholly outside
    else:
        threshold = {"greater": 0.0, "less": 0.0, "at_most": m, "at_least": from_percent(-margin_pct)}[rule]
        distance = abs(est - threshold)
    if distance <= 0:
        return None
    return rounds_needed(e.sd_pair, distance=distance, censored_fraction=cf, first_look=first_look,
                         alpha=alpha, power=power)


def rounds_needed_for_verdict(v: Verdict, first_look: int = 3, power: float = POWER) -> int | None:
    """The rounds an inconclusive verdict needs: its own, or for a claim over cells the most any
    undecided cell needs. None when decided, when a cell's need is unknown (no estimate, "the
    best changes"), or beyond CAP_ROUNDS."""
    if v.verdict != INCONCLUSIVE:
        return None
    if v.cells:
        needs = [rounds_needed_for_verdict(c, first_look, power) for c in v.cells if c.verdict == INCONCLUSIVE]
        return None if not needs or None in needs else max(needs)
    if v.effect is None or v.kind not in ("greater", "less", "equivalence", "at_most", "at_least", "magnitude"):
        return None
    if v.kind == "magnitude" and v.interval is None:
        return None
    return rounds_needed_for(v.effect, v.kind, v.margin_pct, first_look, v.alpha, power, v.interval)
