"""One cell against a band: "the cell's value lies in [lo, hi]" as two one-sided tests (TOST),
on the scale its samples live on (docs/statistics.md, "One cell against a band").

- A **mean** of continuous samples (a throughput, a rate): Student's t on the repetitions' values,
  as statsmodels' `DescrStatsW.ttost_mean` (a unit test checks the two agree).
- A **proportion of counted events** (RESETs of requests sent, RTT samples in a bin of those
  taken): each repetition gives k events of n; the logit of the pooled proportion, the
  intercept of a quasi-binomial GLM (its closed form here; a unit test checks it against
  statsmodels'), its dispersion from the repetitions' own scatter (Pearson's chi-squared over
  repetitions - 1, never below the binomial's 1), Student's t with repetitions - 1 degrees of
  freedom: the repetition is the unit, not the packet. A band on the percent scale maps onto the logit scale (0 % and
  100 % to -inf and +inf). With no event at all (or only events) in every repetition the
  logit is unbounded and the dispersion cannot be seen: the pooled counts are tested by the
  exact binomial (Clopper-Pearson) instead, which assumes independent trials.

What cannot be tested is **descriptive** (`Band.descriptive` says why): a single repetition (no
spread to test with), or every repetition giving the same value (a deterministic quantity: the
same count every time, e.g. requests split by an address list, says nothing a test could
use). A descriptive check never reads "holds" (report/claims/).

"holds": the CI lies inside [lo, hi] (both one-sided tests reject); "does not hold": it lies
wholly outside (one of them the other way); else inconclusive. With the seed's n
(stats/replication.py) the band is the seed's range with its own error allowed for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats as st
from scipy.special import logit

from congestlab.stats import replication
from congestlab.stats.effect import Effect
from congestlab.stats.rules import FAILS, HOLDS, INCONCLUSIVE, Verdict


@dataclass(frozen=True)
class Band:
    """A cell's estimate on its test scale, or why it cannot be tested (`descriptive`)."""

    effect: Effect | None          # Student-t on the test scale
    scale: str                     # "mean" or "logit"
    n: int                         # repetitions
    descriptive: str = ""          # why there is no test
    exact: tuple[int, int] | None = None  # (events, trials) pooled, when every repetition had none or all

    def to_scale(self, value: float) -> float:
        """A bound on the metric's scale (a proportion in %) on the test scale."""
        if self.scale == "mean":
            return value
        if value <= 0:
            return -math.inf
        if value >= 100:
            return math.inf
        p = value / 100
        return math.log(p / (1 - p))

    def from_scale(self, value: float) -> float:
        if self.scale == "mean" or not math.isfinite(value):
            return value if self.scale == "mean" else (0.0 if value < 0 else 100.0)
        return 100 / (1 + math.exp(-value))


def _effect(estimate: float, se: float, df: int, n: int, sd: float) -> Effect:
    return Effect(estimate, se, df, n=(n, 0), censored=(0, 0), invalid=(0, 0), blocks=0, sd_pair=sd)


def mean_band(values: Sequence[float]) -> Band:
    """The mean of a cell's repetitions with its Student-t standard error."""
    x = np.asarray(values, float)
    n = len(x)
    if n < 2:
        return Band(None, "mean", n, f"{n} repetition(s): no spread to test with")
    sd = float(np.std(x, ddof=1))
    if sd == 0:
        return Band(None, "mean", n, f"every repetition gave {x[0]:g}: a fixed value, no spread to test with")
    return Band(_effect(float(np.mean(x)), sd / math.sqrt(n), n - 1, n, sd), "mean", n)


