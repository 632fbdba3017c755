"""One call from a server-side capture to per-connection metrics: `measure_pcap`.

The default backend runs the streaming Rust analyzer (crates/traceanalyze, one pass, memory
per connection); `backend="dpkt"` runs the Python code in packets.py, connections.py and
metrics.py, kept as the reference the tests compare the analyzer with. Both return the same
`PcapMeasurement` and write the same files (docs/trace-analysis.md has the formats).
"""

from __future__ import annotations

import contextlib
import csv
import json
import logging
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from congestlab.analysis.connections import Connection, group_connections
from congestlab.analysis.metrics import (ConnectionMetrics, _Direction, measure_connection, retransmission_flags,
                                         rtt_samples, server_data_unacked)
from congestlab.analysis.packets import ReadStats, read_segments
from congestlab.analysis.trace_files import RTT_HEADER, SERIES_HEADER, read_trace_lines
from congestlab.errors import TraceError
from congestlab.input_files import special_file_problem
from congestlab.paths import rust_binary

log = logging.getLogger(__name__)

BACKENDS = ("rust", "dpkt")
# measure_pcap's temporary directories (a process killed while measuring leaves its own behind)
SCRATCH_PREFIX = "congestlab-trace-"


@dataclass
class PcapConnection:
    """One TCP connection at the server port; `metrics` is None when the connection has no
    request or no client ACK after it, and `error` then says which (as measure_connection)."""

    conn: int  # order of the connection's first packet in the capture
    family: str
    client: str
    client_port: int
    server: str
    server_port: int
    first_ts: float
    last_ts: float
    retransmissions: int
    metrics: ConnectionMetrics | None
    error: str | None = None
    # server payload beyond the client's highest ACK: 0 when it acknowledged the last data
    server_data_unacked_bytes: int = 0
    capture_duplicates: int = 0  # its frames recorded twice (packets.py), in no other number

    @property
    def key(self) -> tuple[str, int]:
        return (self.family, self.client_port)


@dataclass
class PortAggregate:
    """Both directions at the server port inside `window_s` (default: first to last segment)."""

    server_port: int
    interval_s: float
    connections: int
    segments: int
    bytes_to_server: int
    bytes_from_server: int
    payload_bytes_from_server: int
    unique_payload_bytes_from_server: int
    bytes_nrt: int  # frame bytes of both directions without retransmitted segments
    retransmissions: int
    throughput_mbps: float  # both directions' frame bytes (captured)
    nrt_throughput_mbps: float
    from_server_mbps: float
    goodput_mbps: float
    window_s: tuple[float, float] | None = None
    capture_duplicates: int = 0  # frames recorded twice in the window, in no other number


@dataclass
class PcapMeasurement:
    connections: list[PcapConnection]  # in order of first packet
    read_stats: ReadStats
    port: PortAggregate
    elapsed_s: float  # wall time of measure_pcap (for the manifest's analysis_s)
    backend: str
    rtt_samples_path: Path | None = None
    series_path: Path | None = None
    stop_reason: str | None = None
    # the segment trace's lines (without the header) per traced connection id
    trace_lines: dict[int, list[bytes]] = field(default_factory=dict)

    def by_key(self) -> dict[tuple[str, int], list[PcapConnection]]:
        index: dict[tuple[str, int], list[PcapConnection]] = {}
        for c in self.connections:
            index.setdefault(c.key, []).append(c)
        return index


