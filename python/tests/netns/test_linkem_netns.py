"""linkem on a real router namespace: delay, loss and throughput as the issue's fidelity checks.

Each test builds its own A — R — B line with a unique prefix; linkem runs on R, one
process per direction. Numbers are printed (pytest -s) for the issue note.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import time

import pytest

from congestlab.errors import TestbedError
from congestlab.linkem import LinkemElement
from congestlab.testbed import Testbed

from line_helpers import Line, line_topology

pytestmark = [
    pytest.mark.netns,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
]


def assert_within_tolerance(what: str, measured: float, expected: float, tolerance: float) -> None:
    assert abs(measured - expected) <= tolerance, f"{what}: measured {measured}, expected {expected} ± {tolerance}"


@pytest.fixture
def line(tmp_path):
    """A — R — B built by the testbed, unshaped; linkem elements are added by hand."""
    with Testbed(line_topology()) as tb:
        yield Line(tb)


@pytest.fixture
def line_100mbit(tmp_path):
    """The same line with 100 Mbit/s HTB + 1000-packet FIFO on R's link to B, both ways."""
    with Testbed(line_topology(100_000_000, 1000)) as tb:
        yield Line(tb)


def both_directions(line: Line, tmp_path, **knobs) -> tuple[LinkemElement, LinkemElement]:
    base = 100 + int(line.prefix[2:], 16) % 30000  # distinct queue numbers per test
    forward = LinkemElement(netns=line.ns_r, queue_num=base, in_iface=line.r_to_a, out_iface=line.r_to_b,
                            log_dir=tmp_path, seed=1, families=("ipv4",), **knobs)
    backward = LinkemElement(netns=line.ns_r, queue_num=base + 1, in_iface=line.r_to_b, out_iface=line.r_to_a,
                             log_dir=tmp_path, seed=2, families=("ipv4",), **knobs)
    return forward, backward


def test_linkem_ping_rtt_is_twice_the_configured_delay(line, tmp_path, within):
    forward, backward = both_directions(line, tmp_path, delay_ms=20.0)
    with forward, backward:
        out = line.exec(line.ns_a, "ping", "-n", "-c", "300", "-i", "0.01", "-W", "2", line.addr_b, timeout_s=30)
        fwd, bwd = forward.stats(), backward.stats()
    rtts_ms = [float(m) for m in re.findall(r"time=([\d.]+) ms", out)]
    assert len(rtts_ms) == 300, out[-300:]
    median_ms, mean_ms = statistics.median(rtts_ms), statistics.fmean(rtts_ms)
    print(f"\nlinkem RTT 2x20 ms: median {median_ms:.3f} ms, mean {mean_ms:.3f} ms, "
          f"min {min(rtts_ms):.3f}, max {max(rtts_ms):.3f}, n={len(rtts_ms)}")
    # The mean is not asserted: on a loaded 2-core machine a few percent of the probes wait
    # for a CPU (one run at load 6: mean 42.3 ms, median 40.3, max 82.6). linkem's own
    # properties are that no packet leaves early and that the bulk sits at the delay, late by
    # what a busy machine costs a user-space element: with stress-ng --cpu 2 beside (load
    # 6-9, five runs) the median was 40.2-44.0 ms, the mean 43.3-51.7; at load 1-2 with
    # stress-ng (four runs) the upper quartile was 40.2-40.5 ms
    assert min(rtts_ms) >= 40.0 - 0.5, f"a probe came back early: min {min(rtts_ms)} ms"
    within("median RTT ms", median_ms, 40.0, 0.5, late=6.0)
    upper_quartile_ms = statistics.quantiles(rtts_ms, n=4)[2]
    print(f"upper quartile {upper_quartile_ms:.3f} ms")
    within("upper quartile RTT ms", upper_quartile_ms, 40.0, 1.0, late=10.0)
    assert fwd["delayed"] >= 300 and bwd["delayed"] >= 300
    assert fwd["dropped"] == 0 and bwd["dropped"] == 0, (fwd, bwd)
    print(f"kernel-stamped arrivals: {fwd['kernel_stamped']}/{fwd['received']} and {bwd['kernel_stamped']}/{bwd['received']}")