def proportion_band(events: Sequence[float], trials: Sequence[float]) -> Band:
    """The pooled proportion of events per repetition (k of n each) on the logit scale."""
    k = np.asarray(events, float)
    n = np.asarray(trials, float)
    keep = n > 0
    k, n = k[keep], n[keep]
    m = len(k)
    if m < 2:
        return Band(None, "logit", m, f"{m} repetition(s) with trials: no spread to test with")
    if np.all(k == 0) or np.all(k == n):
        return Band(None, "logit", m, exact=(int(round(k.sum())), int(round(n.sum()))))
    if np.all(k / n == k[0] / n[0]):
        return Band(None, "logit", m, f"every repetition gave {100 * k[0] / n[0]:g} %: a deterministic split, "
                                      "nothing to test")
    p = float(k.sum() / n.sum())
    pearson = float(np.sum((k - n * p) ** 2 / (n * p * (1 - p))))
    dispersion = max(1.0, pearson / (m - 1))  # never less spread than independent trials give
    se = math.sqrt(dispersion / (float(n.sum()) * p * (1 - p)))  # the intercept's, on the logit scale
    return Band(_effect(float(logit(p)), se, m - 1, m, se * math.sqrt(m)), "logit", m)


def _exact_p_values(events: int, trials: int, lo: float, hi: float) -> tuple[float, float]:
    """(p_holds, p_fails) of "the proportion lies in [lo, hi]" (fractions) from pooled counts."""
    def above(p0: float) -> float:  # H0: proportion <= p0
        return 0.0 if p0 <= 0 else 1.0 if p0 >= 1 else float(st.binomtest(events, trials, p0, "greater").pvalue)

    def below(p0: float) -> float:  # H0: proportion >= p0
        return 0.0 if p0 >= 1 else 1.0 if p0 <= 0 else float(st.binomtest(events, trials, p0, "less").pvalue)

    return max(above(lo), below(hi)), min(below(lo), above(hi))


def within(band: Band, lo: float, hi: float, alpha: float, rule: str, label: str = "",
           seed_n: int | str | None = None) -> Verdict:
    """Does the cell lie in [lo, hi] (the metric's scale)? TOST on the band's scale; with the
    seed's n, the seed's error allowed for (stats/replication.py). A band without a test is
    inconclusive here; the caller labels it descriptive."""
    n = band.n
    if band.exact is not None:
        p_holds, p_fails = _exact_p_values(*band.exact, lo / 100, hi / 100)
        note = f"{band.exact[0]} events of {band.exact[1]} over {n} repetitions: exact binomial (Clopper-Pearson)"
        return Verdict(_decide(p_holds, p_fails, alpha), rule, math.nan, (math.nan, math.nan), p_holds, p_fails,
                       n, 0, 0, alpha, label, note, kind="band")
    e = band.effect
    if e is None:
        return Verdict(INCONCLUSIVE, rule, math.nan, (math.nan, math.nan), 1.0, 1.0, n, 0, 0, alpha, label,
                       band.descriptive, kind="band")
    tlo, thi = band.to_scale(lo), band.to_scale(hi)
    note = ""
    if seed_n is not None:
        p_holds, p_fails, (wlo, whi) = replication.range_p_values(e.estimate, e.se, e.df, tlo, thi, e.sd_pair, seed_n)
        note = (f"the seed's range with its error (n = {seed_n}): holds inside "
                f"{band.from_scale(wlo):.4g}..{band.from_scale(whi):.4g}")
        interval = (wlo, whi)
    else:
        p_holds = max(e.p_above(tlo), e.p_below(thi))
        p_fails = min(e.p_below(tlo), e.p_above(thi))
        interval = (tlo, thi)
    # an open end (0 % on the logit scale, a one-sided band) as a bound far beyond reach: the power
    # estimate (stats/power.py) then weighs the other end only
    far = 50 * e.sd_pair
    interval = (max(interval[0], e.estimate - far), min(interval[1], e.estimate + far))
    return Verdict(_decide(p_holds, p_fails, alpha), rule, math.nan, (math.nan, math.nan), p_holds, p_fails,
                   n, 0, 0, alpha, label, note, kind="magnitude", interval=interval, effect=e)


def ci_text(band: Band, alpha: float, digits: int) -> str:
    """The band's estimate and CI on the metric's scale ("94.12 [93.80, 94.44]")."""
    e = band.effect
    if e is None:
        return ""
    lo, hi = e.ci(1 - 2 * alpha)
    f = band.from_scale
    return f"{f(e.estimate):.{digits}f} [{f(lo):.{digits}f}, {f(hi):.{digits}f}]"


def _decide(p_holds: float, p_fails: float, alpha: float) -> str:
    return FAILS if p_fails < alpha else HOLDS if p_holds < alpha else INCONCLUSIVE
