"""The calibration of the statistics engine, larger: python/tests/unit/test_stats_calibration.py's
scenarios with --scale times their claims (other seeds with --seed), and its check; prints the
table (errors per side at the design's look levels and under both negative controls), what fails
the check under each schedule, and the time it took.

    PYTHONPATH=python/src .venv/bin/python python/benchmarks/calibration.py --scale 5   # ~4 min per x1
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit"))

import calibration_sim  # the test's own modules, from python/tests/unit
import test_stats_calibration


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=5.0, help="claims per scenario, times the test's")
    ap.add_argument("--seed", type=int, default=2026, help="the first scenario's seed (the test's: 2026)")
    args = ap.parse_args()
    started, cpu = time.monotonic(), time.process_time()
    found = test_stats_calibration.scenarios(args.scale)
    paths = [calibration_sim.p_paths(s, seed) for seed, s in enumerate(found, start=args.seed)]
    per_schedule = {k: [calibration_sim.outcome(s, p, calibration_sim.schedule(k, s.max_rounds))
                        for s, p in zip(found, paths)] for k in calibration_sim.SCHEDULES}
    print(calibration_sim.table(found, per_schedule))
    for k in calibration_sim.SCHEDULES:
        failed = calibration_sim.check(found, per_schedule[k])
        print(f"{k}: {'passes' if not failed else 'fails: ' + '; '.join(failed)}")
    print(f"{sum(s.claims for s in found)} claims in {time.monotonic() - started:.0f} s wall, "
          f"{time.process_time() - cpu:.0f} s CPU, load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
