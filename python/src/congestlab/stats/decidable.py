"""Can a test decide at all at a given n? Its smallest attainable p, from the structure of the
design alone (docs/statistics.md, "Decidable by design"): the p of the most extreme data the
design allows. A check whose smallest p is not below its level decides nothing whatever the
network does; `needed` says the n at which it would.

- Student's t needs one degree of freedom: two repetitions of a paired comparison (one of a
  one-sample mean or a cell against a band: two samples); with them its p can be as small as
  the data make it (0 in the limit).
- A one-sample compare (one repetition per side) is undetermined: no spread to compare with.
- Gehan's permutation test, which decides a comparison with timed-out samples, permutes the
  labels within rounds: its smallest one-sided p is 2^-rounds (blocked) or 1 / C(2n, n).
- Kendall's tau over k values of x with r repetitions each: computed on a perfect trend with
  scipy (exact without ties, 1/k! for r = 1: 1/6 at three values).
- Two-parameter curves cannot be told apart at fewer than three values of x, nor with fewer
  than four samples (stats/shapes.py).
"""

from __future__ import annotations

import math
from itertools import count

from scipy import stats as st


def t_min_p(samples: int, parameters: int = 1) -> float:
    """A t-test with `samples` - `parameters` degrees of freedom: 0 when it has one, else 1."""
    return 0.0 if samples - parameters >= 1 else 1.0


def gehan_min_p(rounds: int, blocked: bool = True) -> float:
    """Gehan's exact permutation test of two cells, one sample each per round."""
    if rounds < 1:
        return 1.0
    return 2.0 ** -rounds if blocked else 1.0 / math.comb(2 * rounds, rounds)


def kendall_min_p(x_values: int, repetitions: int = 1) -> float:
    """Kendall's tau, one-sided, on a perfect trend over `x_values` values of x, `repetitions`
    samples at each (scipy's p: exact without ties, its asymptotic form with them)."""
    if x_values < 2:
        return 1.0
    xs = [i for i in range(x_values) for _ in range(repetitions)]
    ys = list(range(len(xs)))
    return float(st.kendalltau(xs, ys, alternative="greater").pvalue)


def shape_min_p(x_values: int, samples: int) -> float:
    """The shape test (stats/shapes.py): no curve is told apart below three values of x, and
    with its power free three samples fit exactly."""
    return 0.0 if x_values >= 3 and samples >= 4 else 1.0


def needed(min_p, level: float, start: int, limit: int = 200) -> int | None:
    """The smallest n >= start with min_p(n) < level (None beyond `limit`)."""
    for n in count(start):
        if n > limit:
            return None
        if min_p(n) < level:
            return n
