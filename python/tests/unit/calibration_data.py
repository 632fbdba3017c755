"""Real per-GET delays for the calibration's resampled scenarios (python/tests/unit/calibration_sim.py):
data/stored-delays.csv, three stored quick runs' GETs (its header says where they came from).

What the scenarios resample, each on the log scale:
  - residuals: a completed GET's log delay minus its point's mean, per study. ipv6's are narrow
    (sd 0.16), cubic-compound's wide and heavy-tailed (sd 0.46, up to +1.2): unequal spread.
    Each pool is symmetrized (r and -r), so that "no effect" is one truth whether an effect is
    read as the mean or the median of the log delays (skewed, they differ).
  - pair steps: the log delay of the second minus the first GET of one repetition (ipv6 measures
    v6 and v4 back to back): how much two GETs of one round drift apart.
  - run drift: ipv6's mean residual per repetition in run order, the machine's state over the run.
"""

from __future__ import annotations

import csv
import math
from functools import lru_cache
from pathlib import Path

import numpy as np

DATA = Path(__file__).parent / "data" / "stored-delays.csv"


@lru_cache(maxsize=1)
def rows() -> list[dict]:
    with DATA.open() as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def _completed(study: str) -> list[dict]:
    return [r for r in rows() if r["study"] == study and r["outcome"] == "complete"]


@lru_cache(maxsize=None)
def residuals(study: str) -> np.ndarray:
    """Log delay minus its point's mean log delay, symmetrized."""
    by_point: dict[str, list[float]] = {}
    for r in _completed(study):
        by_point.setdefault(r["point"], []).append(math.log(float(r["delay_ms"])))
    res = np.array([x - np.mean(xs) for xs in by_point.values() if len(xs) > 1 for x in xs])
    return np.concatenate([res, -res])


@lru_cache(maxsize=1)
def pair_steps() -> np.ndarray:
    """Second minus first log delay of each ipv6 repetition (two GETs back to back)."""
    by_run: dict[str, list[tuple[int, float]]] = {}
    for i, r in enumerate(_completed("ipv6")):
        by_run.setdefault(r["run_index"], []).append((i, math.log(float(r["delay_ms"]))))
    return np.array([xs[1][1] - xs[0][1] for xs in by_run.values() if len(xs) == 2])


@lru_cache(maxsize=1)
def run_drift() -> np.ndarray:
    """ipv6's mean residual per repetition, in run order."""
    done = _completed("ipv6")
    means: dict[str, list[float]] = {}
    for r in done:
        means.setdefault(r["point"], []).append(math.log(float(r["delay_ms"])))
    per_run: dict[int, list[float]] = {}
    for r in done:
        per_run.setdefault(int(r["run_index"]), []).append(math.log(float(r["delay_ms"])) - np.mean(means[r["point"]]))
    return np.array([np.mean(per_run[k]) for k in sorted(per_run)])
