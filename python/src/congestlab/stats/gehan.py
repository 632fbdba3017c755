"""Gehan's generalized Wilcoxon test with its exact permutation distribution, for the comparisons
the censored log-normal model cannot estimate: a cell none of whose samples completed (every GET
of it timed out). Then the effect is unbounded and has no CI, but "a is slower than b" can still
be shown: every sample of b finished before any of a timed out.

Scores (Mantel's form): each sample counts the samples it is surely above minus those it is surely
below, given the censoring; the statistic is the sum of a's scores. Permutations swap the cell
labels within each block (all of them when unblocked): exactly when there are at most
EXACT_MAX arrangements, else MONTE_CARLO seeded draws. A threshold v tests log(a) - v against
log(b) (a's values and limits shifted), so margins work as for the model.

Cells with values <= 0 have no ratio at all: `rank_effect` compares them on the values
themselves, for the direction only.
"""

from __future__ import annotations

import itertools
import math
from typing import Hashable, Sequence

import numpy as np

from congestlab.stats.effect import Effect
from congestlab.stats.samples import RIGHT, Cell

EXACT_MAX = 20000
MONTE_CARLO = 5000


def scores(log_values: np.ndarray, complete: np.ndarray, right: bool) -> np.ndarray:
    v, c = log_values, complete
    above = v[:, None] > v[None, :]
    below = v[:, None] < v[None, :]
    if right:  # a censored value is above its limit
        surely_above = above & c[None, :]
        surely_below = below & c[:, None]
    else:      # below its limit
        surely_above = above & c[:, None]
        surely_below = below & c[None, :]
    return surely_above.sum(axis=1) - surely_below.sum(axis=1)


def p_values(log_a: Sequence[float], done_a: Sequence[bool], log_b: Sequence[float], done_b: Sequence[bool],
             blocks_a: Sequence[Hashable] | None, blocks_b: Sequence[Hashable] | None, right: bool,
             shift: float = 0.0) -> tuple[float, float]:
    """(p that log(a) - shift lies above log(b), p that it lies below), one-sided, by permutation."""
    v = np.array([x - shift for x in log_a] + list(log_b), float)
    c = np.array(list(done_a) + list(done_b), bool)
    s = scores(v, c, right)
    n_a = len(log_a)
    observed = s[:n_a].sum()
    if blocks_a is None:
        strata = [list(range(len(v)))]
        counts = [n_a]
    else:
        labels = list(blocks_a) + list(blocks_b)
        keys = list(dict.fromkeys(labels))
        strata = [[i for i, lab in enumerate(labels) if lab == k] for k in keys]
        counts = [sum(1 for i in idx if i < n_a) for idx in strata]
    arrangements = math.prod(math.comb(len(idx), k) for idx, k in zip(strata, counts))
    if arrangements <= EXACT_MAX:
        per_stratum = [[s[list(pick)].sum() for pick in itertools.combinations(idx, k)]
                       for idx, k in zip(strata, counts)]
        totals = np.array([sum(t) for t in itertools.product(*per_stratum)])
    else:
        rng = np.random.default_rng(0)
        totals = np.zeros(MONTE_CARLO)
        for idx, k in zip(strata, counts):
            # each row a random order of the stratum; its first k are a's
            picks = np.argsort(rng.random((MONTE_CARLO, len(idx))), axis=1)[:, :k]
            totals += s[np.array(idx)][picks].sum(axis=1)
        totals = np.append(totals, observed)  # the observed arrangement is one of them
    return float(np.mean(totals >= observed)), float(np.mean(totals <= observed))


def rank_effect(a: Cell, b: Cell) -> Effect:
    """a against b for cells with values <= 0 (no ratio): an undetermined effect whose direction
    Gehan's permutation test on the values decides, blocked when every sample's block is shared
    by both cells (at least two of them); a margin stays undecided."""
    counts = dict(n=(a.n, b.n), censored=(a.censored, b.censored), invalid=(a.invalid, b.invalid))
    va, vb = a.valid(), b.valid()
    shared = {blk for _, _, blk in va} & {blk for _, _, blk in vb}
    blocked = len(shared) >= 2 and all(blk in shared for _, _, blk in va + vb)

    def fallback(threshold: float) -> tuple[float, float]:
        if threshold != 0.0 or not va or not vb:
            return 1.0, 1.0
        return p_values([v for v, _, _ in va], [c for _, c, _ in va], [v for v, _, _ in vb],
                        [c for _, c, _ in vb], [blk for *_, blk in va] if blocked else None,
                        [blk for *_, blk in vb] if blocked else None, a.censoring == RIGHT)

    return Effect(math.nan, math.inf, 0, blocks=0, sd_pair=math.nan, fallback=fallback,
                  note="values <= 0 have no ratio: Gehan's permutation test on the values decides the "
                       "direction; a margin cannot be decided", **counts)
