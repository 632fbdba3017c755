"""`--calibrate`: measure the bottleneck with one iperf3 flow per family and compare it
with the ideal rate (HTB counts the Ethernet header; payload per frame is MSS)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from congestlab.errors import ToolError

SECONDS = 5


def ideal_goodput_bps(rate_bps: float, family: str, timestamps: bool = True) -> float:
    ip_tcp = (20 if family == "v4" else 40) + 20 + (12 if timestamps else 0)
    mss = 1500 - ip_tcp
    return rate_bps * mss / (1500 + 14)


def calibrate_bottleneck(tb, sender: str, receiver: str, log_dir: Path) -> dict:
    rate = min((i.rate_bps for n in tb.layout.nodes.values() for i in n.interfaces if i.rate_bps), default=None)
    results = {}
    for fam in ("v4", "v6"):
        server = tb.start(receiver, ["iperf3", "-s", "-1", "-J"])
        try:
            time.sleep(0.3)
            addr = tb.address(receiver, fam)
            proc = tb.run(sender, ["iperf3", "-c", addr, "-t", str(SECONDS), "-J", "-C", "cubic"],
                          timeout_s=SECONDS + 15, check=False)
        finally:
            tb.stop(server)
        (log_dir / f"calibrate-{fam}.json").write_text(proc.stdout)
        try:
            bps = json.loads(proc.stdout)["end"]["sum_received"]["bits_per_second"]
        except (ValueError, KeyError) as err:
            raise ToolError(["iperf3", "-c", addr], proc.returncode, f"no result ({err}): {proc.stderr}") from None
        ideal = ideal_goodput_bps(rate, fam) if rate else None
        results[fam] = {"measured_bps": bps, "ideal_bps": ideal,
                        "ratio": round(bps / ideal, 4) if ideal else None}
    return {"bottleneck_rate_bps": rate, "seconds": SECONDS, "families": results}
