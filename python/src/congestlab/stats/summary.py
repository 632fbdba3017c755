"""A cell's summary: the Kaplan–Meier median with the count censored, and the mean of completed
samples beside it (the seeds published means of the GETs that finished), each with a 95 % CI.

The Kaplan–Meier estimate is lifelines': right-censored for delays (a timed-out GET took
longer than its timeout), left-censored for throughputs (a timed-out GET's throughput is below
size / timeout). When more than half the samples are censored the median is only bounded:
`> T` (or `< T`), T the smallest (largest) limit among the censored ones.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

from scipy import stats as st

from congestlab.stats.samples import LEFT, RIGHT, Cell

LEVEL = 0.95


@dataclass(frozen=True)
class CellSummary:
    n: int                      # samples that count (complete + timed out)
    censored: int
    invalid: int
    median: float               # Kaplan–Meier; NaN when only bounded (see bound) or n == 0
    median_ci: tuple[float, float]
    bound: float | None         # the median is beyond this limit (more than half censored)
    censoring: str
    mean_completed: float       # NaN without completed samples
    mean_ci: tuple[float, float]
    completed: int

    def median_text(self, digits: int = 2) -> str:
        if self.n == 0:
            return "–"
        if self.bound is not None:
            sign = ">" if self.censoring == RIGHT else "<"
            return f"{sign} {self.bound:.{digits}f} ({self.censored}/{self.n} censored)"
        text = f"{self.median:.{digits}f} [{_fmt(self.median_ci[0], digits)}, {_fmt(self.median_ci[1], digits)}]"
        return text + (f" ({self.censored}/{self.n} censored)" if self.censored else "")

    def mean_text(self, digits: int = 2) -> str:
        if not self.completed:
            return "–"
        lo, hi = self.mean_ci
        return f"{self.mean_completed:.{digits}f} [{_fmt(lo, digits)}, {_fmt(hi, digits)}] (n={self.completed})"


def _fmt(x: float, digits: int) -> str:
    return "∞" if x == math.inf else "-∞" if x == -math.inf else "?" if math.isnan(x) else f"{x:.{digits}f}"


def mean_with_ci(values: list[float], level: float = LEVEL) -> tuple[float, tuple[float, float]]:
    """Mean and Student-t CI; one value has an unbounded CI."""

    if not values:
        return math.nan, (math.nan, math.nan)
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, (-math.inf, math.inf)
    if max(values) == min(values):
        return mean, (mean, mean)
    ci = st.ttest_1samp(values, 0.0).confidence_interval(level)
    return mean, (float(ci.low), float(ci.high))


def summarize(cell: Cell, level: float = LEVEL) -> CellSummary:
    from lifelines import KaplanMeierFitter
    from lifelines.utils import median_survival_times

    valid = cell.valid()
    done = cell.completed()
    mean, mean_ci = mean_with_ci(done, level)
    base = dict(n=len(valid), censored=cell.censored, invalid=cell.invalid, censoring=cell.censoring,
                mean_completed=mean, mean_ci=mean_ci, completed=len(done))
    if not valid:
        return CellSummary(median=math.nan, median_ci=(math.nan, math.nan), bound=None, **base)
    times = [v for v, _, _ in valid]
    events = [c for _, c, _ in valid]
    censored_limits = [v for v, c, _ in valid if not c]
    kmf = KaplanMeierFitter(alpha=1 - level)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # lifelines warns on ties and all-censored samples
        if cell.censoring == RIGHT:
            kmf.fit(times, events)
        else:
            kmf.fit_left_censoring(times, events)
        median = float(kmf.median_survival_time_)
        ci = median_survival_times(kmf.confidence_interval_)
    lo, hi = (float(x) for x in ci.iloc[0])
    unbounded = not math.isfinite(median) or (cell.censoring == LEFT and 2 * len(censored_limits) > len(valid))
    if unbounded or 2 * len(censored_limits) > len(valid):
        bound = min(censored_limits) if cell.censoring == RIGHT else max(censored_limits)
        return CellSummary(median=math.nan, median_ci=(math.nan, math.nan), bound=bound, **base)
    return CellSummary(median=median, median_ci=(lo, hi), bound=None, **base)
