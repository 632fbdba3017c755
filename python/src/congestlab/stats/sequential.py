"""Repetitions until decisive: a group-sequential design with Lan–DeMets alpha spending of the
O'Brien–Fleming type (docs/statistics.md, "Repetitions until decisive").

A claim is looked at after every round from `first_look` on, up to `max_rounds`. Each side of
each rule (holds / does not hold) spends its `alpha` over the looks as
alpha(t) = 2 - 2 Phi(z_(1 - alpha/2) / sqrt t), t = rounds / max_rounds: almost nothing early,
nearly all of it at the last look. Each look's tests run at a nominal level: the level at which
the paired t-test over the rounds so far, on the paths no earlier look stopped, spends exactly the
look's share (stats/t_levels.py). The boundaries of a z-statistic (`nominal_levels`: recursive
numerical integration of a Brownian path) are the same spending for a statistic whose spread is
known; at their nominal levels the t-tests of a few rounds would err by up to 2.9 % per side.
Statistics with more degrees of freedom than the paired t at a look (a pooled t, several samples
per round) and the exact permutation tests (discrete: they reach at most the level) err less at
the t-test's levels; python/benchmarks/sequential_error.py measures each. The levels depend on the
looks taken, so a look may be added or skipped (a point that could not run) without spoiling the
error rate, and stopping early is no bias.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Sequence

import numpy as np
from scipy.optimize import brentq
from scipy.signal import fftconvolve
from scipy.special import ndtr
from scipy.stats import norm

from congestlab.errors import StatsInputError
from congestlab.stats import t_levels
from congestlab.stats.rules import ALPHA, INCONCLUSIVE, Verdict

Z_GRID_MAX = 12.0  # a path above 12 sd has probability < 1e-32: the grid stops there
GRID_STEP = 0.01  # on the Brownian scale; each grid ends on its boundary: a 10x finer one moves a level < 5e-4


def spent(t: float, alpha: float) -> float:
    """The alpha spent by information fraction t (O'Brien–Fleming type, one side)."""

    if t <= 0:
        return 0.0
    t = min(t, 1.0)
    return float(2 - 2 * norm.cdf(norm.ppf(1 - alpha / 2) / math.sqrt(t)))


@lru_cache(maxsize=4096)
def nominal_levels(fractions: tuple[float, ...], alpha: float = ALPHA) -> tuple[float, ...]:
    """The one-sided nominal level of each look at the given information fractions (increasing, <= 1)."""

    if any(b <= a for a, b in zip(fractions, fractions[1:])) or not fractions or fractions[0] <= 0:
        raise StatsInputError(f"look fractions must increase from above 0: {fractions}")
    levels = []
    t_prev, spent_prev = 0.0, 0.0
    grid = weights = dens = None  # sub-density of the path at the previous look, not yet stopped
    for t in fractions:
        target = spent(t, alpha) - spent_prev
        if grid is None:
            c = float(norm.isf(target)) if target > 1e-300 else math.inf
            upper = min(c, Z_GRID_MAX) * math.sqrt(t)
            grid = _grid(upper, t)
            dens = norm.pdf(grid, scale=math.sqrt(t))
        else:
            d = math.sqrt(t - t_prev)
            mass = weights * dens
            c = _boundary(mass, grid, t, d, target) if target > 1e-15 else math.inf
            upper = min(c, Z_GRID_MAX) * math.sqrt(t)
            new = _grid(upper, t)
            dens = _transition(mass, grid, new, d)
            grid = new
        weights = np.full(len(grid), GRID_STEP)
        weights[[0, -1]] = GRID_STEP / 2
        levels.append(float(norm.sf(c)))
        t_prev, spent_prev = t, spent(t, alpha)
    return tuple(levels)


def increments(fractions: tuple[float, ...], alpha: float) -> tuple[float, ...]:
    """The alpha each look may spend (one side)."""
    spent_by = [spent(t, alpha) for t in fractions]
    return tuple(b - a for a, b in zip([0.0] + spent_by, spent_by))


@lru_cache(maxsize=4096)
def t_test_levels(rounds: tuple[int, ...], max_rounds: int, alpha: float = ALPHA) -> tuple[float, ...]:
    """The nominal level of each look after `rounds` rounds (increasing, <= max_rounds): the
    paired t-test's own (stats/t_levels.py)."""
    if any(b <= a for a, b in zip(rounds, rounds[1:])) or not rounds or rounds[0] < 1 or rounds[-1] > max_rounds:
        raise StatsInputError(f"looks must be taken after an increasing number of rounds in 1..{max_rounds}: {rounds}")
    return t_levels.levels(rounds, max_rounds, alpha, increments(tuple(r / max_rounds for r in rounds), alpha))


def _grid(upper: float, t: float) -> np.ndarray:
    """The path's values still running at information t: from -8 sd up to the boundary itself,
    in steps of GRID_STEP ending exactly on it, so the trapezoid rule has its last cell whole."""
    steps = int(math.floor((upper + 8.0 * math.sqrt(t)) / GRID_STEP))
    return upper - GRID_STEP * np.arange(steps, -1, -1)


def _boundary(mass: np.ndarray, grid: np.ndarray, t: float, d: float, target: float) -> float:
    """The c whose crossing, c sqrt(t) one increment (sd `d`) after the sub-density `mass` on
    `grid`, has probability `target`."""

    def tail(c: float) -> float:
        return float(np.sum(mass * ndtr((grid - c * math.sqrt(t)) / d)))

    return brentq(lambda c: tail(c) - target, -10.0, 50.0, xtol=1e-9)


def _transition(mass: np.ndarray, grid: np.ndarray, new: np.ndarray, d: float) -> np.ndarray:
    """The path's density on `new` one increment (sd `d`) after the sub-density `mass` on `grid`:
    sum_j mass[j] pdf((new[i] - grid[j]) / d) / d. Both grids step by GRID_STEP, so the kernel
    depends on i - j only and the sum is one FFT convolution: O(n log n) instead of an n x m matrix
    of exponentials (~2000 x 2000 per look, seconds per report process for a 20-look design)."""
    if len(new) == 0:
        return np.zeros(0)
    lags = new[0] - grid[0] + GRID_STEP * np.arange(-(len(grid) - 1), len(new))
    full = fftconvolve(mass, np.exp(-0.5 * (lags / d) ** 2))
    return full[len(grid) - 1:len(grid) - 1 + len(new)] / (d * math.sqrt(2 * math.pi))


@dataclass(frozen=True)
class SequentialDesign:
    max_rounds: int
    first_look: int = 3
    alpha: float = ALPHA

    def __post_init__(self):
        if not 1 <= self.first_look <= self.max_rounds:
            raise StatsInputError(f"the first look ({self.first_look} rounds) must lie in 1..max_rounds "
                                  f"({self.max_rounds})")

    def looks(self) -> list[int]:
        """The planned looks (rounds done at each): every round from first_look on."""
        return list(range(self.first_look, self.max_rounds + 1))

    def level_at(self, looks_so_far: Sequence[int]) -> float:
        """The nominal level of the last of the looks taken so far (rounds done at each): the
        paired t-test's (stats/t_levels.py)."""
        return t_test_levels(tuple(min(r, self.max_rounds) for r in looks_so_far), self.max_rounds, self.alpha)[-1]

    def final_level(self) -> float:
        return self.level_at(self.looks())


@dataclass(frozen=True)
class Outcome:
    verdict: Verdict
    rounds: int            # rounds used when it was decided (or all)
    looks: tuple[int, ...]
    decided: bool


def run_sequential(design: SequentialDesign, evaluate: Callable[[int, float], Verdict],
                   rounds_available: int | None = None) -> Outcome:
    """Looks at the rounds in order until a verdict is decided or the rounds run out.
    `evaluate(rounds, alpha)` gives the claim's verdict on the first `rounds` rounds at level alpha."""
    last = design.max_rounds if rounds_available is None else min(rounds_available, design.max_rounds)
    looks: list[int] = []
    verdict = None
    for r in design.looks():
        if r > last:
            break
        looks.append(r)
        verdict = evaluate(r, design.level_at(looks))
        if verdict.verdict != INCONCLUSIVE:
            return Outcome(verdict, r, tuple(looks), True)
    if verdict is None:
        raise StatsInputError(f"no look: {last} rounds available, the first look is at {design.first_look}")
    return Outcome(verdict, looks[-1], tuple(looks), False)


def next_step(design: SequentialDesign, looks_so_far: Sequence[int], verdict: Verdict) -> str:
    """After the last look: "decided", "continue" (add a round) or "exhausted" (max_rounds reached)."""
    if verdict.verdict != INCONCLUSIVE:
        return "decided"
    return "exhausted" if looks_so_far[-1] >= design.max_rounds else "continue"