def measure_pcap(pcap: Path, server_port: int, *, samples_dir: Path | None = None,
                 series_bin_ms: float | None = None, window_s: tuple[float, float] | None = None,
                 backend: str = "rust", trace_client_ports=None, scratch_dir: Path | None = None) -> PcapMeasurement:
    """Per-connection metrics, port aggregate and read statistics of one capture.

    With `samples_dir`, the RTT samples (`<pcap stem>.rtt.csv`) and, with `series_bin_ms`,
    the per-flow series (`<pcap stem>.series.csv`) are kept there; without it the samples go
    through a temporary file. Either way each connection's metrics carry its RTT samples.
    With `trace_client_ports`, the connections from those client ports get a segment trace
    (TRACE_HEADER rows, `trace_lines` by connection id; Rust backend only).
    A truncated capture is measured up to the cut (`read_stats.truncated`, a warning logged).
    Temporary files (the samples without `samples_dir`, the segment trace) go to a directory
    made for them only then, inside `scratch_dir` (default: the system's), and removed after.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, not {backend!r}")
    if series_bin_ms is not None and samples_dir is None:
        raise ValueError("series_bin_ms needs samples_dir: the series is written to a file")
    if series_bin_ms is not None and series_bin_ms <= 0:
        raise ValueError("series_bin_ms must be positive")
    trace_ports = sorted({int(p) for p in trace_client_ports or ()})
    if trace_ports and backend != "rust":
        raise ValueError("the segment trace (trace_client_ports) needs the rust backend")
    pcap = Path(pcap)
    problem = special_file_problem(pcap)  # a directory, FIFO or device named *.pcap: refused by what it is
    if problem is not None:
        raise TraceError(f"{pcap}: {problem}")
    started = time.monotonic()
    needs_scratch = samples_dir is None or bool(trace_ports)
    with (tempfile.TemporaryDirectory(prefix=SCRATCH_PREFIX, dir=scratch_dir) if needs_scratch
          else contextlib.nullcontext()) as tmp:
        out_dir = Path(samples_dir) if samples_dir is not None else Path(tmp)
        out_dir.mkdir(parents=True, exist_ok=True)
        rtt_path = out_dir / f"{pcap.stem}.rtt.csv"
        series_path = out_dir / f"{pcap.stem}.series.csv" if series_bin_ms is not None else None
        trace_path = Path(tmp) / f"{pcap.stem}.trace.csv" if trace_ports else None
        if backend == "rust":
            m = _measure_rust(pcap, server_port, rtt_path, series_path, series_bin_ms, window_s,
                              trace_path, trace_ports)
        else:
            m = _measure_dpkt(pcap, server_port, rtt_path, series_path, series_bin_ms, window_s)
        _attach_rtt_samples(m.connections, rtt_path)
        if trace_path is not None:
            m.trace_lines = read_trace_lines(trace_path)
        if samples_dir is not None:
            m.rtt_samples_path, m.series_path = rtt_path, series_path
    m.elapsed_s = time.monotonic() - started
    if m.read_stats.truncated:
        log.warning("%s: %s; measured up to the cut (%d frames)", pcap, m.stop_reason or "truncated capture",
                    m.read_stats.frames)
    log.info("%s: %d connections from %d frames in %.3f s (%s)", pcap.name, len(m.connections),
             m.read_stats.frames, m.elapsed_s, backend)
    return m


# --- the Rust analyzer ---------------------------------------------------------------------

def _measure_rust(pcap: Path, server_port: int, rtt_path: Path, series_path: Path | None,
                  series_bin_ms: float | None, window_s: tuple[float, float] | None,
                  trace_path: Path | None = None, trace_ports: list[int] | None = None) -> PcapMeasurement:
    argv = [str(rust_binary("traceanalyze")), str(pcap), "--server-port", str(server_port),
            "--rtt-samples", str(rtt_path)]
    if trace_path is not None:
        argv += ["--trace", str(trace_path), "--client-ports", ",".join(map(str, trace_ports))]
    if series_path is not None:
        argv += ["--series", str(series_path), "--bin-ms", repr(float(series_bin_ms))]
    if window_s is not None:
        argv += ["--window", repr(float(window_s[0])), repr(float(window_s[1]))]
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        message = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"
        raise TraceError(message.removeprefix("traceanalyze: "))
    return parse_summary(proc.stdout.splitlines(), window_s)


def parse_summary(lines, window_s: tuple[float, float] | None = None) -> PcapMeasurement:
    """The analyzer's NDJSON summary -> PcapMeasurement (no RTT samples attached)."""
    try:
        return _parse_summary(lines, window_s)
    except KeyError as err:  # a binary built from older code than this reader
        raise TraceError(f"traceanalyze: summary without {err} (an older build? `make build`)") from None


def _parse_summary(lines, window_s: tuple[float, float] | None) -> PcapMeasurement:
    conns: list[PcapConnection] = []
    port = stats = None
    for line in lines:
        if not line.strip():
            continue
        rec = json.loads(line)
        kind = rec.get("record")
        if kind == "connection":
            conns.append(_connection_from_record(rec))
        elif kind == "port":
            port = PortAggregate(
                server_port=rec["server_port"], interval_s=rec["interval_s"], connections=rec["connections"],
                segments=rec["segments"], bytes_to_server=rec["bytes_to_server"],
                bytes_from_server=rec["bytes_from_server"], payload_bytes_from_server=rec["payload_bytes_from_server"],
                unique_payload_bytes_from_server=rec["unique_payload_bytes_from_server"], bytes_nrt=rec["bytes_nrt"],
                retransmissions=rec["retransmissions"], throughput_mbps=rec["throughput_mbps"],
                nrt_throughput_mbps=rec["nrt_throughput_mbps"],
                from_server_mbps=rec["from_server_mbps"], goodput_mbps=rec["goodput_mbps"], window_s=window_s,
                capture_duplicates=rec["capture_duplicates"])
        elif kind == "stats":
            stats = rec
    if port is None or stats is None:
        raise TraceError("traceanalyze: summary without its port and stats records (cut short?)")
    conns.sort(key=lambda c: (c.first_ts, c.conn))
    read = ReadStats(frames=stats["frames"], tcp_segments=stats["tcp_segments"], skipped=dict(stats["skipped"]),
                     truncated=stats["truncated"], capture_duplicates=stats["capture_duplicates"])
    return PcapMeasurement(conns, read, port, elapsed_s=stats["elapsed_s"], backend="rust",
                           stop_reason=stats["stop_reason"])


