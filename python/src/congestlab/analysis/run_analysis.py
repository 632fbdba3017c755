"""From a run directory's pcaps and request log to one metrics row per measured request."""

from __future__ import annotations

import csv
import json
import math
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from congestlab.analysis.metrics import ConnectionMetrics
from congestlab.analysis.trace import measure_pcap
from congestlab.errors import RunDirError

METRIC_FIELDS = [
    "server", "level", "family", "repetition", "client_port", "delay_ms", "nrt_throughput_mbps",
    "captured_throughput_mbps", "goodput_mbps", "retransmissions", "rtt_mean_ms", "rtt_samples",
    "bytes_nrt", "bytes_captured", "payload_bytes", "curl_time_ms",
]
SUMMARY_METRICS = ["delay_ms", "nrt_throughput_mbps", "captured_throughput_mbps", "goodput_mbps", "retransmissions"]


@dataclass
class AnalysisResult:
    rows: list[dict]
    problems: list[str]
    read_stats: dict[str, dict]
    analysis_s: float = 0.0  # wall time of analyze_run (the manifest's analysis_s)


def analyze_run(run_dir: Path) -> AnalysisResult:
    """Reads `requests.jsonl` and `pcap/<server>.pcap`; pure apart from reading files."""
    requests_path = run_dir / "requests.jsonl"
    if not requests_path.exists():
        raise RunDirError(f"{run_dir}: no requests.jsonl (not a congestlab run directory, or the run never measured)")
    requests = [json.loads(line) for line in requests_path.read_text().splitlines() if line.strip()]
    by_server: dict[str, list[dict]] = {}
    for req in requests:
        by_server.setdefault(req["server"], []).append(req)
    started = time.monotonic()
    rows, problems, read_stats = [], [], {}
    for server, reqs in by_server.items():
        pcap = run_dir / "pcap" / f"{server}.pcap"
        measured = measure_pcap(pcap, server_port=reqs[0]["server_port"])
        stats = measured.read_stats
        read_stats[server] = {"frames": stats.frames, "tcp_segments": stats.tcp_segments, "skipped": stats.skipped}
        index = measured.by_key()
        for req in reqs:
            where = f"{server} {req['level']} {req['family']} rep {req['repetition']}"
            if not req.get("ok"):
                problems.append(f"{where}: request failed: {req.get('error')}")
                continue
            candidates = index.get((req["family"], req["client_port"]), [])
            candidates = [c for c in candidates if c.first_ts <= req["end_ts"] + 1
                          and c.last_ts >= req["start_ts"] - 1]
            if not candidates:
                problems.append(f"{where}: connection from port {req['client_port']} not in {pcap.name}")
                continue
            if candidates[0].metrics is None:
                problems.append(f"{where}: {candidates[0].error}")
                continue
            rows.append(_row(server, req, candidates[0].metrics))
    return AnalysisResult(rows, problems, read_stats, analysis_s=time.monotonic() - started)


def _row(server: str, req: dict, m: ConnectionMetrics) -> dict:
    return {
        "server": server,
        "level": req["level"],
        "family": req["family"],
        "repetition": req["repetition"],
        "client_port": req["client_port"],
        "delay_ms": round(m.delay_ms, 3),
        "nrt_throughput_mbps": round(m.nrt_throughput_mbps, 3),
        "captured_throughput_mbps": round(m.captured_throughput_mbps, 3),
        "goodput_mbps": round(m.goodput_mbps, 3),
        "retransmissions": m.retransmissions,
        "rtt_mean_ms": round(m.rtt_mean_ms, 3) if m.rtt_mean_ms is not None else "",
        "rtt_samples": len(m.rtt_samples_ms),
        "bytes_nrt": m.bytes_nrt,
        "bytes_captured": m.bytes_captured,
        "payload_bytes": m.payload_bytes,
        "curl_time_ms": round(req.get("time_total_s", 0) * 1e3, 3),
    }


def summarize(rows: list[dict], level_order: list[str]) -> list[dict]:
    """Mean, sample standard deviation and n per server x level x family."""
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for row in rows:
        groups.setdefault((row["server"], row["level"], row["family"]), []).append(row)
    order = {name: i for i, name in enumerate(level_order)}
    out = []
    for (server, level, family), members in sorted(groups.items(),
                                                    key=lambda kv: (kv[0][0], order.get(kv[0][1], 99), kv[0][2])):
        entry = {"server": server, "level": level, "family": family, "n": len(members)}
        for metric in SUMMARY_METRICS:
            values = [float(r[metric]) for r in members]
            entry[f"{metric}_mean"] = round(statistics.fmean(values), 3)
            entry[f"{metric}_sd"] = round(statistics.stdev(values), 3) if len(values) > 1 else 0.0
        out.append(entry)
    return out


def write_csv(path: Path, rows: list[dict], fields: list[str] | None = None) -> None:
    fields = fields or (list(rows[0].keys()) if rows else [])
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def summary_fields() -> list[str]:
    return ["server", "level", "family", "n"] + [f"{m}_{s}" for m in SUMMARY_METRICS for s in ("mean", "sd")]


def is_number(value) -> bool:
    try:
        return not math.isnan(float(value))
    except (TypeError, ValueError):
        return False
