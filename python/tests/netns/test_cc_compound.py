"""Compound TCP (BPF struct_ops) in real namespaces: throughput, namespace selection,
the delay window following the queue (from the program's own counters), two-flow sharing.

Each module run builds its own object under a unique kernel name in a temp dir and
always unregisters it; each test builds its own uniquely named namespaces.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import time

import pytest

from congestlab.cc import registry, share
from congestlab.cc.lab import Dumbbell
from congestlab.paths import REPO_ROOT

pytestmark = [
    pytest.mark.netns,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root"),
]
LINK_MBIT = 100
GAMMA_MILLI = 30_000


def _prefix() -> str:
    return f"t{secrets.token_hex(2)}"


@pytest.fixture(scope="module")
def ctcp(tmp_path_factory) -> str:
    """A Compound TCP registered under a unique name for this module; removed afterwards."""
    name = f"ct{secrets.token_hex(3)}"
    out = tmp_path_factory.mktemp("ctcp")
    subprocess.run(["make", "-C", str(REPO_ROOT / "bpf"), "--no-print-directory", "object",
                    f"CTCP_ID={name}", f"OUT_DIR={out}"], check=True, capture_output=True)
    obj = out / f"ctcp_{name}.bpf.o"
    try:
        assert registry.install("compound", kernel_name=name, object_path=obj) == name
        assert registry.install("compound", kernel_name=name, object_path=obj) == name  # idempotent
        assert name in registry.available() and registry.is_struct_ops(name)
        yield name
    finally:
        registry.remove(name)
    assert name not in registry.available()
    assert registry.remove(name) is False


def _flow(kernel_cc: str, local_port: int) -> dict:
    flows = [f for f in registry.flow_stats(kernel_cc) if f["local_port"] == local_port]
    assert flows, f"no counters for local port {local_port}"
    return flows[0]


def test_selected_by_namespace_route_reaches_link_rate(ctcp):
    with Dumbbell(_prefix(), rate_mbit=LINK_MBIT, fifo_packets=100) as bed:
        bed.route_congctl(ctcp)  # needs TCP_CONG_NON_RESTRICTED: namespaces may not pick restricted ones
        (flow,) = bed.iperf_flows([""], seconds=5)
    assert flow["ss_cc"] == ctcp
    assert flow["received_bps"] >= 0.9 * LINK_MBIT * 1e6, flow
    stats = _flow(ctcp, flow["local_port"])
    assert stats["rounds"] > 50 and stats["losses"] >= 1
    # ~0.1 ms base RTT: win >= low_wnd (41) means >= 40 packets of our own queue, diff >= gamma,
    # so the delay window never opens; Compound is Reno here.
    assert stats["max_dwnd"] == 0 and stats["grow_rounds"] == 0


def test_iperf_cc_option_and_dwnd_follows_queue(ctcp):
    """20 ms base RTT (ACK delay line), FIFO of about one BDP (165 packets at 100 Mbit/s)."""
    series: list[dict] = []
    port_box: dict[str, int] = {}

    def sample() -> None:
        for f in registry.flow_stats(ctcp):
            if f["remote_port"] == 5201 and f["rounds"] > 0 and f["local_port"] not in port_box.get("old", ()):
                series.append({**f, "t": time.monotonic()})

    port_box["old"] = {f["local_port"] for f in registry.flow_stats(ctcp)}
    with Dumbbell(_prefix(), rate_mbit=LINK_MBIT, fifo_packets=165, ack_delay_ms=20, lifetime_s=60) as bed:
        (flow,) = bed.iperf_flows([ctcp], seconds=8, on_tick=sample, tick_s=0.1)
    assert flow["ss_cc"] == ctcp
    assert flow["received_bps"] >= 0.9 * LINK_MBIT * 1e6, flow
    stats = _flow(ctcp, flow["local_port"])
    assert 19_000 <= stats["base_rtt_us"] <= 25_000, stats
    # The program's own record: it grew only below gamma and shrank only at/above it, and did both.
    assert stats["grow_rounds"] > 0 and stats["shrink_rounds"] > 0, stats
    assert stats["max_dwnd"] > 0
    assert stats["max_diff_milli_grow"] < GAMMA_MILLI <= stats["min_diff_milli_shrink"], stats
    # Over time: dwnd rose while the queue was short, then went back to zero under a standing queue.
    mine = [s for s in series if s["local_port"] == flow["local_port"]]
    peak = next((i for i, s in enumerate(mine) if s["dwnd"] > 0 and s["diff_milli"] < GAMMA_MILLI), None)
    assert peak is not None, "never saw dwnd > 0 with diff < gamma"
    assert any(s["dwnd"] == 0 and s["diff_milli"] >= GAMMA_MILLI for s in mine[peak + 1:]), \
        "dwnd did not return to zero once diff >= gamma"


def test_two_flow_sharing_table(ctcp):
    rows = share.run_pairs(seconds=5, rate_mbit=LINK_MBIT, fifo_packets=100, compound_kernel_name=ctcp)
    print("\n" + share.markdown_table(rows))
    assert len(rows) == 6
    expected_ss = {"cubic": "cubic", "compound": ctcp}
    for row in rows:
        assert row.kernel_cc == expected_ss[row.cc], row
        assert row.rate_bps > 0.1 * LINK_MBIT * 1e6, row  # both flows got through
    for i in range(0, 6, 2):
        pair_bps = rows[i].rate_bps + rows[i + 1].rate_bps
        assert pair_bps >= 0.85 * LINK_MBIT * 1e6, rows[i: i + 2]
        assert abs(rows[i].share_of_total_pct + rows[i + 1].share_of_total_pct - 100) < 1e-6