def test_linkem_bernoulli_loss_measures_configured_rate(line, tmp_path):
    # loss on A->B only, no delay: flood ping stays fast; 20000 probes (sigma 0.07 %)
    lossy = LinkemElement(netns=line.ns_r, queue_num=200 + int(line.prefix[2:], 16) % 30000,
                          in_iface=line.r_to_a, out_iface=line.r_to_b, delay_ms=0.0, loss=0.01, seed=7,
                          log_dir=tmp_path, families=("ipv4",))
    with lossy:
        out = line.exec(line.ns_a, "ping", "-n", "-q", "-f", "-c", "20000", "-w", "90", line.addr_b, timeout_s=100)
        counters = lossy.stats()
    m = re.search(r"(\d+) packets transmitted, (\d+) received", out)
    assert m, out
    sent, received = int(m.group(1)), int(m.group(2))
    measured = 1 - received / sent
    print(f"\nlinkem loss 1 %: ping sent {sent}, received {received}, loss {measured * 100:.3f} %; "
          f"linkem dropped_random {counters['dropped_random']} of {counters['received']}")
    assert sent >= 10_000
    assert_within_tolerance("loss", measured, 0.01, 0.003)
    assert counters["dropped_random"] == sent - received


def cpu_seconds(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_linkem_tcp_fills_100_mbit_bottleneck_with_20_ms_each_way(line_100mbit, tmp_path):
    line = line_100mbit
    forward, backward = both_directions(line, tmp_path, delay_ms=20.0)
    server = subprocess.Popen(["ip", "netns", "exec", line.ns_b, "iperf3", "-s", "-1", "-p", "5201"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with forward, backward:
            time.sleep(0.3)  # iperf3 server listening
            pid_fwd, pid_bwd = forward.pid, backward.pid
            cpu0 = {pid: cpu_seconds(pid) for pid in (pid_fwd, pid_bwd)}
            t0 = time.monotonic()
            out = line.exec(line.ns_a, "iperf3", "-c", line.addr_b, "-p", "5201", "-t", "10", "-O", "3",
                            "-C", "cubic", "-J", timeout_s=40)
            wall = time.monotonic() - t0
            cpu_share = {pid: (cpu_seconds(pid) - c) / wall for pid, c in cpu0.items()}
            fwd, bwd = forward.stats(), backward.stats()
    finally:
        server.kill()
        server.wait()
    result = json.loads(out)
    received_bps = result["end"]["sum_received"]["bits_per_second"]
    retransmits = result["end"]["sum_sent"].get("retransmits")
    print(f"\nlinkem 2x20 ms + HTB 100 Mbit/s: iperf3 cubic {received_bps / 1e6:.2f} Mbit/s "
          f"(retransmits {retransmits}); linkem CPU share of one core: data dir "
          f"{cpu_share[pid_fwd] * 100:.1f} %, ack dir {cpu_share[pid_bwd] * 100:.1f} %; "
          f"held_max {fwd['held_max']}/{bwd['held_max']}; kernel drops {fwd['kernel_queue_dropped']}+"
          f"{fwd['kernel_user_dropped']}")
    # On the testbed's line (bridges: two more veth hops per direction than the former
    # hand-built line; HTB burst 4 x 1514 B, testbed/plan.py) with both cores loaded by other
    # runs this read 48.6-91.2 Mbit/s and the netlink socket overflowed (kernel_user_dropped
    # 133-737) in some runs; 93.8-94.6 and no drops on the hand-built line under the same load.
    assert received_bps >= 0.80 * 100e6
    assert fwd["kernel_queue_dropped"] == 0
    assert fwd["dropped_held_cap"] == 0


def test_linkem_duplicates_reach_the_host(line, tmp_path):
    dup = LinkemElement(netns=line.ns_r, queue_num=300 + int(line.prefix[2:], 16) % 30000,
                        in_iface=line.r_to_a, out_iface=line.r_to_b, delay_ms=1.0, duplicate=1.0,
                        log_dir=tmp_path, families=("ipv4",))
    with dup:
        out = line.exec(line.ns_a, "ping", "-n", "-c", "20", "-i", "0.02", line.addr_b, timeout_s=20)
        counters = dup.stats()
    # ping may exit on the 20th reply before its copy lands
    assert out.count("DUP!") >= 19, out
    assert counters["duplicated"] == 20 and counters["duplicate_failed"] == 0


def test_linkem_busy_queue_is_a_clear_error(line, tmp_path):
    first = LinkemElement(netns=line.ns_r, queue_num=7, in_iface=line.r_to_a, delay_ms=1.0,
                          log_dir=tmp_path / "first", families=("ipv4",))
    second = LinkemElement(netns=line.ns_r, queue_num=7, in_iface=line.r_to_b, delay_ms=1.0,
                           log_dir=tmp_path / "second", families=("ipv4",))
    with first:
        with pytest.raises(TestbedError, match="NFQUEUE unavailable: binding queue 7"):
            second.start()
        rules = line.exec(line.ns_r, "iptables", "-S", "FORWARD")
        assert rules.count("NFQUEUE") == 1  # the failed start added no rule
    assert "NFQUEUE" not in line.exec(line.ns_r, "iptables", "-S", "FORWARD")
