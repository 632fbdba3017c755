"""Benchmark: testbed up + down for the ipv6 study's 15 namespaces (target: <= 1 s).

The peer, measured in the same run: the same plan with one process per command (no
`ip -batch`), as hand-written scripts do. Prints absolute times and the ratio.
Run as root: .venv/bin/python python/benchmarks/bench_testbed.py [rounds]
"""

from __future__ import annotations

import statistics
import sys
import time

from congestlab.spec import load_preset
from congestlab.testbed import Testbed
from congestlab.testbed.executor import Executor


def one_round(batch: bool) -> tuple[float, float]:
    tb = Testbed(load_preset("ipv6").topology, kernel_cc={"server": "cubic", "client": "cubic"})
    tb.executor = Executor(batch=batch)
    start = time.monotonic()
    with tb:
        up = time.monotonic() - start
    return up, tb.teardown_s


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    results = {True: [], False: []}
    for _ in range(rounds):  # interleaved so machine noise hits both alike
        for batch in (True, False):
            results[batch].append(one_round(batch))
    for batch, label in ((True, "batched (congestlab)"), (False, "one process per command")):
        ups = [u for u, _ in results[batch]]
        downs = [d for _, d in results[batch]]
        print(f"{label:26} up median {statistics.median(ups):.3f} s, down median {statistics.median(downs):.3f} s, "
              f"up+down {statistics.median(ups) + statistics.median(downs):.3f} s")
    ours = statistics.median([u + d for u, d in results[True]])
    peer = statistics.median([u + d for u, d in results[False]])
    print(f"ratio peer/ours = {peer / ours:.2f}x; target up+down <= 1 s: {'met' if ours <= 1 else 'NOT met'} ({ours:.3f} s)")


if __name__ == "__main__":
    main()
