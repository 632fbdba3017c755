"""One measured GET (its record, rundir/records.py GetRecord) as a `request` row: its outcome
(analysis/request_outcome.py) and, when complete, its metrics from the connection the capture
holds for it (docs/data-format.md, "Request outcomes")."""

from __future__ import annotations

import ipaddress

from congestlab.analysis.metrics import ConnectionMetrics
from congestlab.analysis.request_outcome import PathLimits, client_outcome, cross_check
from congestlab.analysis.trace import PcapConnection
from congestlab.rundir.records import GetRecord
from congestlab.stats.outcomes import COMPLETE, INVALID, TIMED_OUT

# the record's fields a request row carries as they are (results.py KIND_COLUMNS["request"])
_CARRIED = ("server", "client", "family", "file_kib", "client_port", "timeout_s", "start_ts", "client_kind",
            "family_pair", "family_position", "family_order", "previous_closed", "previous_wait_ms", "http", "tls",
            "http_negotiated", "tls_version", "host_softirq_ms")


def request_base(record: GetRecord) -> dict:
    after_handshakes = (round((record.time_total_s - record.time_pretransfer_s) * 1e3, 3)
                        if record.time_pretransfer_s is not None and record.ok else None)
    handshake = (round((record.time_appconnect_s - record.time_connect_s) * 1e3, 3)
                 if record.time_appconnect_s is not None and record.time_connect_s is not None and record.ok else None)
    return {key: getattr(record, key) for key in _CARRIED} | {
        "curl_time_ms": round(record.time_total_s * 1e3, 3), "request_to_last_byte_ms": after_handshakes,
        "tls_handshake_ms": handshake,
        "server_cpu_ms": round(record.server_cpu_ns / 1e6, 3) if record.server_cpu_ns is not None else None}


def request_outcome(record: GetRecord, capture_error: str | None, conns: list[PcapConnection],
                    path: PathLimits) -> tuple[str, str, PcapConnection | None]:
    """(outcome, why not complete, the measured connection) of one GET: the client's word
    first, then the capture's."""
    outcome, error = client_outcome(record)
    if outcome is not None:
        return outcome, error, None
    if capture_error:
        return INVALID, capture_error, None
    conn, error = _measure(conns, record)
    if conn is None:
        return INVALID, error, None
    error = cross_check(record, conn.server_data_unacked_bytes, conn.metrics, path)
    return (INVALID if error else COMPLETE), error, conn


def connection_of(conns: list[PcapConnection], record: GetRecord) -> PcapConnection | None:
    """The GET's connection in the capture, measured or not (as _measure finds it)."""
    return next((c for c in conns if record.client_port and c.key == (record.family, record.client_port)
                 and _overlaps(c, record)), None)


def _overlaps(conn: PcapConnection, record: GetRecord) -> bool:
    return conn.first_ts <= record.end_ts + 1 and conn.last_ts >= record.start_ts - 1


def _measure(conns: list[PcapConnection], record: GetRecord) -> tuple[PcapConnection | None, str]:
    """The request's connection with its metrics, or None and why not."""
    if not record.client_port:  # a browser does not say which port it used
        return pick_browser_connection(conns, record)
    candidates = [c for c in conns if c.key == (record.family, record.client_port) and _overlaps(c, record)]
    if not candidates:
        return None, f"connection from port {record.client_port} not in the capture"
    if candidates[0].metrics is None:
        return None, str(candidates[0].error)
    return candidates[0], ""


def pick_browser_connection(conns: list[PcapConnection], record: GetRecord) -> tuple[PcapConnection | None, str]:
    """The connection that carried the file of a browser's request, and why not if none.

    A browser may open more connections than the one that fetches the file: speculative
    preconnects (no request on them), /favicon.ico (a small answer). The one chosen comes
    from the request's client address and family, overlaps the request's time, has a request
    and the client's ACK after it (so it has metrics), and carried at least the file's bytes
    from the server; exactly one may qualify. The others are named in the reason when none does.
    """
    client = ipaddress.ip_address(record.client_addr)
    near = [c for c in conns if c.family == record.family and ipaddress.ip_address(c.client) == client
            and _overlaps(c, record)]
    file_bytes = record.file_kib * 1024
    carried = [c for c in near if c.metrics is not None and c.metrics.payload_bytes >= file_bytes]
    if len(carried) == 1:
        return carried[0], ""
    seen = ", ".join(f"port {c.client_port}: " + (f"{c.metrics.payload_bytes} B" if c.metrics else str(c.error))
                     for c in near) or "none"
    if not carried:
        return None, f"no connection from {client} carried the {file_bytes} B file (seen: {seen})"
    return None, f"{len(carried)} connections from {client} carried {file_bytes} B or more; which one is ambiguous ({seen})"


def metric_columns(m: ConnectionMetrics) -> dict:
    return {
        "delay_ms": round(m.delay_ms, 3),
        "syn_to_last_ack_ms": round(m.syn_to_last_ack_ms, 3) if m.syn_to_last_ack_ms is not None else None,
        "nrt_throughput_mbps": round(m.nrt_throughput_mbps, 3),
        "captured_throughput_mbps": round(m.captured_throughput_mbps, 3),
        "goodput_mbps": round(m.goodput_mbps, 3),
        "retransmissions": m.retransmissions,
        "rtt_mean_ms": round(m.rtt_mean_ms, 3) if m.rtt_mean_ms is not None else None,
        "rtt_samples": len(m.rtt_samples_ms),
        "bytes_nrt": m.bytes_nrt,
        "bytes_captured": m.bytes_captured,
        "payload_bytes": m.payload_bytes,
    }


def lower_bounds(outcome: str, traced: PcapConnection | None) -> dict:
    """What a GET that timed out still tells: the retransmissions its connection made before the
    timeout are a lower bound on the count the whole transfer would have needed (the report
    censors them there, report/data.py); its other metrics need the transfer's end."""
    if outcome != TIMED_OUT or traced is None:
        return {}
    return {"retransmissions": traced.retransmissions}
