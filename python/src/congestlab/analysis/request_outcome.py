"""The outcome of one measured GET and the cross-checks that keep a wrong row from reading as
right (docs/data-format.md, "Request outcomes").

- `complete`: the client got the whole file, its connection is whole in the capture, and the
  capture agrees with the client's own clock and with the link's rate;
- `timed_out`: the client gave up at its time limit (`timeout_s`): a censored sample, known
  only to exceed that limit;
- `invalid`: anything else (an HTTP error, a short body, a connection missing from or cut in
  the capture, a capture that disagrees with the client or with the link): excluded and
  counted, `error` says why.

The tolerances below were set from re-analysed runs of every quick preset (the table in
docs/data-format.md); python/tests/unit/test_request_outcome.py holds sound rows to them.
"""

from __future__ import annotations

from congestlab.analysis.metrics import ConnectionMetrics
from congestlab.rundir.records import GetRecord
from congestlab.spec.network import Bottleneck
from congestlab.stats.outcomes import INVALID, TIMED_OUT

# the client's own time against the capture's (ms): the client's time holds the handshake
# (about one RTT the capture's delay leaves out) plus its own start and finish; the capture's
# delay may end a delayed ACK (≤ 40 ms at HZ 250) after the client saw the last byte
CLIENT_SLACK_MS = 50.0
CLIENT_SLACK_SHARE = 0.10  # of the client's time: scheduling under load
BROWSER_SLACK_MS = 500.0  # Chromium: DevTools events and the download file's writing
# NRT bytes against the bottleneck: HTB counts what the capture counts (Ethernet header + IP
# length), lets HTB_BURST_BYTES through at line speed, and the ACK direction adds its own bytes
RATE_SLACK_SHARE = 0.15
# a client that stopped this close to its limit ran out of time
TIMEOUT_MARGIN_S = 0.05


def client_outcome(record: GetRecord) -> tuple[str | None, str]:
    """(None, "") when the client says it got the file; else (timed_out | invalid, why)."""
    if record.ok:
        return None, ""
    error = record.error or "request failed"
    if "timed out" in error or error.startswith("no response within") or (
            record.timeout_s is not None and record.time_total_s >= record.timeout_s - TIMEOUT_MARGIN_S):
        return TIMED_OUT, error
    return INVALID, error


def cross_check(record: GetRecord, conn_unacked_bytes: int, m: ConnectionMetrics,
                bottleneck: Bottleneck | None) -> str:
    """Why a request the client completed cannot be taken as measured; "" when it can."""
    if m.syn_to_last_ack_ms is None:
        return "incomplete in the capture: no SYN from the client"
    if conn_unacked_bytes > 0:
        return f"incomplete in the capture: {conn_unacked_bytes} B of server data never acknowledged by the client"
    body = record.size_download
    if m.payload_bytes < body:
        return f"incomplete in the capture: {m.payload_bytes} B from the server, the client received {body} B"
    why = client_time_disagrees(record, m)
    if why:
        return why
    return rate_exceeded(m, bottleneck)


def client_time_bounds_ms(record: GetRecord, m: ConnectionMetrics) -> tuple[float, float]:
    """[low, high] the client's own time may take given the capture's delay: at least the
    delay less a delayed ACK, at most the delay plus the handshake (SYN to request at the
    server, about one RTT) and slack."""
    handshake_ms = max((m.syn_to_last_ack_ms or m.delay_ms) - m.delay_ms, 0.0)
    slack_ms = BROWSER_SLACK_MS if record.client_kind == "chromium" else CLIENT_SLACK_MS
    client_ms = record.time_total_s * 1e3
    slack_ms += CLIENT_SLACK_SHARE * client_ms
    return m.delay_ms - slack_ms, m.delay_ms + handshake_ms + slack_ms


def client_time_disagrees(record: GetRecord, m: ConnectionMetrics) -> str:
    client_ms = record.time_total_s * 1e3
    low, high = client_time_bounds_ms(record, m)
    if low <= client_ms <= high:
        return ""
    who = "chromium's" if record.client_kind == "chromium" else "curl's"
    return (f"the capture's delay {m.delay_ms:.3f} ms disagrees with {who} own {client_ms:.1f} ms "
            f"(allowed {max(low, 0):.1f}-{high:.1f} ms)")


def rate_bound_bytes(delay_ms: float, b: Bottleneck) -> float:
    return (b.rate_bps / 8 * delay_ms / 1e3 + b.burst_bytes) * (1 + RATE_SLACK_SHARE)


def rate_exceeded(m: ConnectionMetrics, b: Bottleneck | None) -> str:
    if b is None:
        return ""
    bound = rate_bound_bytes(m.delay_ms, b)
    if m.bytes_nrt <= bound:
        return ""
    return (f"NRT throughput {m.nrt_throughput_mbps:.1f} Mbit/s is beyond the {b.rate_bps / 1e6:g} Mbit/s link "
            f"({m.bytes_nrt} B in {m.delay_ms:.3f} ms; at most {bound:.0f} B with its burst)")
