"""Two flows sharing one bottleneck: each flow's share, like seed 002's "shared bandwidth
percentage". The flows run as the cc-share preset (spec/presets/cc-share.toml); this module
turns its results/iperf.csv into shares, for `congestlab cc share` and the run's report."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from congestlab.errors import RunDirError
from congestlab.spec import load_preset
from congestlab.spec.fieldpath import apply
from congestlab.spec.loader import validate_spec
from congestlab.spec.network import path_bottleneck
from congestlab.stored import ResultRow, StoredPoint, StoredRun

PRESET = "cc-share"
BOTTLENECK = "nodes.r.links.sr"  # the preset's bottleneck link (r's link toward the receiver)


def preset_with(seconds: float, rate_bps: int, queue_packets: int, ack_delay_ms: float):
    """The cc-share preset with `congestlab cc share`'s options as its settings."""
    spec = load_preset(PRESET)
    data = apply(spec.model_dump(mode="json", exclude_unset=True), {
        "workloads.share.duration_s": seconds, f"{BOTTLENECK}.rate_bps": rate_bps,
        f"{BOTTLENECK}.queue_packets": queue_packets, f"{BOTTLENECK}.delay_ms": ack_delay_ms,
    }, create=True)
    return validate_spec(data, f"preset {PRESET} (cc share options)")


@dataclass
class FlowShare:
    pair: str
    repetition: int
    flow: int
    cc: str               # spec value
    kernel_cc: str        # what `ss -ti` showed for the flow
    rate_bps: float
    retransmits: int
    share_of_total_pct: float
    pct_of_fair_share: float  # rate / (link rate / 2): the study's "% of maximum allowed rate"


def fair_share_bps(point: StoredPoint, row: ResultRow) -> float:
    """Half the bottleneck between a flow's client and its server at the flow's point (the
    point's own rate, spec/network.py: HTB's rate, or a token bucket below it)."""
    try:
        neck = path_bottleneck(point.study.topology, row["client"], row["server"])
    except KeyError:
        neck = None
    if neck is None:
        raise RunDirError(f"{point.run.where}: point {point.id!r}: no shaped link between {row['client']} and "
                          f"{row['server']}, so no share of a bottleneck")
    return neck.rate_bps / 2


def shares(run_dir: Path) -> list[FlowShare]:
    run = StoredRun(Path(run_dir), require_complete=False)
    by_run: dict[tuple[str, int], list[ResultRow]] = {}
    for row in run.results("iperf"):
        by_run.setdefault((row["point_id"], int(row.number("repetition"))), []).append(row)
    declared = {p.id: i for i, p in enumerate(run.points)}
    out = []
    for (point_id, rep), rows in sorted(by_run.items(), key=lambda kv: (declared.get(kv[0][0], 0), kv[0])):
        point = run.point(point_id)
        rows.sort(key=lambda r: r.number("session"))
        total = sum(r.number("throughput_mbps") or 0.0 for r in rows) * 1e6 or 1.0
        pair = " vs ".join(r["cc"] for r in rows)
        for r in rows:
            bps = (r.number("throughput_mbps") or 0.0) * 1e6
            out.append(FlowShare(pair, rep, int(r.number("session")), r["cc"], r["cc_kernel"] or "?", bps,
                                 int(r.number("retransmits") or 0), 100 * bps / total,
                                 100 * bps / fair_share_bps(point, r)))
    return out


def markdown_table(rows: list[FlowShare]) -> str:
    lines = ["| pair | rep | flow | cc | ss -ti | Mbit/s | share of total % | % of fair share | retransmits |",
             "| --- | ---: | ---: | --- | --- | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(f"| {r.pair} | {r.repetition} | {r.flow} | {r.cc} | {r.kernel_cc} | {r.rate_bps / 1e6:.1f} | "
                     f"{r.share_of_total_pct:.1f} | {r.pct_of_fair_share:.1f} | {r.retransmits} |")
    return "\n".join(lines)
