"""Benchmark (run by hand or `make bench-cluster`, as root): the same sweep on a local Ray
cluster of 1 node and of 2 nodes, with points dominated by waiting (a long warm-up under
C1B-like background), printing both wall times, their ratio, and the scheduling overhead per
unit (task submitted -> gathered, minus the node's own StudyRun time).

    .venv/bin/python python/tests/netns/bench_cluster.py [--warmup-s 8]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from ray_helpers import LocalCluster
from spine_helpers import mini_spec_text

CONGESTLAB = str(Path(sys.executable).parent / "congestlab")


def one(nodes: int, spec: Path, base: Path) -> tuple[float, list[float], list[float]]:
    """Wall time of the whole command; per task, the time that was not the node's own StudyRun
    time (submission or the node's previous task -> gathered on the head), split into each
    node's first task (Ray starts a worker process, which imports congestlab) and the rest."""
    with LocalCluster(base / f"n{nodes}", nodes=nodes) as cluster:
        run_dir = base / f"run-n{nodes}"
        t0 = time.monotonic()
        subprocess.run([CONGESTLAB, "run", str(spec), "--out", str(run_dir), "--cluster", cluster.address],
                       check=True, capture_output=True)
        wall = time.monotonic() - t0
    tasks = json.loads((run_dir / "manifest.json").read_text())["cluster"]["tasks"]
    first, rest = [], []
    last_on: dict[str, float] = {}
    for t in sorted(tasks, key=lambda t: t["finished_epoch_s"]):
        start = max(t["submitted_epoch_s"], last_on.get(t["node"], 0.0))
        (rest if t["node"] in last_on else first).append(t["finished_epoch_s"] - start - t["node_wall_s"])
        last_on[t["node"]] = t["finished_epoch_s"]
    return wall, first, rest


def _mean(xs: list[float]) -> str:
    return f"{sum(xs) / len(xs):.2f} s" if xs else "-"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--warmup-s", type=float, default=8.0)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="congestlab-bench-cluster-"))
    text = mini_spec_text(1).replace("warmup_s = 1.0", f"warmup_s = {args.warmup_s}", 1)
    # every point under background, so every unit waits its warm-up
    text = text.replace('set = { "workloads.bg.rate_bps" = 0 }',
                        'set = { "workloads.bg.rate_bps" = 10_000_000 }', 1)
    spec = base / "bench.toml"
    spec.write_text(text)
    w1, f1, r1 = one(1, spec, base)
    w2, f2, r2 = one(2, spec, base)
    print(f"4 points (warm-up {args.warmup_s:g} s each): 1 node {w1:.1f} s, 2 nodes {w2:.1f} s, "
          f"ratio {w2 / w1:.2f} (goal <= 0.6)")
    print(f"scheduling overhead per unit beyond the node's StudyRun time: first task of a node "
          f"{_mean(f1 + f2)}, later tasks {_mean(r1 + r2)} (goal <= 1 s)")
    print(f"(work in {base})")


if __name__ == "__main__":
    main()
