"""Two flows sharing one bottleneck: each flow's share, like seed 002's "shared bandwidth
percentage". The flows run as the cc-share preset (spec/presets/cc-share.toml); this module
turns its results/iperf.csv into shares, for `congestlab cc share` and the run's report."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from congestlab.results import read_results
from congestlab.rundir import read_manifest
from congestlab.spec import load_preset
from congestlab.spec.fieldpath import apply
from congestlab.spec.loader import validate_spec

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


def bottleneck_rate_bps(manifest: dict) -> float:
    """The lowest shaped rate of the run's topology (the dumbbell's one bottleneck)."""
    rates = [link["rate_bps"] for node in manifest["spec"]["topology"]["nodes"] for link in node["links"]
             if link.get("rate_bps")]
    if not rates:
        raise ValueError("the run's topology has no shaped link")
    return float(min(rates))


def shares(run_dir: Path) -> list[FlowShare]:
    manifest = read_manifest(Path(run_dir), require_complete=False)
    fair_bps = bottleneck_rate_bps(manifest) / 2
    by_run: dict[tuple[str, int], list[dict]] = {}
    for row in read_results(Path(run_dir), "iperf"):
        by_run.setdefault((row["point_id"], int(row["repetition"])), []).append(row)
    declared = {p["id"]: i for i, p in enumerate(manifest.get("points", []))}
    out = []
    for (point_id, rep), rows in sorted(by_run.items(), key=lambda kv: (declared.get(kv[0][0], 0), kv[0])):
        rows.sort(key=lambda r: int(r["session"]))
        total = sum(float(r["throughput_mbps"]) for r in rows) * 1e6 or 1.0
        pair = " vs ".join(r["cc"] for r in rows)
        for r in rows:
            bps = float(r["throughput_mbps"]) * 1e6
            out.append(FlowShare(pair, rep, int(r["session"]), r["cc"], r["cc_kernel"] or "?", bps,
                                 int(r["retransmits"] or 0), 100 * bps / total, 100 * bps / fair_bps))
    return out


def markdown_table(rows: list[FlowShare]) -> str:
    lines = ["| pair | rep | flow | cc | ss -ti | Mbit/s | share of total % | % of fair share | retransmits |",
             "| --- | ---: | ---: | --- | --- | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(f"| {r.pair} | {r.repetition} | {r.flow} | {r.cc} | {r.kernel_cc} | {r.rate_bps / 1e6:.1f} | "
                     f"{r.share_of_total_pct:.1f} | {r.pct_of_fair_share:.1f} | {r.retransmits} |")
    return "\n".join(lines)