def _connection_from_record(rec: dict) -> PcapConnection:
    metrics = None
    error = None
    if rec["error"] is not None:
        error = f"connection {rec['family']} port {rec['client_port']}: {rec['error']}"
    else:
        metrics = ConnectionMetrics(
            family=rec["family"], client_port=rec["client_port"], delay_ms=rec["delay_ms"],
            nrt_throughput_mbps=rec["nrt_throughput_mbps"], captured_throughput_mbps=rec["captured_throughput_mbps"],
            goodput_mbps=rec["goodput_mbps"], retransmissions=rec["retransmissions"], bytes_nrt=rec["bytes_nrt"],
            bytes_captured=rec["bytes_captured"], payload_bytes=rec["payload_bytes"],
            syn_to_last_ack_ms=rec["syn_to_last_ack_ms"])
    return PcapConnection(conn=rec["conn"], family=rec["family"], client=rec["client"], client_port=rec["client_port"],
                          server=rec["server"], server_port=rec["server_port"], first_ts=rec["first_ts_s"],
                          last_ts=rec["last_ts_s"], retransmissions=rec["retransmissions"], metrics=metrics,
                          error=error, server_data_unacked_bytes=rec.get("server_data_unacked_bytes", 0),
                          capture_duplicates=rec["capture_duplicates"])


def _attach_rtt_samples(conns: list[PcapConnection], rtt_path: Path) -> None:
    """Reads `conn,ack_ts_ns,rtt_ns` lines into each measured connection's rtt_samples_ms
    (split by hand: twice as fast as the csv module on a million samples)."""
    by_id = {c.conn: c.metrics.rtt_samples_ms for c in conns if c.metrics is not None}
    current, samples = None, None
    with open(rtt_path, "rb") as fh:
        next(fh, None)
        for line in fh:
            conn, _ack_ts_ns, rtt_ns = line.split(b",")
            if conn != current:
                current, samples = conn, by_id.get(int(conn))
            if samples is not None:
                samples.append(int(rtt_ns) / 1e6)


# --- the dpkt reference --------------------------------------------------------------------

def _measure_dpkt(pcap: Path, server_port: int, rtt_path: Path, series_path: Path | None,
                  series_bin_ms: float | None, window_s: tuple[float, float] | None) -> PcapMeasurement:
    stats = ReadStats()
    conns = group_connections(read_segments(pcap, stats, duplicates=True), server_port=server_port)
    out: list[PcapConnection] = []
    agg = _PortTotals()
    with open(rtt_path, "w", newline="") as rtt_fh:
        rtt_csv = csv.writer(rtt_fh, lineterminator="\n")
        rtt_csv.writerow(RTT_HEADER)
        series_fh = open(series_path, "w", newline="") if series_path is not None else None
        try:
            series_csv = csv.writer(series_fh, lineterminator="\n") if series_fh else None
            if series_csv:
                series_csv.writerow(SERIES_HEADER)
            for conn_id, conn in enumerate(conns):
                segs = conn.segments
                from_client = [conn.from_client(s) for s in segs]
                retx = retransmission_flags(segs, from_client)
                for ack_ts, rtt_ms in rtt_samples(segs, from_client, retx):
                    rtt_csv.writerow([conn_id, round(ack_ts * 1e9), round(rtt_ms * 1e6)])
                if series_csv:
                    for row in _series_rows(conn, from_client, retx, series_bin_ms / 1e3):
                        series_csv.writerow([conn_id, *row])
                agg.add(conn, from_client, retx, window_s)
                try:
                    metrics, error = measure_connection(conn), None
                    metrics.rtt_samples_ms = []  # attached from the file, as for the Rust backend
                except TraceError as err:
                    metrics, error = None, str(err)
                out.append(PcapConnection(
                    conn=conn_id, family=conn.family, client=conn.client, client_port=conn.client_port,
                    server=conn.server, server_port=server_port, first_ts=segs[0].ts, last_ts=segs[-1].ts,
                    retransmissions=sum(1 for s, r in zip(segs, retx) if r and s.payload_len > 0),
                    metrics=metrics, error=error, server_data_unacked_bytes=server_data_unacked(segs, from_client),
                    capture_duplicates=len(conn.duplicates)))
        finally:
            if series_fh:
                series_fh.close()
    return PcapMeasurement(out, stats, agg.result(server_port, window_s), elapsed_s=0.0, backend="dpkt",
                           stop_reason="the capture ends inside a record" if stats.truncated else None)


