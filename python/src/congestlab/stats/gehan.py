"""Gehan's generalized Wilcoxon test with its exact permutation distribution, for the comparisons
the censored log-normal model cannot estimate: a cell none of whose samples completed (every GET
of it timed out). Then the effect is unbounded and has no CI, but "a is slower than b" can still
be shown: every sample of b finished before any of a timed out.

Scores (Mantel's form): each sample counts the samples it is surely above minus those it is surely
below, given the censoring; the statistic is the sum of a's scores. Permutations swap the cell
labels within each block (all of them when unblocked): exactly when there are at most
EXACT_MAX arrangements, else MONTE_CARLO seeded draws. A threshold v tests log(a) - v against
log(b) (a's values and limits shifted), so margins work as for the model.
"""

from __future__ import annotations

import itertools
import math
from typing import Hashable, Sequence

import numpy as np

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
