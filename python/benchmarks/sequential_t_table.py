"""Writes python/src/congestlab/stats/t_levels.json: the per-look levels of the group-sequential
paired t-test (congestlab/stats/t_levels.py) for the designs every caller uses: first look after
3 rounds, a look after every round, 4..MAX_ROUNDS rounds, alpha 2.5 % per side.

Each design's levels are the mean over RUNS independent simulations of PATHS paths each (one
set of paths of MAX_ROUNDS rounds serves every design of a run: design N looks at its first
N - 2 columns). The spread of the runs' final-look levels is printed beside each design.

    PYTHONPATH=python/src .venv/bin/python python/benchmarks/sequential_t_table.py   # ~2 min
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from congestlab.stats import t_levels
from congestlab.stats.rules import ALPHA
from congestlab.stats.sequential import increments

FIRST_LOOK = 3
MAX_ROUNDS = 40
OUT = Path(__file__).resolve().parents[1] / "src" / "congestlab" / "stats" / "t_levels.json"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--paths", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--max-rounds", type=int, default=MAX_ROUNDS)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    all_rounds = tuple(range(FIRST_LOOK, args.max_rounds + 1))
    per_run: dict[int, list[tuple[float, ...]]] = {n: [] for n in range(FIRST_LOOK + 1, args.max_rounds + 1)}
    started = time.monotonic()
    for run in range(args.runs):
        paths = t_levels.paired_t_paths(all_rounds, args.paths, seed=1000 + run)
        for n in per_run:
            rounds = all_rounds[:n - FIRST_LOOK + 1]
            targets = increments(tuple(r / n for r in rounds), ALPHA)
            per_run[n].append(t_levels.levels_from_paths(paths, rounds, targets))
        print(f"run {run + 1}/{args.runs}: {time.monotonic() - started:.0f} s", flush=True)
        del paths
    levels = {}
    for n, runs in per_run.items():
        mean = np.mean(np.array(runs), axis=0)
        levels[str(n)] = [float(f"{x:.6g}") for x in mean]
        last = [r[-1] for r in runs]
        print(f"{n:3d} rounds: last look {mean[-1]:.5f} (runs {min(last):.5f}..{max(last):.5f})")
    data = {"what": "per-look nominal levels of the group-sequential paired t-test (congestlab/stats/t_levels.py)",
            "written_by": "python/benchmarks/sequential_t_table.py", "alpha": ALPHA, "first_look": FIRST_LOOK,
            "paths": args.paths * args.runs, "runs": args.runs, "seeds": [1000 + r for r in range(args.runs)],
            "levels": levels}
    text = json.dumps({k: v for k, v in data.items() if k != "levels"}, indent=1)[:-2]
    rows = ",\n".join(f'  "{n}": {json.dumps(v)}' for n, v in levels.items())
    args.out.write_text(text + ',\n "levels": {\n' + rows + "\n }\n}\n")
    json.loads(args.out.read_text())  # still JSON
    print(f"wrote {args.out} in {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
