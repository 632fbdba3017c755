"""The outcome of one measured GET and the cross-checks that keep a wrong row from reading as
right (docs/data-format.md, "Request outcomes").

- `complete`: the client got the whole file, its connection is whole in the capture, and the
  capture agrees with the client's own clock and with what the path allows;
- `timed_out`: the client gave up at its time limit (`timeout_s`): a censored sample, known
  only to exceed that limit;
- `invalid`: anything else (an HTTP error, a short body, a connection missing from or cut in
  the capture, a capture that disagrees with the client or with the path): excluded and
  counted, `error` says why.

The bounds below are physical (what the path's rate and delays allow, with the bytes the
metric counts) or set from re-analysed runs (the table in docs/data-format.md);
python/tests/unit/test_request_outcome.py holds sound rows to them.
"""

from __future__ import annotations

from dataclasses import dataclass

from congestlab.analysis.metrics import ConnectionMetrics
from congestlab.rundir.records import GetRecord
from congestlab.spec.network import ETH_FRAME_BYTES, Bottleneck
from congestlab.stats.outcomes import INVALID, TIMED_OUT

# curl's own time against the capture's SYN to last ACK (the GET's own handshake included):
# curl's clock starts before its SYN and stops once it has the last byte, and the last ACK
# before its FIN leaves no later (a delayed ACK would ride on the FIN, which ends no delay).
# Sound runs: curl - (SYN to last ACK) from 0.06 to 9.1 ms, never below (docs/data-format.md)
CURL_EARLY_MS = 5.0  # curl below the capture's span: only a shifted or stretched capture
CURL_LATE_MS = 15.0  # curl above it: its own start and finish, scheduled on a busy machine
BROWSER_SLACK_MS = 500.0  # Chromium: DevTools events and the download file's writing
BROWSER_SLACK_SHARE = 0.10  # of the browser's time
# The bytes a request row's `bytes_nrt` counts beyond the server's frames through the
# bottleneck: the client's frames, which cross the link the other way (each direction is
# shaped on its own): at most one ACK with timestamps per full data frame (quick ACKs) ...
ACK_FRAME_BYTES = {"v4": 66, "v6": 86}
# ... and frames that need not have crossed when the delay ends: the request and a last data
# segment the last ACK before the client's FIN did not cover (the FIN acknowledges it)
UNCOVERED_FRAMES = 2
# a client that stopped this close to its limit ran out of time
TIMEOUT_MARGIN_S = 0.05


@dataclass(frozen=True)
class PathLimits:
    """What the path between a GET's client and server allows (spec/network.py): its
    bottleneck (None: nothing shaped) and the least round trip its links' delays give."""

    bottleneck: Bottleneck | None = None
    round_trip_floor_ms: float = 0.0


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
                path: PathLimits) -> str:
    """Why a request the client completed cannot be taken as measured; "" when it can."""
    if m.syn_to_last_ack_ms is None:
        return "incomplete in the capture: no SYN from the client"
    if conn_unacked_bytes > 0:
        return f"incomplete in the capture: {conn_unacked_bytes} B of server data never acknowledged by the client"
    body = record.size_download
    if m.payload_bytes < body:
        return f"incomplete in the capture: {m.payload_bytes} B from the server, the client received {body} B"
    return (client_time_disagrees(record, m) or rate_exceeded(m, path.bottleneck)
            or delay_too_short(m, path))


def client_time_bounds_ms(record: GetRecord, m: ConnectionMetrics) -> tuple[float, float]:
    """[low, high] the client's own time may take given the capture: curl's within
    [-CURL_EARLY_MS, +CURL_LATE_MS] of the capture's SYN to last ACK (the GET's own handshake
    and delay); Chromium's, which may open its connection before the navigation, from the
    delay less its slack to SYN to last ACK plus its slack."""
    span_ms = m.syn_to_last_ack_ms if m.syn_to_last_ack_ms is not None else m.delay_ms
    if record.client_kind != "chromium":
        return span_ms - CURL_EARLY_MS, span_ms + CURL_LATE_MS
    slack_ms = BROWSER_SLACK_MS + BROWSER_SLACK_SHARE * record.time_total_s * 1e3
    return m.delay_ms - slack_ms, span_ms + slack_ms


def client_time_disagrees(record: GetRecord, m: ConnectionMetrics) -> str:
    client_ms = record.time_total_s * 1e3
    low, high = client_time_bounds_ms(record, m)
    if low <= client_ms <= high:
        return ""
    who = "chromium's" if record.client_kind == "chromium" else "curl's"
    span = f"SYN to last ACK {m.syn_to_last_ack_ms:.3f} ms; " if m.syn_to_last_ack_ms is not None else ""
    return (f"the capture's delay {m.delay_ms:.3f} ms disagrees with {who} own {client_ms:.1f} ms "
            f"({span}allowed {max(low, 0):.1f}-{high:.1f} ms)")


def counted_overhead_share(family: str) -> float:
    """The client's bytes `bytes_nrt` counts per byte of the server's frames, at most."""
    return ACK_FRAME_BYTES.get(family, ACK_FRAME_BYTES["v6"]) / ETH_FRAME_BYTES


def rate_bound_bytes(delay_ms: float, b: Bottleneck, family: str = "v6") -> float:
    """The most `bytes_nrt` a GET can count in `delay_ms` through bottleneck `b`: what the
    shaper lets through (its rate and its burst at line speed), the frames that need not have
    crossed yet, and the client's frames the other way."""
    through = b.rate_bps / 8 * delay_ms / 1e3 + b.burst_bytes + UNCOVERED_FRAMES * ETH_FRAME_BYTES
    return through * (1 + counted_overhead_share(family))


def rate_exceeded(m: ConnectionMetrics, b: Bottleneck | None) -> str:
    if b is None:
        return ""
    bound = rate_bound_bytes(m.delay_ms, b, m.family)
    if m.bytes_nrt <= bound:
        return ""
    return (f"NRT throughput {m.nrt_throughput_mbps:.1f} Mbit/s is beyond the {b.rate_bps / 1e6:g} Mbit/s link "
            f"({m.bytes_nrt} B in {m.delay_ms:.3f} ms; at most {bound:.0f} B with its burst and the client's ACKs)")


def delay_floor_ms(m: ConnectionMetrics, path: PathLimits) -> float:
    """The least delay the path allows the GET: one round trip of its links' delays, plus the
    time its payload needs at the bottleneck's rate beyond the burst (the payload alone:
    headers only add to it) and the frames that need not have crossed."""
    b = path.bottleneck
    if b is None:
        return path.round_trip_floor_ms
    held = m.payload_bytes - b.burst_bytes - UNCOVERED_FRAMES * ETH_FRAME_BYTES
    return path.round_trip_floor_ms + max(held, 0) * 8 / b.rate_bps * 1e3


def delay_too_short(m: ConnectionMetrics, path: PathLimits) -> str:
    floor = delay_floor_ms(m, path)
    if m.delay_ms >= floor:
        return ""
    parts = []
    if path.round_trip_floor_ms:
        parts.append(f"a {path.round_trip_floor_ms:g} ms round trip")
    if path.bottleneck is not None:
        parts.append(f"{m.payload_bytes} B at {path.bottleneck.rate_bps / 1e6:g} Mbit/s beyond its burst")
    return (f"the capture's delay {m.delay_ms:.3f} ms is shorter than the path allows: {floor:.3f} ms "
            f"({' plus '.join(parts)})")
