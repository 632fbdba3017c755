"""The error per side of the sequential tests at their looks' levels (docs/statistics.md, "Levels
for the t-test"): simulated under the null, a look after every round from the third, one side.

Vectorized (--paths, default 400 000 paths per design):
  - the paired t-test (n - 1 df) at the z-boundaries' nominal levels (stats/sequential.py
    nominal_levels) and at the t-test's own levels (stats/t_levels.py, what the engine uses);
  - the z-test (the spread known) at the z-boundaries' levels: the spending itself;
  - the pooled two-sample t-test (2n - 2 df) and the blocked comparison with two samples per cell
    and round (3n - 1 df) at the t-test's levels.
Through the engine (--engine-paths, default 4 000 claims per design, slower):
  - the censored comparison (stats/median_ratio.compare: the rank test, ~25 % timed out);
  - one cell's censored log median against a range's bound (stats/location.level_effect: the
    Tobit Wald statistic, ~25 % timed out).
--compare-with CHECKOUT adds the paired t at that checkout's levels (e.g. the code before).
Each line gives the Monte Carlo standard error of a 2.5 % rate at its number of paths.

    PYTHONPATH=python/src .venv/bin/python python/benchmarks/sequential_error.py [--rounds 4 6 8]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time

import numpy as np
from scipy.stats import norm, t as student_t

from congestlab.stats.location import level_effect
from congestlab.stats.median_ratio import compare
from congestlab.stats.outcomes import COMPLETE, TIMED_OUT
from congestlab.stats.rules import ALPHA
from congestlab.stats.samples import Cell
from congestlab.stats.sequential import SequentialDesign, nominal_levels

FIRST_LOOK = 3
CHUNK = 50_000


def t_levels(n: int) -> list[float]:
    design = SequentialDesign(n, FIRST_LOOK)
    looks = design.looks()
    return [design.level_at(looks[:i + 1]) for i in range(len(looks))]


def z_levels(n: int) -> list[float]:
    return list(nominal_levels(tuple(r / n for r in range(FIRST_LOOK, n + 1))))


def vector_error(kind: str, n: int, levels: list[float], paths: int, seed: int) -> float:
    """One side's error of `kind` (paired, z, pooled, paired2) over looks 3..n at `levels`."""
    rng = np.random.default_rng(seed)
    rounds = np.arange(FIRST_LOOK, n + 1)
    hits = 0
    for start in range(0, paths, CHUNK):
        m = min(CHUNK, paths - start)
        alive = np.ones(m, bool)
        if kind in ("paired", "z"):
            d = rng.standard_normal((m, n))
            s, q = np.cumsum(d, 1)[:, rounds - 1], np.cumsum(d * d, 1)[:, rounds - 1]
            if kind == "z":
                stat, df = s / np.sqrt(rounds), np.full(len(rounds), np.inf)
            else:
                stat, df = s / np.sqrt(rounds * (q - s * s / rounds) / (rounds - 1)), rounds - 1
        elif kind == "pooled":  # two independent cells, one sample each per round, no blocks
            x, y = rng.standard_normal((m, n)), rng.standard_normal((m, n))
            sx, sy = np.cumsum(x, 1)[:, rounds - 1], np.cumsum(y, 1)[:, rounds - 1]
            qx, qy = np.cumsum(x * x, 1)[:, rounds - 1], np.cumsum(y * y, 1)[:, rounds - 1]
            rss = qx - sx * sx / rounds + qy - sy * sy / rounds
            df = 2 * rounds - 2
            stat = (sx - sy) / rounds / np.sqrt(rss / df * 2 / rounds)
        else:  # two samples per cell and round, the round a block
            a, b = rng.standard_normal((m, n, 2)), rng.standard_normal((m, n, 2))
            d = a.mean(2) - b.mean(2)                    # each round's contrast
            within = ((a - a.mean(2, keepdims=True)) ** 2).sum(2) + ((b - b.mean(2, keepdims=True)) ** 2).sum(2)
            sd_, qd = np.cumsum(d, 1)[:, rounds - 1], np.cumsum(d * d, 1)[:, rounds - 1]
            w = np.cumsum(within, 1)[:, rounds - 1]
            # the block model's residual: within cells (2n df) + the contrasts' scatter x 2*2/4 (n - 1 df)
            rss = w + (qd - sd_ * sd_ / rounds)
            df = 3 * rounds - 1
            stat = sd_ / rounds / np.sqrt(rss / df / rounds)
        for k, level in enumerate(levels):
            cross = alive & (stat[:, k] >= student_t.isf(level, df[k]))
            hits += int(cross.sum())
            alive &= ~cross
    return hits / paths


