"""The QUIC side of a repetition's analysis: each QUIC server's UDP capture (quic/<server>.pcap,
whole datagrams) decrypted with the key log its clients wrote (quic/keys.log) and read into
connections shaped like the TCP ones (analysis/quic_capture.py), so a GET over HTTP/3 gets its
row from the same outcome rules; and, for a server that writes a qlog per connection
(ngtcp2), the sender's own series (cwnd, bytes in flight, RTT, lost packets: analysis/
qlog_series.py) tied to the GET by the server's connection ID seen in the capture.

A qlog that is missing, cut or unreadable never reads as complete: the row's `qlog` column
says which (docs/http3.md, "The qlog")."""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

import dpkt

from congestlab.analysis.capture_counts import capture_count_problem
from congestlab.analysis.qlog_series import QlogSeries, qlog_for_connection, read_qlog_series
from congestlab.analysis.quic_capture import QuicConnection, quic_connections
from congestlab.errors import ToolError, TraceError

QLOG_DIR = "qlog"  # in the server instance's log dir (servers/ngtcp2.py)
SERIES_COLUMNS = ("time_ms", "cwnd_bytes", "bytes_in_flight", "smoothed_rtt_ms", "latest_rtt_ms", "min_rtt_ms",
                  "packets_sent", "packets_lost")


@dataclass
class QuicCaptures:
    connections: dict[str, list[QuicConnection]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)  # server -> why its UDP capture cannot be used


def measure_quic_captures(pcaps: list[Path], keylog: Path, ports: dict[str, int], where, info: dict) -> QuicCaptures:
    """Every QUIC capture of a repetition (`ports`: server -> its port; `where`: a path as the
    run's problems name it; `info`: rep.json, whose tcpdump counts each capture must match:
    analysis/capture_counts.py)."""
    out = QuicCaptures()
    for pcap in pcaps:
        server = pcap.stem
        if server not in ports:
            out.errors[server] = f"{where(pcap)}: a QUIC capture of no server of this repetition"
            continue
        try:
            problem = capture_count_problem(_frames(pcap), info, server, "quic_captures")
            if problem:
                out.errors[server] = f"{where(pcap)}: {problem}"
                continue
            out.connections[server] = quic_connections(pcap, keylog if keylog.is_file() else None, {ports[server]})
        except (TraceError, ToolError, OSError, ValueError) as err:
            out.errors[server] = f"{where(pcap)}: unreadable ({err})"
    return out


def _frames(pcap: Path) -> int:
    """The whole frames the file holds (a frame cut at its end is not one)."""
    with open(pcap, "rb") as fh:
        return sum(1 for _ in dpkt.pcap.UniversalReader(fh))


def qlog_columns(qlog_dir: Path | None, conn: QuicConnection | None) -> tuple[dict, QlogSeries | None]:
    """The row's qlog columns and the series (None: no qlog for this GET). `qlog`: "complete",
    or what is wrong; `qlog_packets_lost`: the sender's lost packets (only from a whole file)."""
    if qlog_dir is None:
        return {}, None  # a server without qlog (Caddy's quic-go here)
    if conn is None:
        return {"qlog": "no connection in the capture to find it by"}, None
    path = qlog_for_connection(qlog_dir, conn.server_scid)
    if path is None:
        return {"qlog": f"missing: no qlog for server connection ID {conn.server_scid or '(none seen)'}"}, None
    series = read_qlog_series(path)
    if not series.complete or series.problems:
        return {"qlog": "; ".join(series.problems) or "incomplete"}, series
    if not series.time_ms:
        return {"qlog": "no metrics_updated: no cwnd series"}, series
    return {"qlog": "complete", "qlog_packets_lost": series.total_packets_lost,
            "qlog_cwnd_max_bytes": max((c for c in series.cwnd_bytes if c is not None), default=None)}, series


def write_qlog_series(path: Path, series: QlogSeries, first_ts: float) -> None:
    """The sender's series as a CSV beside the capture's trace (report/request_series.py reads
    it). `ts_ns` puts each point on the capture's clock: ngtcp2's qlog times are ms since the
    connection began at the server, its first datagram from the client (`first_ts`, epoch
    seconds, the capture's: the server saw it within microseconds of its capture)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(("ts_ns", *SERIES_COLUMNS))
        for row in zip(*(getattr(series, name) for name in SERIES_COLUMNS)):
            writer.writerow([round(first_ts * 1e9 + row[0] * 1e6), *("" if v is None else v for v in row)])
