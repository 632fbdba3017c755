"""Gehan's generalized Wilcoxon test with its exact permutation distribution: the test that
decides every comparison with a timed-out sample in it (stats/median_ratio.py), including a cell
none of whose samples completed, where the effect is unbounded and has no CI but "a is slower
than b" can still be shown.

Scores (Mantel's form): each sample counts the samples it is surely above minus those it is surely
below, given the censoring; the statistic is the sum of a's scores. Permutations swap the cell
labels within each block (all of them when unblocked), and the p-value is exact: the permutation
distribution of the sum is counted by dynamic programming over each block's scores and convolved
over the blocks (no Monte Carlo floor). Only a stratum too large to count (STRATUM_MAX_CELLS)
takes the normal approximation with the permutation distribution's own mean and variance.

Blocked, the values are aligned first: each block's mean (of values and limits alike, a function
of the block's samples whatever their labels, so the permutation test stays exact) is taken off
its samples. The scores then compare within-block deviations across blocks, as the Wilcoxon
signed-rank test does for pairs, rather than the blocks' levels. A threshold v tests log(a) - v
against log(b) (a's values and limits shifted), so margins work as for the model.

Cells with values <= 0 have no ratio at all: `rank_effect` compares them on the values
themselves, for the direction only.
"""

from __future__ import annotations

import math
from typing import Hashable, Sequence

import numpy as np
from scipy.special import ndtr

from congestlab.stats.effect import Effect
from congestlab.stats.samples import RIGHT, Cell

STRATUM_MAX_CELLS = 20_000_000  # (samples x picks x range of sums) of one stratum's count; beyond: normal


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
    n_a = len(log_a)
    if blocks_a is None:
        strata = [np.arange(len(v))]
    else:
        labels = list(blocks_a) + list(blocks_b)
        keys = list(dict.fromkeys(labels))
        strata = [np.array([i for i, lab in enumerate(labels) if lab == k]) for k in keys]
        for idx in strata:  # align: each block's own level off (a symmetric function of its samples)
            v[idx] -= v[idx].mean()
    s = scores(v, c, right).astype(np.int64)
    observed = int(s[:n_a].sum())
    picks = [int(np.sum(idx < n_a)) for idx in strata]
    if any(len(idx) * k * k * max(1, int(np.ptp(s[idx]))) > STRATUM_MAX_CELLS for idx, k in zip(strata, picks)):
        return _normal(s, strata, picks, observed)
    offset, probs = 0, np.ones(1)
    for idx, k in zip(strata, picks):
        low, dist = _sum_distribution(s[idx], k)
        offset, probs = offset + low, np.convolve(probs, dist)
    at = observed - offset
    return min(1.0, float(probs[at:].sum())), min(1.0, float(probs[:at + 1].sum()))


def _sum_distribution(x: np.ndarray, k: int) -> tuple[int, np.ndarray]:
    """The distribution of the sum of k of the integers x picked at random, counted exactly:
    (the smallest sum, the probability of each sum from it upwards)."""
    low = int(x.min())
    shifted = x - low
    width = k * int(shifted.max()) + 1
    ways = np.zeros((k + 1, width))
    ways[0, 0] = 1.0
    for xi in shifted:  # with xi or without it; each item once (the update reads the old table)
        if xi == 0:
            ways[1:] = ways[1:] + ways[:-1]
        else:
            ways[1:, xi:] = ways[1:, xi:] + ways[:-1, :width - xi]
    dist = ways[k]
    return k * low, dist / dist.sum()


def _normal(s: np.ndarray, strata: list[np.ndarray], picks: list[int], observed: int) -> tuple[float, float]:
    """The normal approximation with the permutation distribution's exact mean and variance
    (sampling k of m scores without replacement, per stratum), with a continuity correction of
    half the step between the sum's possible values."""
    mean = var = 0.0
    step = 0
    for idx, k in zip(strata, picks):
        m, x = len(idx), s[idx].astype(float)
        mean += k * x.mean()
        step = math.gcd(step, *(int(d) for d in s[idx] - s[idx][0]))
        if m > 1:
            var += k * (m - k) / (m * (m - 1)) * float(np.sum((x - x.mean()) ** 2))
    if var <= 0:
        return 1.0, 1.0
    sd, half = math.sqrt(var), step / 2
    return float(ndtr(-(observed - half - mean) / sd)), float(ndtr((observed + half - mean) / sd))


def rank_effect(a: Cell, b: Cell) -> Effect:
    """a against b for cells with values <= 0 (no ratio): an undetermined effect whose direction
    Gehan's permutation test on the values decides, blocked when every sample's block is shared
    by both cells (at least two of them); a margin stays undecided."""
    counts = dict(n=(a.n, b.n), censored=(a.censored, b.censored), invalid=(a.invalid, b.invalid))
    va, vb = a.valid(), b.valid()
    shared = {blk for _, _, blk in va} & {blk for _, _, blk in vb}
    blocked = len(shared) >= 2 and all(blk in shared for _, _, blk in va + vb)

    def test(threshold: float) -> tuple[float, float]:
        if threshold != 0.0 or not va or not vb:
            return 1.0, 1.0
        return p_values([v for v, _, _ in va], [c for _, c, _ in va], [v for v, _, _ in vb],
                        [c for _, c, _ in vb], [blk for *_, blk in va] if blocked else None,
                        [blk for *_, blk in vb] if blocked else None, a.censoring == RIGHT)

    return Effect(math.nan, math.inf, 0, blocks=0, sd_pair=math.nan, rank_test=test,
                  note="values <= 0 have no ratio: Gehan's permutation test on the values decides the "
                       "direction; a margin cannot be decided", **counts)
