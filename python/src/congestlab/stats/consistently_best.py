""""No cell is consistently better than the others" across the values of a dimension (the
`best` rule with `along`; seed 000's "no particular combination of weight and sampling strategy
is consistently better than the others"; docs/statistics.md, "Claims over cells").

The statement is about every cell: none is better than every other at every level. So it
**holds** when every cell X is beaten somewhere: at some level some other cell is significantly
better than X (for each X a union over its (level, rival) comparisons, Bonferroni over them;
then an intersection over the cells, unadjusted: p_holds is the largest X's adjusted p). It
**does not hold** when some cell is significantly better than every other at every level (for a
cell an intersection of its comparisons, its p the largest; a union over the cells, Bonferroni).

The family has to decide at a study's n. Each level is one censored log-normal model with a
mean per cell and a level per round (stats/tobit.py: log y = cell + round + sigma e), so every
comparison of that level uses one pooled sigma with (cells - 1)(rounds - 1) degrees of freedom
rather than a pair's rounds - 1 (27 cells and 3 rounds: 52 instead of 2), the assumption of
one spread on the log scale for the level's cells being the price. A cell none of whose samples
completed at a level has no finite mean there and is left out of that level (named in the
note), which only loses comparisons.
"""

from __future__ import annotations

import math
from typing import Hashable

import numpy as np
from scipy import stats as st

from congestlab.stats import tobit
from congestlab.stats.rules import FAILS, HOLDS, INCONCLUSIVE, Verdict
from congestlab.stats.samples import RIGHT, Cell


def _level_model(cells: dict[str, Cell]) -> tuple[dict[str, int], np.ndarray, np.ndarray, int] | None:
    """One level's fit: (cell -> coefficient index (None for the baseline), beta, cov, df)."""
    names = [c for c, cell in cells.items() if cell.completed()]
    if len(names) < 2:
        return None
    rows = [(math.log(v), done, blk, name) for name in names for v, done, blk in cells[name].valid()]
    blocks: list[Hashable] = sorted({blk for *_, blk, _ in rows if blk is not None}, key=str)
    use_blocks = len(blocks) >= 2 and all(blk is not None for *_, blk, _ in rows)
    index = {name: i for i, name in enumerate(names)}
    p = len(names) + (len(blocks) - 1 if use_blocks else 0)
    X = np.zeros((len(rows), p))
    for r, (_, _, blk, name) in enumerate(rows):
        X[r, 0] = 1.0
        if index[name] > 0:
            X[r, index[name]] = 1.0
        if use_blocks and blk != blocks[0]:
            X[r, len(names) + blocks.index(blk) - 1] = 1.0
    right = next(iter(cells.values())).censoring == RIGHT
    kind = np.array([0 if done else (1 if right else -1) for _, done, _, _ in rows])
    done = kind == 0
    if np.linalg.matrix_rank(X[done]) < p or int(done.sum()) <= p:
        return None
    f = tobit.fit(X, np.array([z for z, *_ in rows]), kind)
    if not f.converged:
        return None
    return index, f.beta, f.cov, f.df


def _p_better(model, x: str, y: str, higher: bool) -> float:
    """One-sided p that cell x is better than cell y at this level."""
    index, beta, cov, df = model
    i, j = index[x], index[y]
    d = (beta[i] if i else 0.0) - (beta[j] if j else 0.0)
    var = (cov[i, i] if i else 0.0) + (cov[j, j] if j else 0.0) - (2 * cov[i, j] if i and j else 0.0)
    if not var > 0:
        return 1.0
    t = d / math.sqrt(var)
    return float(st.t.sf(t, df) if higher else st.t.cdf(t, df))


def no_cell_consistently_best(levels: dict[str, dict[str, Cell]], best: str = "highest", alpha: float = 0.025,
                              label: str = "") -> Verdict:
    """levels: {level: {cell: Cell}}; best: "highest" or "lowest" (module docstring)."""
    higher = best == "highest"
    names = sorted({c for cells in levels.values() for c in cells}, key=str)
    models, left_out = {}, []
    for level, cells in levels.items():
        model = _level_model(cells)
        if model is not None:
            models[level] = model
            left_out += [f"{c} at {level}" for c in cells if c not in model[0]]
    n = sum(c.n for cells in levels.values() for c in cells.values())
    censored = sum(c.censored for cells in levels.values() for c in cells.values())
    invalid = sum(c.invalid for cells in levels.values() for c in cells.values())
    rule = (f"no cell {best} at every level: every cell significantly beaten at some level (Bonferroni over its "
            f"comparisons; one censored model per level, pooled sigma); does not hold: one cell significantly "
            f"{best} against every other at every level (Bonferroni over the {len(names)} cells)")
    note = ("left out (no completed sample): " + ", ".join(left_out)) if left_out else ""
    if len(models) < 2:
        return Verdict(INCONCLUSIVE, rule, math.nan, (math.nan, math.nan), 1.0, 1.0, n, censored, invalid, alpha,
                       label, (note + "; " if note else "") + f"{len(models)} level(s) with a model: no change to see",
                       kind="consistently best")
    beaten, best_everywhere = [], []
    for x in names:
        rivals = [(lvl, y) for lvl, m in models.items() if x in m[0] for y in m[0] if y != x]
        ps = [_p_better(models[lvl], y, x, higher) for lvl, y in rivals]
        beaten.append(min(1.0, min(ps) * len(ps)) if ps else 1.0)
        if all(x in m[0] for m in models.values()) and rivals:
            best_everywhere.append(max(_p_better(models[lvl], x, y, higher) for lvl, y in rivals))
    p_holds = max(beaten)
    p_fails = min(1.0, min(best_everywhere) * len(names)) if best_everywhere else 1.0
    verdict = FAILS if p_fails < alpha else HOLDS if p_holds < alpha else INCONCLUSIVE
    return Verdict(verdict, rule, math.nan, (math.nan, math.nan), p_holds, p_fails, n, censored, invalid, alpha,
                   label, note, kind="consistently best")
