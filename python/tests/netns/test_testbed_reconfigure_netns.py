"""Testbed.reconfigure between points, on real namespaces: the shaper is re-rated in place,
the FIFO and a token bucket swap under it, linkem starts, changes and stops for delay, and
routes and sysctls follow the spec — each read back from the kernel (tc, ping, ip route)."""

from __future__ import annotations

import json
import os
import re
import statistics

import pytest

from congestlab.spec.models import TopologySpec
from congestlab.testbed import Testbed
from congestlab.testbed.executor import run_argv

from line_helpers import line_topology
from spine_helpers import namespaces_with

pytestmark = [
    pytest.mark.netns,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
]


def qdiscs(tb: Testbed, node_ns: str, dev: str) -> dict[str, dict]:
    out = run_argv(["tc", "-n", node_ns, "-j", "qdisc", "show", "dev", dev]).stdout
    return {q["handle"]: q for q in json.loads(out)}


def class_rate_bps(tb: Testbed, ns: str, dev: str) -> int:
    """The HTB class's rate as tc prints it (`tc -j class` is plain text for htb here)."""
    out = run_argv(["tc", "-n", ns, "class", "show", "dev", dev]).stdout
    number, unit = re.search(r"class htb 1:10 .*?\brate (\d+)([KMG]?)bit", out).groups()
    return int(number) * {"": 1, "K": 1000, "M": 1_000_000, "G": 1_000_000_000}[unit]


def rtt_ms(tb: Testbed) -> float:
    """Median RTT of 30 pings (a loaded machine delays the odd linkem wake-up)."""
    out = tb.run("a", ["ping", "-4", "-n", "-c", "30", "-i", "0.02", "-W", "2", tb.address("b", "v4")],
                 timeout_s=30).stdout
    return statistics.median(float(x) for x in re.findall(r"time=([\d.]+) ms", out))


def with_sysctl(topology: TopologySpec, value: str) -> TopologySpec:
    data = topology.model_dump()
    data["nodes"][1]["sysctls"] = {"net.ipv4.tcp_rmem": value}
    return TopologySpec.model_validate(data)


def test_reconfigure_rate_queue_tbf_delay_cc_sysctls(tmp_path, within):
    with Testbed(line_topology(100_000_000, 1000), kernel_cc={"a": "cubic", "b": "cubic"},
                 run_dir=str(tmp_path)) as tb:
        prefix = tb.prefix
        r, sw = tb.ns("r"), tb.layout.switch_namespaces["sb"]
        assert class_rate_bps(tb, r, "eth1") == 100_000_000
        assert qdiscs(tb, r, "eth1")["10:"]["kind"] == "pfifo"
        base_ms = rtt_ms(tb)
        assert base_ms < 2

        # rate and queue: the HTB class re-rated in place on both ends, the FIFO's limit changed
        changes = tb.reconfigure(line_topology(50_000_000, 500), {"a": "cubic", "b": "cubic"})
        assert changes and "rate 50000000" in changes[0]
        assert class_rate_bps(tb, r, "eth1") == class_rate_bps(tb, sw, "p-r") == 50_000_000
        assert qdiscs(tb, r, "eth1")["10:"]["options"]["limit"] == 500

        # a token bucket in the FIFO's place (another qdisc kind under the same handle), and back
        tb.reconfigure(line_topology(50_000_000, 500, tbf_rate_bps=10_000_000), {"a": "cubic", "b": "cubic"})
        leaf = qdiscs(tb, r, "eth1")["10:"]
        assert leaf["kind"] == "tbf" and int(leaf["options"]["rate"]) == 10_000_000 // 8  # tc -j: bytes/s
        shown = run_argv(["tc", "-n", r, "-s", "qdisc", "show", "dev", "eth1"]).stdout
        assert "tbf 10: parent 1:10 rate 10Mbit" in shown, shown
        tb.reconfigure(line_topology(50_000_000, 500), {"a": "cubic", "b": "cubic"})
        assert qdiscs(tb, r, "eth1")["10:"]["kind"] == "pfifo"

        # delay both ways: linkem starts; a new delay restarts it; none stops it
        tb.reconfigure(line_topology(50_000_000, 500, delay_ms=15), {"a": "cubic", "b": "cubic"})
        assert tb.emulation["emulator"] == "linkem"
        # 30.4 at low load; 38.4-40.1 under stress-ng --cpu 2 (load 6-9)
        within("RTT ms at 15 ms each way", rtt_ms(tb), 30.4, 1.5, late=13.0)
        first_pids = [e.pid for e in tb._linkem]
        changes = tb.reconfigure(line_topology(50_000_000, 500, delay_ms=5, impair_direction="egress"),
                                 {"a": "cubic", "b": "cubic"})
        assert changes == ["impairments: r/eth1/egress delay 5 ms jitter 0 ms loss 0"]
        within("RTT ms at 5 ms one way", rtt_ms(tb), 5.3, 1.0, late=5.0)  # 8.07 under stress-ng
        assert all(not os.path.exists(f"/proc/{pid}") for pid in first_pids)
        assert tb.emulation["linkem_counters_before_changes"]  # the stopped elements' counters kept
        tb.reconfigure(line_topology(50_000_000, 500), {"a": "cubic", "b": "cubic"})
        assert tb._linkem == [] and rtt_ms(tb) < 2
        rules = run_argv(["ip", "netns", "exec", r, "iptables", "-S", "FORWARD"]).stdout
        assert "NFQUEUE" not in rules

        # congestion control per route, and a node's sysctls
        tb.reconfigure(with_sysctl(line_topology(50_000_000, 500), "4096 65535 65535"), {"a": "reno", "b": "cubic"})
        assert "congctl reno" in run_argv(["ip", "-n", tb.ns("a"), "route", "show", "default"]).stdout
        rmem = tb.run("a", ["sysctl", "-n", "net.ipv4.tcp_rmem"]).stdout.split()
        assert rmem == ["4096", "65535", "65535"]
    assert namespaces_with(prefix) == []
