"""Fidelity checks of the emulated line (issue 6): RTT, loss rate, a full pipe with delay."""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from pathlib import Path

from congestlab.fidelity import Check
from congestlab.tcplab import iperf2
from congestlab.tcplab.measure import Processes, wait_listening, wait_reports
from congestlab.tcplab.network import LabNetwork
from congestlab.tcplab.sweeps import Network

RTT_DELAY_MS = 20.0  # each way
RTT_EXPECTED_MS = 40.0
RTT_TOLERANCE_MS = 0.5
LOSS_CONFIGURED = 0.01
LOSS_TOLERANCE = 0.003
LOSS_PACKETS_REQUIRED = 10_000
FILL_DELAY_MS = 20.0
FILL_MIN_MBPS = 90.0
FILL_OMIT_S = 2.0  # slow start and its overshoot at 40 ms RTT  # 100 Mbit/s cable; HTB counts the Ethernet header: ceiling 95.6 Mbit/s


@dataclass(frozen=True)
class CheckPlan:
    rtt_pings: int = 300
    loss_packets: int = LOSS_PACKETS_REQUIRED
    fill_duration_s: float = 10.0  # measured after FILL_OMIT_S
    enabled: bool = True  # False only in tests of the run's lifecycle


QUICK_CHECKS = CheckPlan(rtt_pings=200, loss_packets=5_000, fill_duration_s=4.0)


def rtt_check(net: LabNetwork, pings: int) -> Check:
    with net.configured(Network(delay_ms=RTT_DELAY_MS), b_to_a_delay_ms=RTT_DELAY_MS, label="fidelity-rtt"):
        out = net.line.exec(net.line.ns_a, "ping", "-n", "-c", str(pings), "-i", "0.01", "-W", "2",
                            net.line.addr_b, timeout_s=pings * 0.05 + 20)
    rtts = [float(m) for m in re.findall(r"time=([\d.]+) ms", out)]
    if not rtts:
        return Check("rtt_40ms", False, None, f"{RTT_EXPECTED_MS} ± {RTT_TOLERANCE_MS} ms", "no ping replies")
    median, mean = statistics.median(rtts), statistics.fmean(rtts)
    ok = abs(median - RTT_EXPECTED_MS) <= RTT_TOLERANCE_MS and abs(mean - RTT_EXPECTED_MS) <= RTT_TOLERANCE_MS
    return Check("rtt_40ms", ok, round(mean, 3), f"{RTT_EXPECTED_MS} ± {RTT_TOLERANCE_MS} ms (mean and median)",
                 f"20 ms each way: ping mean {mean:.3f} ms, median {median:.3f} ms, min {min(rtts):.3f}, "
                 f"max {max(rtts):.3f}, {len(rtts)} of {pings} replies")


def parse_ping_loss(out: str) -> tuple[int, int]:
    m = re.search(r"(\d+) packets transmitted, (\d+) received", out)
    if not m:
        raise ValueError("no ping summary line")
    return int(m.group(1)), int(m.group(2))


def loss_check(net: LabNetwork, packets: int) -> Check:
    with net.configured(Network(loss=LOSS_CONFIGURED), label="fidelity-loss"):
        # flood ping at 1 ms (root only); bounded by count and by the timeout
        out = net.line.exec(net.line.ns_a, "ping", "-n", "-q", "-f", "-i", "0.001", "-c", str(packets), "-W", "1",
                            net.line.addr_b, timeout_s=packets * 0.005 + 30)
    sent, received = parse_ping_loss(out)
    rate = (sent - received) / sent if sent else 1.0
    enough = sent >= LOSS_PACKETS_REQUIRED
    ok = abs(rate - LOSS_CONFIGURED) <= LOSS_TOLERANCE
    note = "" if enough else f"; only {sent} packets (quick run), the check asks for >= {LOSS_PACKETS_REQUIRED}"
    return Check("loss_1pct", ok, round(rate * 100, 3), f"{LOSS_CONFIGURED * 100:g} ± {LOSS_TOLERANCE * 100:g} %",
                 f"1 % loss A->B: {sent - received} of {sent} echo requests lost = {rate * 100:.3f} %{note}")


def steady_mbps(reports: list[iperf2.StreamReport], omit_s: float) -> float:
    """Mean rate of the 1 s interval reports that start at or after `omit_s` (slow start left
    out, like iperf3 -O); the final whole-run line is not an interval report."""
    steady = [r for r in reports if r.start_s >= omit_s and r.seconds <= 1.5]
    if not steady:
        raise ValueError(f"no interval reports after {omit_s:g} s")
    return sum(r.bytes for r in steady) * 8 / sum(r.seconds for r in steady) / 1e6


def fill_check(net: LabNetwork, duration_s: float, log_dir: Path, procs: Processes) -> Check:
    server_csv = log_dir / "fidelity-fill-server.csv"
    with net.configured(Network(delay_ms=FILL_DELAY_MS), b_to_a_delay_ms=FILL_DELAY_MS, label="fidelity-fill"):
        server = procs.start(net.line.ns_b, iperf2.server_argv(interval_s=1), server_csv,
                             log_dir / "fidelity-fill-server.err")
        try:
            wait_listening(net, False, server, log_dir / "fidelity-fill-server.err")
            client = iperf2.client_argv(net.line.addr_b, duration_s=duration_s + FILL_OMIT_S)
            net.line.exec(net.line.ns_a, *client, timeout_s=duration_s + FILL_OMIT_S + 30)
            whole = wait_reports(server_csv, 1, "fidelity fill", final=True)[0]
            reports, _ = iperf2.parse_csv(server_csv.read_text())
        finally:
            procs.stop(server)
    mbps = steady_mbps(reports, FILL_OMIT_S)
    return Check("tcp_fills_100mbit_at_20ms", mbps >= FILL_MIN_MBPS, round(mbps, 2), f">= {FILL_MIN_MBPS} Mbit/s",
                 f"20 ms each way, one TCP flow (autotuned window up to 16 MB): {mbps:.2f} Mbit/s at the server "
                 f"over {duration_s:g} s after the first {FILL_OMIT_S:g} s; whole run incl. slow start "
                 f"{whole.mbit_per_s:.2f} Mbit/s")


def run_checks(net: LabNetwork, plan: CheckPlan, log_dir: Path, procs: Processes, advance=lambda: None) -> list[Check]:
    if not plan.enabled:
        return []
    checks = [rtt_check(net, plan.rtt_pings)]
    advance()
    checks.append(loss_check(net, plan.loss_packets))
    advance()
    checks.append(fill_check(net, plan.fill_duration_s, log_dir, procs))
    advance()
    return checks
