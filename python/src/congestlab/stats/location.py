"""Effects that are a location rather than a ratio of two cells, each the intercept of the
censored normal model (stats/tobit.py): one cell's log (geometric) median (`level_effect`), and
a - b in the metric's unit over the blocks both cells have (`paired_difference`). The rules
decide on them on their own scale (stats/rules.py, raw_magnitude).
"""

from __future__ import annotations

import math

import numpy as np

from congestlab.stats import tobit
from congestlab.stats.effect import Effect
from congestlab.stats.samples import RIGHT, Cell


def _intercept_effect(values: list[float], kind: list[int], counts: dict) -> Effect:
    """The mean of `values` (censored: kind +1 above, -1 below) as an effect, from the censored
    normal model with an intercept only (stats/tobit.py)."""
    done = sum(1 for k in kind if k == 0)
    if done < 2:
        return Effect(math.nan, math.inf, 0, blocks=0, sd_pair=math.nan,
                      note=f"{done} completed sample(s): no spread to test with", **counts)
    f = tobit.fit(np.ones((len(values), 1)), np.asarray(values, float), np.asarray(kind))
    if not f.converged:
        return Effect(float(f.beta[0]), math.inf, f.df, blocks=0, sd_pair=math.nan,
                      note="the censored fit did not converge", **counts)
    return Effect(float(f.beta[0]), float(math.sqrt(f.cov[0, 0])), f.df, blocks=0, sd_pair=f.sigma, **counts)


def _by_block(c: Cell) -> dict:
    """A cell's valid samples (value, completed) per block."""
    return {blk: [(v, done) for v, done, b2 in c.valid() if b2 == blk] for _, _, blk in c.valid()}


def paired_difference(a: Cell, b: Cell) -> Effect:
    """a - b in the metric's unit, over the repetitions where each cell has one sample: a
    censored sample makes the difference censored (a delay of a beyond its timeout: a - b above
    the bound); both censored tells nothing and is left out (still counted as censored)."""
    ba, bb = _by_block(a), _by_block(b)
    right = a.censoring == RIGHT
    values, kind = [], []
    for blk in ba:
        if blk is None or blk not in bb or len(ba[blk]) != 1 or len(bb[blk]) != 1:
            continue
        (va, da), (vb, db) = ba[blk][0], bb[blk][0]
        if da and db:
            values.append(va - vb), kind.append(0)
        elif da != db:
            values.append(va - vb)
            # a censored beyond (right) / below (left) its bound moves a - b the same way; b the other
            kind.append((1 if right else -1) * (1 if not da else -1))
    counts = dict(n=(a.n, b.n), censored=(a.censored, b.censored), invalid=(a.invalid, b.invalid))
    return _intercept_effect(values, kind, counts)


def level_effect(cell: Cell) -> Effect:
    """The cell's log (geometric) median from the censored log-normal model, intercept only."""
    side = 1 if cell.censoring == RIGHT else -1
    rows = cell.valid()
    counts = dict(n=(cell.n, 0), censored=(cell.censored, 0), invalid=(cell.invalid, 0))
    return _intercept_effect([math.log(v) for v, _, _ in rows], [0 if c else side for _, c, _ in rows], counts)
