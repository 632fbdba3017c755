"""Compound TCP (BPF struct_ops) in real namespaces: throughput, namespace selection,
the delay window following the queue (from the program's own counters). Two-flow sharing
is the cc-share preset's test (test_cc_share_netns.py).

Each module run builds its own object under a unique kernel name in a temp dir, registers
it with the owner note a run writes (cc_helpers.py: `congestlab clean` removes it if pytest
dies) and always unregisters it; each test builds its own testbed (a dumbbell: sender s1, router r,
receiver c; r's link to c is the 100 Mbit/s bottleneck) and drives iperf3 through the
iperf workload runner.
"""

from __future__ import annotations

import os
import secrets
import threading
import time

import pytest
from cc_helpers import build_object, registered

from congestlab.cc import registry
from congestlab.spec.models import TopologySpec
from congestlab.spec.workloads import IperfWorkload
from congestlab.testbed import Testbed
from congestlab.workloads.base import Context
from congestlab.workloads.iperf import IperfRunner

pytestmark = [
    pytest.mark.netns,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root"),
]
LINK_MBIT = 100
GAMMA_MILLI = 30_000


def dumbbell(fifo_packets: int, ack_delay_ms: float = 0.0) -> TopologySpec:
    bottleneck = {"switch": "sr", "host_id": 2, "rate_bps": LINK_MBIT * 1_000_000, "queue_packets": fifo_packets,
                  "delay_ms": ack_delay_ms, "impair_direction": "ingress"}  # ingress at r: c's ACKs
    return TopologySpec.model_validate({
        "switches": [{"name": "sl", "subnet4": "10.1.0.0/24", "subnet6": "fd00:0:1:0::/64"},
                     {"name": "sr", "subnet4": "10.2.0.0/24", "subnet6": "fd00:0:2:0::/64"}],
        "nodes": [{"name": "r", "kind": "router", "links": [{"switch": "sl", "host_id": 2}, bottleneck]},
                  {"name": "s1", "links": [{"switch": "sl", "host_id": 1}]},
                  {"name": "c", "links": [{"switch": "sr", "host_id": 1}]}],
    })


def one_flow(tb: Testbed, tmp_path, seconds: float, cc: str | None = None) -> dict:
    """One iperf3 flow s1 -> c through the workload runner; its `iperf` row."""
    flows = [{"cc": "compound"}] if cc else []
    spec = IperfWorkload(name="flow", kind="iperf", version=3, client="s1", server="c", duration_s=seconds,
                         flows=flows)
    records, checks = IperfRunner(spec, Context(tb, tmp_path, None), tmp_path / "logs").run(1)
    assert all(c.ok for c in checks), checks
    (row,) = [row for kind, row in records]
    return row


@pytest.fixture(scope="module")
def ctcp(tmp_path_factory) -> str:
    """A Compound TCP registered under a unique name for this module (with the owner note a
    run writes); removed afterwards."""
    name = f"ct{secrets.token_hex(3)}"
    obj = build_object(name, tmp_path_factory.mktemp("ctcp"))
    with registered(name, obj) as installed:
        assert installed == name
        assert registry.install("compound", kernel_name=name, object_path=obj) == name  # idempotent
        assert name in registry.available() and registry.is_struct_ops(name)
        yield name
    assert name not in registry.available()
    assert registry.remove(name) is False


def _flow(kernel_cc: str, local_port: int) -> dict:
    flows = [f for f in registry.flow_stats(kernel_cc) if f["local_port"] == local_port]
    assert flows, f"no counters for local port {local_port}"
    return flows[0]


def test_selected_by_namespace_route_reaches_link_rate(ctcp, tmp_path):
    # the route's congctl needs TCP_CONG_NON_RESTRICTED: namespaces may not pick restricted ones
    with Testbed(dumbbell(100), kernel_cc={"s1": ctcp, "c": "cubic"}) as tb:
        flow = one_flow(tb, tmp_path, 5)
    assert flow["cc_kernel"] == ctcp
    assert flow["throughput_mbps"] >= 0.7 * LINK_MBIT, flow  # 95.6 on a quiet machine, 79-88 under load
    stats = _flow(ctcp, flow["client_port"])
    assert stats["rounds"] > 50 and stats["losses"] >= 1
    # ~0.1 ms base RTT: win >= low_wnd (41) means >= 40 packets of our own queue, diff >= gamma,
    # so the delay window never opens; Compound is Reno here.
    assert stats["max_dwnd"] == 0 and stats["grow_rounds"] == 0


def test_iperf_cc_option_and_dwnd_follows_queue(ctcp, tmp_path, monkeypatch):
    """20 ms base RTT (a delay on the receiver's ACKs at r), FIFO of about one BDP (165 packets)."""
    monkeypatch.setattr(registry, "COMPOUND_KERNEL_NAME", ctcp)  # the flow's `compound` is this object
    series: list[dict] = []
    old = {f["local_port"] for f in registry.flow_stats(ctcp)}
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            for f in registry.flow_stats(ctcp):
                if f["remote_port"] == 5201 and f["rounds"] > 0 and f["local_port"] not in old:
                    series.append({**f, "t": time.monotonic()})
            time.sleep(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    with Testbed(dumbbell(165, ack_delay_ms=20), kernel_cc={"s1": "cubic", "c": "cubic"},
                 run_dir=str(tmp_path)) as tb:
        sampler.start()
        try:
            flow = one_flow(tb, tmp_path, 8, cc="compound")
        finally:
            done.set()
            sampler.join(5)
    assert flow["cc_kernel"] == ctcp
    # with the ACK delay in linkem (before: a TUN delay line) and both cores loaded by other
    # runs, one 8 s flow read 50-63 Mbit/s here (cubic alike); the subject is the delay window
    assert flow["throughput_mbps"] >= 0.4 * LINK_MBIT, flow
    stats = _flow(ctcp, flow["client_port"])
    assert 19_000 <= stats["base_rtt_us"] <= 25_000, stats
    # The program's own record: it grew only below gamma and shrank only at/above it, and did both.
    assert stats["grow_rounds"] > 0 and stats["shrink_rounds"] > 0, stats
    assert stats["max_dwnd"] > 0
    assert stats["max_diff_milli_grow"] < GAMMA_MILLI <= stats["min_diff_milli_shrink"], stats
    # Over time: dwnd rose while the queue was short, then went back to zero under a standing queue.
    mine = [s for s in series if s["local_port"] == flow["client_port"]]
    peak = next((i for i, s in enumerate(mine) if s["dwnd"] > 0 and s["diff_milli"] < GAMMA_MILLI), None)
    assert peak is not None, "never saw dwnd > 0 with diff < gamma"
    assert any(s["dwnd"] == 0 and s["diff_milli"] >= GAMMA_MILLI for s in mine[peak + 1:]), \
        "dwnd did not return to zero once diff >= gamma"
