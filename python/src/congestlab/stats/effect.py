"""An effect: one number on a scale where 0 is "no difference" (the log of a ratio of medians,
stats/median_ratio.py; a difference or a level, stats/location.py), with its standard error and
degrees of freedom; for an effect the model cannot estimate, a permutation test's p-values
(stats/gehan.py), which decides wherever it is given. The rules (stats/rules.py) decide on it.
Student's t through scipy.special's stdtr/stdtrit, the functions scipy.stats.t calls (the same
numbers) without its per-call argument handling, which the calibration's many looks feel.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

from scipy.special import stdtr, stdtrit


@dataclass(frozen=True)
class Effect:
    """log(median a / median b) with its standard error and degrees of freedom."""

    estimate: float
    se: float
    df: int
    n: tuple[int, int]
    censored: tuple[int, int]
    invalid: tuple[int, int]
    blocks: int                 # blocks used (0: unblocked)
    sd_pair: float              # sd of a within-block log difference (sigma * sqrt 2), for power
    note: str = ""              # why the effect is undetermined, or which test decides
    # threshold -> (p above, p below) by a permutation test (gehan.py): where given, it decides
    # (a comparison with timed-out samples, or values <= 0), determined or not
    rank_test: Callable[[float], tuple[float, float]] | None = field(default=None, compare=False, repr=False)

    @property
    def determined(self) -> bool:
        return math.isfinite(self.se) and self.se > 0 and self.df > 0

    def ci(self, level: float = 0.95) -> tuple[float, float]:
        if not self.determined:
            return -math.inf, math.inf

        q = float(stdtrit(self.df, 0.5 + level / 2))
        return self.estimate - q * self.se, self.estimate + q * self.se

    def p_above(self, value: float) -> float:
        """One-sided p against H0: effect <= value (small: the effect is above value)."""
        if self.rank_test is not None:
            return self.rank_test(value)[0]
        if not self.determined:
            return 1.0

        return float(stdtr(self.df, -(self.estimate - value) / self.se))

    def p_below(self, value: float) -> float:
        """One-sided p against H0: effect >= value."""
        if self.rank_test is not None:
            return self.rank_test(value)[1]
        if not self.determined:
            return 1.0

        return float(stdtr(self.df, (self.estimate - value) / self.se))

    @property
    def percent(self) -> float:
        """The effect as a relative difference, (a / b - 1) x 100."""
        return (math.exp(self.estimate) - 1) * 100


def to_percent(log_ratio: float) -> float:
    if math.isnan(log_ratio):
        return math.nan
    return (math.exp(log_ratio) - 1) * 100 if log_ratio < 700 else math.inf


def from_percent(pct: float) -> float:
    return math.log1p(pct / 100)
