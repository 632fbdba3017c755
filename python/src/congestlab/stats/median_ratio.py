"""The effect of cell a against cell b: the log of the ratio of their (geometric) medians, from the
censored log-normal model with the round as a block (congestlab/stats/tobit.py).

With blocks shared by both cells, each block gets its own level (a fixed effect), so a round
that ran slow for everyone does not blur the comparison; without censoring this is the paired
t-test on log values. Blocks that only one cell has, or where every sample is censored, carry no
information on the effect and are left out (their samples still count in n, censored, invalid).
With fewer than two shared blocks the cells are compared unblocked, with one sigma for both cells
(a pooled model: it assumes equal spread on the log scale, which the blocked, paired form does not).

With a timed-out sample among them, Gehan's permutation test (stats/gehan.py, blocked alike)
gives the p-values, so the verdict, whether the model can be fitted or not; the model still gives
the estimate and CI shown. One test for every censored comparison keeps censoring monotone: the
model's Wald test is not (a timed-out GET that completes instead, below its limit, lowers the
estimate; one completion among censored ones leaves no degrees of freedom, two leave one), so
deciding by it where it fits and by the rank test where it does not lets one more completed GET,
slower than every GET of the other cell, turn "holds" into "inconclusive"
(python/tests/unit/test_stats_censoring_monotone.py).
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from congestlab.errors import StatsInputError
from congestlab.stats import gehan, tobit
from congestlab.stats.effect import Effect
from congestlab.stats.samples import RIGHT, Cell


def compare(a: Cell, b: Cell, blocked: bool = True) -> Effect:
    if a.censoring != b.censoring:
        raise StatsInputError("the two cells are censored on different sides")
    counts = dict(n=(a.n, b.n), censored=(a.censored, b.censored), invalid=(a.invalid, b.invalid))
    rows = [(v, c, blk, 1.0) for v, c, blk in a.valid()] + [(v, c, blk, 0.0) for v, c, blk in b.valid()]
    shared = ({blk for _, _, blk in a.valid()} & {blk for _, _, blk in b.valid()}) - {None}
    # a block whose samples are all censored pins nothing but its own level
    informative = {blk for blk in shared if any(c for v, c, b2, _ in rows if b2 == blk)}
    use_blocks = blocked and len(informative) >= 2
    if use_blocks:
        rows = [r for r in rows if r[2] in informative]
    order = sorted(informative, key=str) if use_blocks else []
    right = a.censoring == RIGHT
    # with a timed-out sample the rank test decides; the model only estimates (the module's note)
    test = _gehan(rows, use_blocks, right) if not all(c for _, c, _, _ in rows) else None
    for side, name in ((1.0, "a"), (0.0, "b")):
        if not any(c for _, c, _, s in rows if s == side):
            return Effect(math.nan, math.inf, 0, blocks=len(order), sd_pair=math.nan,
                          note=f"{name} has no completed sample{' in the blocks it shares' if use_blocks else ''}: "
                               f"the effect is unbounded; {DECIDES}", **counts, rank_test=test)
    X = np.array([[1.0, s] + [1.0 if blk == o else 0.0 for o in order[1:]] for _, _, blk, s in rows])
    z = np.log(np.array([v for v, *_ in rows]))
    kind = np.array([0 if c else (1 if right else -1) for _, c, _, _ in rows])
    done = kind == 0
    if np.linalg.matrix_rank(X[done]) < X.shape[1] or int(done.sum()) <= X.shape[1]:
        # uncensored, this is one sample a cell: no test can decide it (Gehan's smallest p is 1/2)
        return Effect(math.nan, math.inf, 0, blocks=len(order), sd_pair=math.nan,
                      note=f"too few completed samples ({int(done.sum())}) for {X.shape[1]} coefficients"
                           + (f": {DECIDES}" if test else ""), **counts, rank_test=test)
    f = tobit.fit(X, z, kind)
    if not f.converged:
        return Effect(float(f.beta[1]), math.inf, f.df, blocks=len(order), sd_pair=math.nan,
                      note="the censored fit did not converge" + (f": {DECIDES}" if test else ""), **counts,
                      rank_test=test)
    return Effect(float(f.beta[1]), float(math.sqrt(f.cov[1, 1])), f.df, blocks=len(order),
                  sd_pair=f.sigma * math.sqrt(2), note=f"timed-out samples: {DECIDES}" if test else "", **counts,
                  rank_test=test)


DECIDES = "Gehan's permutation test decides"


def _gehan(rows, blocked: bool, right: bool) -> Callable[[float], tuple[float, float]]:

    side_a = [r for r in rows if r[3] == 1.0]
    side_b = [r for r in rows if r[3] == 0.0]
    cache: dict[float, tuple[float, float]] = {}

    def test(threshold: float) -> tuple[float, float]:
        if threshold not in cache:
            cache[threshold] = gehan.p_values(
                [math.log(v) for v, *_ in side_a], [c for _, c, *_ in side_a],
                [math.log(v) for v, *_ in side_b], [c for _, c, *_ in side_b],
                [r[2] for r in side_a] if blocked else None, [r[2] for r in side_b] if blocked else None,
                right, threshold)
        return cache[threshold]

    return test
