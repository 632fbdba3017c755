"""How often one more completed GET of the slower cell raises the p of "it is slower", or turns
"holds" into "inconclusive" (docs/statistics.md, "Comparing two cells"), under three ways of
deciding a censored comparison, all read off stats/median_ratio.compare:

  before      the model's Wald test where it fits; Gehan's test only where a cell has no
              completed sample; p = 1 where the model cannot be fitted (the code before);
  fallback    the same with Gehan's test wherever the model cannot be fitted;
  now         Gehan's test for every comparison with a timed-out sample (the engine's).

Random cells of 2..8 rounds, one GET per cell and round, the slower cell's with an effect of
0..3 on the log scale, a common timeout (at -0.5..+3.5 from the faster cell's level). A step
completes one timed-out GET of the slower cell, or adds a GET, at a value beyond every GET of the
faster cell. `separated`: the slower cell's GETs all lie beyond the faster cell's (the property
test's cells, python/tests/unit/test_stats_censoring_monotone.py); `any`: only the step's GET does.
Steps that complete the last timed-out GET (then the uncensored t-test decides) are counted apart.

    PYTHONPATH=python/src .venv/bin/python python/benchmarks/censoring_monotone.py --cases 5000
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from scipy import stats as st

from congestlab.stats.median_ratio import compare
from congestlab.stats.outcomes import COMPLETE, TIMED_OUT
from congestlab.stats.rules import ALPHA
from congestlab.stats.samples import Cell

WAYS = ("before", "fallback", "now")


def p_ways(la: list[float], lb: np.ndarray, limit: float, blocks: list[int]) -> dict[str, float]:
    a = Cell.of([math.exp(x) if x < limit else math.nan for x in la],
                [COMPLETE if x < limit else TIMED_OUT for x in la], blocks, math.exp(limit))
    e = compare(a, Cell.of(np.exp(lb), blocks=range(len(lb))))
    model = float(st.t.sf(e.estimate / e.se, e.df)) if e.determined else None
    rank = e.rank_test(0.0)[0] if e.rank_test else 1.0
    unbounded = "no completed sample" in e.note
    return {"before": model if model is not None else rank if unbounded else 1.0,
            "fallback": model if model is not None else rank, "now": e.p_above(0.0)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    started = time.monotonic()
    tally = {(dom, kind, way, what): 0 for dom in ("separated", "any") for kind in ("censored left", "last one")
             for way in WAYS for what in ("steps", "p up", "holds lost")}
    for _ in range(args.cases):
        n = int(rng.integers(2, 9))
        level = rng.normal(0, 0.3, n)
        sigma = rng.uniform(0.05, 1.0)
        lb = 4.6 + level + rng.normal(0, sigma, n)
        limit = 4.6 + rng.uniform(-0.5, 3.5)
        if lb.max() >= limit:
            continue
        separated = rng.random() < 0.5
        if separated:  # the slower cell wholly beyond the faster one
            la = [float(rng.uniform(lb.max(), limit)) if rng.random() < 0.5 else limit for _ in range(n)]
        else:
            la = list(4.6 + rng.uniform(0, 3) + level + rng.normal(0, sigma, n))
        censored = [i for i, x in enumerate(la) if x >= limit]
        if not censored:
            continue
        before = p_ways(la, lb, limit, list(range(n)))
        done = list(la)
        done[int(rng.choice(censored))] = float(rng.uniform(lb.max(), limit))
        steps = [(done, list(range(n)), len(censored) > 1),
                 (la + [float(rng.uniform(lb.max(), limit))], list(range(n)) + [int(rng.integers(n))], True)]
        dom = "separated" if separated else "any"
        for la2, blocks, left in steps:
            after = p_ways(la2, lb, limit, blocks)
            kind = "censored left" if left else "last one"
            for way in WAYS:
                tally[dom, kind, way, "steps"] += 1
                tally[dom, kind, way, "p up"] += after[way] > before[way] * (1 + 1e-9) + 1e-12
                tally[dom, kind, way, "holds lost"] += before[way] < ALPHA <= after[way]
    print(f"{args.cases} random cases in {time.monotonic() - started:.0f} s; per way: steps, p up, holds lost")
    for dom in ("separated", "any"):
        for kind in ("censored left", "last one"):
            cols = [f"{way} {tally[dom, kind, way, 'steps']}/{tally[dom, kind, way, 'p up']}/"
                    f"{tally[dom, kind, way, 'holds lost']}" for way in WAYS]
            print(f"{dom:9} {kind:13} " + "   ".join(cols))


if __name__ == "__main__":
    main()