@dataclass
class _PortTotals:
    connections: int = 0
    segments: int = 0
    bytes_to_server: int = 0
    bytes_from_server: int = 0
    payload_from_server: int = 0
    unique_payload_from_server: int = 0
    bytes_nrt: int = 0
    retransmissions: int = 0
    capture_duplicates: int = 0
    times: list[float] = field(default_factory=list)

    def add(self, conn: Connection, from_client: list[bool], retx: list[bool],
            window_s: tuple[float, float] | None) -> None:
        self.capture_duplicates += sum(1 for s in conn.duplicates if window_s is None
                                       or window_s[0] <= s.ts <= window_s[1])
        counted = False
        for s, fc, r in zip(conn.segments, from_client, retx):
            if window_s is not None and not (window_s[0] <= s.ts <= window_s[1]):
                continue
            if not counted:
                self.connections += 1
                counted = True
            self.segments += 1
            self.times.append(s.ts)
            if fc:
                self.bytes_to_server += s.frame_len
            else:
                self.bytes_from_server += s.frame_len
                self.payload_from_server += s.payload_len
                if not r:
                    self.unique_payload_from_server += s.payload_len
            if not r:
                self.bytes_nrt += s.frame_len
            if r and s.payload_len > 0:
                self.retransmissions += 1

    def result(self, server_port: int, window_s: tuple[float, float] | None) -> PortAggregate:
        if window_s is not None:
            interval = window_s[1] - window_s[0]
        else:
            interval = max(self.times) - min(self.times) if self.times else 0.0

        def mbps(n: int) -> float:
            return n * 8 / interval / 1e6 if interval > 0 else 0.0

        return PortAggregate(
            server_port=server_port, interval_s=interval, connections=self.connections, segments=self.segments,
            bytes_to_server=self.bytes_to_server, bytes_from_server=self.bytes_from_server,
            payload_bytes_from_server=self.payload_from_server,
            unique_payload_bytes_from_server=self.unique_payload_from_server, bytes_nrt=self.bytes_nrt,
            retransmissions=self.retransmissions, throughput_mbps=mbps(self.bytes_to_server + self.bytes_from_server),
            nrt_throughput_mbps=mbps(self.bytes_nrt),
            from_server_mbps=mbps(self.bytes_from_server), goodput_mbps=mbps(self.unique_payload_from_server),
            window_s=window_s, capture_duplicates=self.capture_duplicates)


def _series_rows(conn: Connection, from_client: list[bool], retx: list[bool], bin_s: float):
    """Rows of the per-flow series (SERIES_HEADER without `conn`): bins with packets only."""
    bin_us = round(bin_s * 1e6)
    server_dir = _Direction()
    snd_max = ack_max = None
    current = None
    for s, fc, r in zip(conn.segments, from_client, retx):
        length = s.payload_len + (1 if s.syn else 0) + (1 if s.fin else 0)
        if not fc:
            off = server_dir.offset(s.seq)
            if length:
                snd_max = off + length if snd_max is None else max(snd_max, off + length)
        elif s.has_ack:
            ack_off = server_dir.nearest(s.ack)
            if ack_off is not None:
                ack_max = ack_off if ack_max is None else max(ack_max, ack_off)
        in_flight = 0 if snd_max is None else max(snd_max - (ack_max if ack_max is not None else 0), 0)
        index = round(s.ts * 1e6) // bin_us
        if current is not None and current[0] != index:
            yield _series_row(current, bin_us)
            current = None
        if current is None:
            current = [index, 0, 0, 0, 0, 0, 0, 0]
        if fc:
            current[2] += s.frame_len
        else:
            current[1] += s.frame_len
            current[3] += s.payload_len
            if not r:
                current[4] += s.payload_len
        if r and s.payload_len > 0:
            current[5] += 1
        current[6] = max(current[6], in_flight)
        current[7] = in_flight
    if current is not None:
        yield _series_row(current, bin_us)


def _series_row(b: list, bin_us: int) -> list:
    index, server, client, payload, goodput, retx, in_max, in_end = b
    bin_s = bin_us / 1e6
    return [index * bin_us / 1e6, bin_s, server, client, payload, goodput, retx,
            server * 8 / bin_s / 1e6, goodput * 8 / bin_s / 1e6, in_max, in_end]
