"""The files measure_pcap (trace.py) writes beside a capture or in its scratch directory, and
their readers: RTT samples (`<pcap stem>.rtt.csv`), the per-flow series (`.series.csv`) and the
segment trace of selected connections, one file per connection (docs/trace-analysis.md)."""

from __future__ import annotations

import csv
from pathlib import Path

RTT_HEADER = ["conn", "ack_ts_ns", "rtt_ns"]
SERIES_HEADER = ["conn", "bin_start_s", "bin_s", "server_bytes", "client_bytes", "server_payload_bytes",
                 "server_goodput_bytes", "retransmissions", "server_throughput_mbps", "goodput_mbps",
                 "in_flight_max_bytes", "in_flight_end_bytes"]
# the segment trace of selected connections (crates/traceanalyze/src/segment_trace.rs)
TRACE_HEADER = ["conn", "ts_ns", "dir", "flags", "seq_off", "end_off", "payload_bytes", "retransmitted", "ack_off",
                "rwnd_bytes", "sack_blocks", "in_flight_bytes", "rtt_ns"]


def read_trace_lines(trace_path: Path) -> dict[int, list[bytes]]:
    """The analyzer's segment trace of several connections (TRACE_HEADER rows) as its lines
    by connection id."""
    by_conn: dict[int, list[bytes]] = {}
    with open(trace_path, "rb") as fh:
        next(fh, None)
        for line in fh:
            by_conn.setdefault(int(line.split(b",", 1)[0]), []).append(line)
    return by_conn


def write_trace(path: Path, lines: list[bytes]) -> None:
    """One connection's segment trace as its own CSV (TRACE_HEADER, the analyzer's lines)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        fh.write((",".join(TRACE_HEADER) + "\n").encode())
        fh.writelines(lines)


def read_trace(path: Path) -> list[dict]:
    """A segment trace file as typed rows: integers, None for an empty ack_off/rtt_ns, the
    SACK blocks as a list of (left, right) offsets, `retransmitted` as a bool."""
    ints = {"conn", "ts_ns", "seq_off", "end_off", "payload_bytes", "rwnd_bytes", "in_flight_bytes"}
    rows = []
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            out = {k: int(v) if k in ints else v for k, v in row.items()}
            out["retransmitted"] = row["retransmitted"] == "1"
            for k in ("ack_off", "rtt_ns"):
                out[k] = int(row[k]) if row[k] else None
            out["sack_blocks"] = [tuple(int(x) for x in b.split("-")) for b in row["sack_blocks"].split()]
            rows.append(out)
    return rows


def read_series(path: Path) -> list[dict]:
    """The per-flow series file as typed rows."""
    ints = {"conn", "server_bytes", "client_bytes", "server_payload_bytes", "server_goodput_bytes",
            "retransmissions", "in_flight_max_bytes", "in_flight_end_bytes"}
    with open(path, newline="") as fh:
        return [{k: int(v) if k in ints else float(v) for k, v in row.items()} for row in csv.DictReader(fh)]