def _censored(values: np.ndarray, limit: float, blocks) -> Cell:
    done = values < limit
    return Cell.of(np.where(done, np.exp(values), math.nan), [COMPLETE if c else TIMED_OUT for c in done], blocks,
                   math.exp(limit))


def engine_error(kind: str, n: int, levels: list[float], claims: int, seed: int) -> float:
    """One side's error through the engine: `compare` (rank test) or `level` (Tobit Wald)."""
    rng = np.random.default_rng(seed)
    limit = norm.isf(0.25) * math.hypot(1.0, 0.3)  # ~25 % of the samples time out
    hits = 0
    for _ in range(claims):
        block = rng.normal(0, 0.3, n)
        if kind == "compare":
            a = _censored(block + rng.standard_normal(n), limit, range(n))
            b = _censored(block + rng.standard_normal(n), limit, range(n))
        else:
            a = _censored(rng.standard_normal(n) * math.hypot(1.0, 0.3), limit, range(n))
        for k, level in enumerate(levels):
            keep = set(range(FIRST_LOOK + k))
            if kind == "compare":
                p = compare(a.first_blocks(keep), b.first_blocks(keep)).p_above(0.0)
            else:
                p = level_effect(a.first_blocks(keep)).p_above(0.0)
            if p < level:
                hits += 1
                break
    return hits / claims


def levels_of(checkout: str, designs: list[int]) -> dict[int, list[float]]:
    """The look levels another checkout's engine gives (its python/src on PYTHONPATH)."""
    code = ("import json,sys\nfrom congestlab.stats.sequential import SequentialDesign\nout={}\n"
            f"for n in {designs}:\n d=SequentialDesign(n,{FIRST_LOOK}); looks=d.looks()\n"
            " out[n]=[d.level_at(looks[:i+1]) for i in range(len(looks))]\nprint(json.dumps(out))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": f"{checkout}/python/src", "PATH": "/usr/bin:/bin"})
    return {int(k): v for k, v in json.loads(res.stdout).items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, nargs="*", default=[4, 5, 6, 8, 10, 12, 16, 20, 30, 40])
    ap.add_argument("--paths", type=int, default=400_000)
    ap.add_argument("--engine-paths", type=int, default=4_000)
    ap.add_argument("--compare-with", default=None, help="a checkout whose levels to measure the paired t at too")
    args = ap.parse_args()
    se = math.sqrt(ALPHA * (1 - ALPHA) / args.paths)
    se_engine = math.sqrt(ALPHA * (1 - ALPHA) / args.engine_paths) if args.engine_paths else math.nan
    other = levels_of(args.compare_with, args.rounds) if args.compare_with else {}
    print(f"one side's error, null; {args.paths} paths a design (MC se {se:.3%}); engine rows {args.engine_paths} "
          f"claims (MC se {se_engine:.2%})")
    head = ["rounds", "paired t @z", "paired t @t", "z @z", "pooled t @t", "2/round t @t"]
    head += ["paired t @other"] if other else []
    head += ["compare (rank) @t", "Tobit Wald @t"] if args.engine_paths else []
    print(" | ".join(head))
    for n in args.rounds:
        started = time.monotonic()
        zl, tl = z_levels(n), t_levels(n)
        row = [vector_error("paired", n, zl, args.paths, 1), vector_error("paired", n, tl, args.paths, 2),
               vector_error("z", n, zl, args.paths, 3), vector_error("pooled", n, tl, args.paths, 4),
               vector_error("paired2", n, tl, args.paths, 5)]
        if other:
            row.append(vector_error("paired", n, other[n], args.paths, 6))
        if args.engine_paths:
            row += [engine_error("compare", n, tl, args.engine_paths, 7), engine_error("level", n, tl,
                                                                                        args.engine_paths, 8)]
        print(f"{n:6d} | " + " | ".join(f"{x:.3%}" for x in row) + f"   ({time.monotonic() - started:.0f} s)",
              flush=True)


if __name__ == "__main__":
    main()
