"""Per-look levels of the group-sequential paired t-test (docs/statistics.md, "Levels for the
t-test").

The O'Brien–Fleming-type spending (stats/sequential.py) fixes how much alpha each look may spend.
The boundaries of a z-statistic (a Brownian path) do not carry over to the t-statistics of a few
rounds: their spread is re-estimated at every look, so successive looks agree less than a
Brownian path's do, and at the z-boundaries' nominal levels the paired t-test errs 2.7-2.9 % per
side instead of 2.5 % (python/benchmarks/sequential_error.py). The levels here are the t-test's
own: the critical value c_k of a look is the one at which the paired t over the rounds so far
(n_k - 1 degrees of freedom), on the paths no earlier look stopped, crosses with exactly the
look's share of alpha. Under the null the paired t does not depend on the rounds' spread, so its
joint law is that of t-statistics of standard normal differences and c_k is an empirical
quantile of simulated paths; the look's level is P(T_(n_k - 1) > c_k).

The designs every caller uses (first look after 3 rounds, a look after every round, up to
TABLE_MAX_ROUNDS rounds, alpha 2.5 %) come from a table simulated once with many paths
(t_levels.json, written by python/benchmarks/sequential_t_table.py); any other design is simulated
when first asked (PATHS paths, fewer beyond 40 looks, a fixed seed: the same levels on every call).
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from importlib import resources
from typing import Sequence

import numpy as np
from scipy.stats import t as student_t

from congestlab.errors import StatsInputError

PATHS = 1_000_000   # a design off the table: its error is within about 0.01 % of alpha's
MAX_CELLS = 40_000_000  # paths x looks held at once (float32: 160 MB); a design of many looks takes fewer paths
SEED = 20261
_CHUNK = 50_000


def paired_t_paths(rounds: Sequence[int], paths: int, seed: int) -> np.ndarray:
    """The paired t-statistic after each of `rounds` (increasing) on `paths` paths of standard
    normal differences, as float32 (paths x looks); NaN where a look has fewer than 2 rounds."""
    rng = np.random.default_rng(seed)
    last = rounds[-1]
    cols = np.array(rounds) - 1
    n = np.array(rounds, float)
    out = np.empty((paths, len(rounds)), np.float32)
    for start in range(0, paths, _CHUNK):
        m = min(_CHUNK, paths - start)
        d = rng.standard_normal((m, last))
        s = np.cumsum(d, axis=1)[:, cols]
        q = np.cumsum(d * d, axis=1)[:, cols]
        with np.errstate(divide="ignore", invalid="ignore"):
            var = (q - s * s / n) / (n - 1)
            out[start:start + m] = s / np.sqrt(n * var)
    return out


def levels_from_paths(t_paths: np.ndarray, rounds: Sequence[int], targets: Sequence[float]) -> tuple[float, ...]:
    """Each look's level: the critical value at which, of all paths, the share `targets[k]`
    crosses at look k and not before (the paths that crossed earlier are stopped)."""
    total = t_paths.shape[0]
    alive = np.ones(total, bool)
    levels = []
    for k, (n, target) in enumerate(zip(rounds, targets)):
        if n < 2:  # no t-statistic yet: nothing crosses, and no test runs there either
            levels.append(float(target))
            continue
        col = t_paths[:, k]
        if alive.all():  # no look before: the t-distribution's own quantile, exactly
            c = float(student_t.isf(target, n - 1)) if target > 0 else math.inf
        else:
            c = _crossing_at(col[alive].astype(np.float64), target * total, k)
        alive &= ~(col >= c)
        levels.append(float(student_t.sf(c, n - 1)))
    return tuple(levels)


def _crossing_at(live: np.ndarray, want: float, look: int) -> float:
    """The value that `want` (a number of paths, not whole) of `live` reach: between the j-th and
    (j+1)-th largest, j = floor(want); infinite (nothing crosses) below one path's worth."""
    j = int(math.floor(want))
    if j == 0:
        return math.inf
    if j >= len(live):
        raise StatsInputError(f"look {look + 1}: the share to spend exceeds the paths still running")
    top = -np.partition(-live, [j - 1, j])[:j + 1]  # the j-th and (j+1)-th largest in place
    upper, lower = top[j - 1], top[j]
    return float(upper - (want - j) * (upper - lower))


@lru_cache(maxsize=256)
def simulated_levels(rounds: tuple[int, ...], targets: tuple[float, ...], paths: int = PATHS,
                     seed: int = SEED) -> tuple[float, ...]:
    return levels_from_paths(paired_t_paths(rounds, paths, seed), rounds, targets)


@lru_cache(maxsize=1)
def table() -> dict:
    """The stored levels: {"alpha", "first_look", "paths", ..., "levels": {max_rounds: [level per look]}}."""
    text = resources.files("congestlab.stats").joinpath("t_levels.json").read_text()
    data = json.loads(text)
    data["levels"] = {int(k): tuple(v) for k, v in data["levels"].items()}
    return data


def levels(rounds: tuple[int, ...], max_rounds: int, alpha: float, targets: tuple[float, ...]) -> tuple[float, ...]:
    """The level of each look taken after `rounds` rounds (increasing) of a design of `max_rounds`
    rounds spending `alpha` per side; `targets` the alpha each look may spend. A single look
    spends its share exactly at the t-distribution's own quantile."""
    if len(rounds) == 1:
        return (float(targets[0]),)
    stored = table()
    first = stored["first_look"]
    if (alpha == stored["alpha"] and max_rounds in stored["levels"] and rounds[0] == first
            and list(rounds) == list(range(first, first + len(rounds))) and rounds[-1] <= max_rounds):
        return stored["levels"][max_rounds][:len(rounds)]
    return simulated_levels(tuple(rounds), tuple(targets), min(PATHS, MAX_CELLS // len(rounds)))
