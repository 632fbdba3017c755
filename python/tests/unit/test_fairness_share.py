"""The fairness benchmark's shares over time (python/benchmarks/fairness_share.py): bytes per
flow from the client's `ss -tinH`, A's share per interval and after the start-up, Jain's index."""

from __future__ import annotations

import sys

import pytest

from congestlab.paths import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "python" / "benchmarks"))
import fairness_share

# `ss -tinH` in the client: curl's connection to a lean node (peer port 80), iperf3's control
# and data connections on its server's port 5202 (v4-mapped: iperf3 listens on IPv6's
# wildcard), and a TIME-WAIT socket without an info line.
SS_CLIENT = (
    "ESTAB 0      0               10.61.0.10:41000          10.62.0.11:80   \n"
    "\t bbr wscale:2,10 rto:204 rtt:0.2/0.1 mss:1448 bytes_sent:120 bytes_acked:121 bytes_received:5000000 segs_out:9\n"
    "ESTAB 0      0      [::ffff:10.61.0.10]:5202 [::ffff:10.62.0.10]:40002\n"
    "\t cubic wscale:7,7 rto:204 rtt:0.1/0.05 bytes_acked:300 bytes_received:170 segs_out:5\n"
    "ESTAB 15928  0      [::ffff:10.61.0.10]:5202 [::ffff:10.62.0.10]:40004\n"
    "\t cubic wscale:7,7 rto:204 rtt:0.1/0.05 bytes_acked:1 bytes_received:3000000 segs_out:3000\n"
    "TIME-WAIT 0 0 10.61.0.10:41999 10.62.0.12:80\n"
)
LEAN, KERNEL = "10.62.0.11:80", "10.61.0.10:5202"


def test_v4_mapped_endpoints_are_plain_ipv4():
    assert fairness_share.unmapped("[::ffff:10.61.0.10]:5201") == "10.61.0.10:5201"
    assert fairness_share.unmapped("[fd00:61::a]:80") == "[fd00:61::a]:80"
    assert fairness_share.unmapped("10.62.0.11:80") == "10.62.0.11:80"


def test_bytes_received_per_flow_endpoint():
    got = fairness_share.bytes_received_by_endpoint(SS_CLIENT, [LEAN, KERNEL, "10.62.0.12:80", "10.61.0.10:5201"])
    # the kernel flow's data connection, not iperf3's control one; nothing for closed or absent flows
    assert got == [5_000_000, 3_000_000, 0, 0]


def test_samples_stay_monotonic_after_a_connection_closes():
    text = (f"T 100.0\n{SS_CLIENT}"
            "T 101.0\nESTAB 0 0 [::ffff:10.61.0.10]:5202 [::ffff:10.62.0.10]:40004\n\t bytes_received:4000000\n")
    samples = fairness_share.parse_samples(text, [LEAN, KERNEL])
    assert samples == [(100.0, [5_000_000, 3_000_000]), (101.0, [5_000_000, 4_000_000])]


def series(per_second_bytes: list[tuple[int, int]], t0: float = 1000.0) -> list[tuple[float, list[int]]]:
    """Cumulative samples one second apart from (A, B) bytes per second."""
    out, a, b = [(t0, [0, 0])], 0, 0
    for i, (da, db) in enumerate(per_second_bytes, start=1):
        a, b = a + da, b + db
        out.append((t0 + i, [a, b]))
    return out


def test_steady_share_leaves_out_the_start_up():
    # A wins the start-up (9:1 for 3 s), then both get the same for 6 s
    samples = series([(900, 100)] * 3 + [(500, 500)] * 6)
    whole = fairness_share.window(samples, 1000.0, 0.0, 9.0)
    steady = fairness_share.window(samples, 1000.0, 3.0, 9.0)
    assert whole["share_a_pct"] == pytest.approx(100 * 5700 / 9000)
    assert steady["bytes"] == [3000, 3000]
    assert steady["share_a_pct"] == 50.0
    assert steady["jain"] == 1.0
    assert (steady["from_s"], steady["to_s"]) == (3.0, 9.0)


def test_window_needs_two_samples():
    assert fairness_share.window(series([(1, 1)] * 2), 1000.0, 5.0, 9.0) is None


def test_per_interval_shares_and_rates():
    rows = fairness_share.per_interval(series([(750_000, 250_000), (0, 0)]), 1000.0)
    assert rows[0] == {"t_s": 1.0, "mbps": [6.0, 2.0], "share_a_pct": 75.0}
    assert rows[1]["share_a_pct"] is None


def test_jain_index():
    assert fairness_share.jain_index([5.0, 5.0]) == 1.0
    assert fairness_share.jain_index([1.0, 0.0]) == 0.5
    assert fairness_share.jain_index([3.0, 1.0]) == pytest.approx(16 / 20)
    assert fairness_share.jain_index([0.0, 0.0]) is None
