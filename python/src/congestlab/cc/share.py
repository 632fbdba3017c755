"""Two flows sharing one bottleneck: each flow's share, like seed 002's "shared bandwidth percentage"."""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from congestlab.cc import registry
from congestlab.cc.lab import Dumbbell

PAIRS = (("cubic", "compound"), ("compound", "compound"), ("cubic", "cubic"))


@dataclass
class FlowShare:
    pair: str
    flow: int
    cc: str               # spec value
    kernel_cc: str        # what `ss -ti` showed for the flow
    rate_bps: float
    retransmits: int
    share_of_total_pct: float
    pct_of_fair_share: float  # rate / (link rate / 2): the study's "% of maximum allowed rate"


def run_pairs(seconds: float, rate_mbit: int = 100, fifo_packets: int = 100, ack_delay_ms: float = 0.0,
              compound_kernel_name: str = "compound", pairs=PAIRS) -> list[FlowShare]:
    """Run every pair on a fresh dumbbell; `compound` must already be registered under compound_kernel_name."""
    kernel = {"cubic": "cubic", "reno": "reno", "bbr": "bbr", "compound": compound_kernel_name}
    rows: list[FlowShare] = []
    fair_bps = rate_mbit * 1e6 / 2
    for a, b in pairs:
        with Dumbbell(f"s{secrets.token_hex(2)}", rate_mbit=rate_mbit, fifo_packets=fifo_packets,
                      ack_delay_ms=ack_delay_ms, lifetime_s=seconds + 60) as bed:
            flows = bed.iperf_flows([kernel[a], kernel[b]], seconds)
        total = sum(f["received_bps"] for f in flows) or 1.0
        for i, (cc, f) in enumerate(zip((a, b), flows), start=1):
            rows.append(FlowShare(f"{a} vs {b}", i, cc, f["ss_cc"] or "?", f["received_bps"], f["retransmits"],
                                  100 * f["received_bps"] / total, 100 * f["received_bps"] / fair_bps))
    return rows


def markdown_table(rows: list[FlowShare]) -> str:
    lines = ["| pair | flow | cc | ss -ti | Mbit/s | share of total % | % of fair share | retransmits |",
             "| --- | --- | --- | --- | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(f"| {r.pair} | {r.flow} | {r.cc} | {r.kernel_cc} | {r.rate_bps / 1e6:.1f} | "
                     f"{r.share_of_total_pct:.1f} | {r.pct_of_fair_share:.1f} | {r.retransmits} |")
    return "\n".join(lines)


def run_with_compound(seconds: float, **kwargs) -> list[FlowShare]:
    """run_pairs with Compound TCP installed for the run (removed again if this call installed it)."""
    was_there = registry.COMPOUND_KERNEL_NAME in registry.available()
    name = registry.ensure("compound")
    try:
        return run_pairs(seconds, compound_kernel_name=name, **kwargs)
    finally:
        if not was_there:
            registry.remove(name)
