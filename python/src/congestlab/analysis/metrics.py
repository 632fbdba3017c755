"""Metrics of one measured connection, as the studies define them (seed 001 §III,
seed 000 ch. 3): measured at the server's port.

- delay: from the HTTP GET to the last ACK the client sends before its FIN
- throughput (NRT): bytes of the connection in both directions inside that interval,
  ignoring retransmissions; captured throughput counts them too
- goodput: application bytes delivered to the client (unique payload) over the delay
- retransmissions: data segments whose bytes were all or partly sent before; a segment
  below the highest sequence seen that fills a hole is reordering, not a retransmission
- RTT samples: server data segment -> first client ACK covering it (Karn: never for
  retransmitted bytes)

crates/traceanalyze computes the same in one streaming pass; this module is its reference
(python/src/congestlab/analysis/trace.py runs either).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from congestlab.analysis.connections import Connection
from congestlab.analysis.packets import Segment
from congestlab.errors import TraceError

SEQ_MOD = 1 << 32


@dataclass
class ConnectionMetrics:
    family: str
    client_port: int
    delay_ms: float
    nrt_throughput_mbps: float
    captured_throughput_mbps: float
    goodput_mbps: float
    retransmissions: int
    bytes_nrt: int
    bytes_captured: int
    payload_bytes: int
    rtt_samples_ms: list[float] = field(default_factory=list)
    syn_to_last_ack_ms: float | None = None  # from the client's SYN (connection set-up included)

    @property
    def rtt_mean_ms(self) -> float | None:
        return sum(self.rtt_samples_ms) / len(self.rtt_samples_ms) if self.rtt_samples_ms else None


class ByteRanges:
    """Sequence ranges already seen in one direction (relative, unwrapped offsets)."""

    def __init__(self) -> None:
        self.ranges: list[list[int]] = []

    def add(self, start: int, end: int) -> bool:
        """Record [start, end); True when any of it was seen before (a retransmission)."""
        overlap = any(s < end and start < e for s, e in self.ranges)
        merged = [start, end]
        keep = []
        for s, e in self.ranges:
            if s <= merged[1] and merged[0] <= e:
                merged = [min(s, merged[0]), max(e, merged[1])]
            else:
                keep.append([s, e])
        keep.append(merged)
        keep.sort()
        self.ranges = keep
        return overlap


class _Direction:
    """Unwraps 32-bit sequence numbers relative to the first one seen."""

    def __init__(self) -> None:
        self.base: int | None = None
        self.last = 0

    def offset(self, seq: int) -> int:
        if self.base is None:
            self.base = seq
        self.last = self.nearest(seq)
        return self.last

    def nearest(self, seq: int) -> int | None:
        """Offset of a number in this direction's space (an ACK of it), closest to the last
        offset, without moving it; None before the direction's first segment."""
        if self.base is None:
            return None
        rel = (seq - self.base) % SEQ_MOD
        # pick the unwrapped value closest to the last one (handles wrap-around)
        candidates = (rel + k * SEQ_MOD for k in (self.last // SEQ_MOD - 1, self.last // SEQ_MOD,
                                                  self.last // SEQ_MOD + 1))
        return min(candidates, key=lambda v: abs(v - self.last))


def measure_connection(conn: Connection) -> ConnectionMetrics:
    segs = conn.segments
    from_client = [conn.from_client(s) for s in segs]
    get_index = next((i for i, s in enumerate(segs) if from_client[i] and s.payload_len > 0), None)
    if get_index is None:
        raise TraceError(f"connection {conn.family} port {conn.client_port}: no request from the client")
    fin_index = next((i for i, s in enumerate(segs) if from_client[i] and s.fin and i > get_index), len(segs))
    last_ack_index = None
    for i in range(get_index, fin_index):
        # an ACK without payload: a TLS client's close_notify (or HTTP/2's GOAWAY) before its
        # FIN is its closing, which may come long after the body (docs/data-format.md)
        if (from_client[i] and segs[i].has_ack and not segs[i].fin and not segs[i].rst
                and (i == get_index or segs[i].payload_len == 0)):
            last_ack_index = i
    if last_ack_index is None or last_ack_index == get_index:
        raise TraceError(f"connection {conn.family} port {conn.client_port}: no client ACK after the request")
    t0, t1 = segs[get_index].ts, segs[last_ack_index].ts
    delay_s = t1 - t0
    if delay_s <= 0:
        raise TraceError(f"connection {conn.family} port {conn.client_port}: non-positive delay")

    retransmitted = retransmission_flags(segs, from_client)

    bytes_captured = bytes_nrt = 0
    for i in range(get_index, last_ack_index + 1):
        bytes_captured += segs[i].frame_len
        if not retransmitted[i]:
            bytes_nrt += segs[i].frame_len
    payload_bytes = sum(s.payload_len for i, s in enumerate(segs[: last_ack_index + 1])
                        if not from_client[i] and s.payload_len and not retransmitted[i])
    retrans = sum(1 for i, s in enumerate(segs) if retransmitted[i] and s.payload_len > 0)
    syn_ts = next((s.ts for i, s in enumerate(segs) if from_client[i] and s.syn), None)
    return ConnectionMetrics(
        family=conn.family,
        client_port=conn.client_port,
        delay_ms=delay_s * 1e3,
        nrt_throughput_mbps=bytes_nrt * 8 / delay_s / 1e6,
        captured_throughput_mbps=bytes_captured * 8 / delay_s / 1e6,
        goodput_mbps=payload_bytes * 8 / delay_s / 1e6,
        retransmissions=retrans,
        bytes_nrt=bytes_nrt,
        bytes_captured=bytes_captured,
        payload_bytes=payload_bytes,
        rtt_samples_ms=rtt_samples_ms(segs, from_client, retransmitted),
        syn_to_last_ack_ms=(t1 - syn_ts) * 1e3 if syn_ts is not None else None,
    )


def server_data_unacked(segs: list[Segment], from_client: list[bool]) -> int:
    """Server payload bytes beyond the highest acknowledgment the client sent: 0 when the
    client acknowledged the last data in the capture (the completeness check of a measured
    request, analysis/request_outcome.py). Once the client closes (its FIN or RST is in the
    capture), data the server sent after the client's closing is owed no ACK: after its FIN
    or RST, or after its last payload sent with all the server's data so far acknowledged (a
    TLS close_notify, an HTTP/2 GOAWAY), which a server answers with its own while the
    client's socket is gone."""
    server_dir = _Direction()
    data_end = acked = at_client_close = None
    client_closed = False
    for i, s in enumerate(segs):
        if from_client[i] and (s.fin or s.rst):
            client_closed = True
        if (from_client[i] and s.payload_len and data_end is not None and not client_closed
                and acked is not None and acked >= data_end):
            at_client_close = data_end  # the client speaks with every byte so far acknowledged: its closing
        if not from_client[i]:
            off = server_dir.offset(s.seq)
            if s.payload_len and not client_closed:
                end = off + s.payload_len + (1 if s.syn else 0)
                data_end = end if data_end is None else max(data_end, end)
        elif s.has_ack and server_dir.base is not None:
            ack = server_dir.nearest(s.ack)
            acked = ack if acked is None else max(acked, ack)
    if client_closed and at_client_close is not None:
        data_end = at_client_close
    if data_end is None:
        return 0
    return max(data_end - (acked if acked is not None else 0), 0)


def retransmission_flags(segs: list[Segment], from_client: list[bool]) -> list[bool]:
    """Per segment: does it carry sequence space of its direction that was seen before?"""
    seen = {True: ByteRanges(), False: ByteRanges()}
    seqs = {True: _Direction(), False: _Direction()}
    retransmitted = [False] * len(segs)
    for i, s in enumerate(segs):
        d = from_client[i]
        off = seqs[d].offset(s.seq)
        length = s.payload_len + (1 if s.syn else 0) + (1 if s.fin else 0)
        if length:
            retransmitted[i] = seen[d].add(off, off + length)
    return retransmitted


def rtt_samples_ms(segs: list[Segment], from_client: list[bool], retransmitted: list[bool]) -> list[float]:
    """Server data segment -> first client ACK at or beyond its end. Segments whose bytes
    were retransmitted give no sample (Karn's algorithm); the others still do."""
    return [rtt for _, rtt in rtt_samples(segs, from_client, retransmitted)]


def rtt_samples(segs: list[Segment], from_client: list[bool], retransmitted: list[bool]) -> list[tuple[float, float]]:
    """(ACK timestamp, RTT in ms) per sample, in the order rtt_samples_ms gives them."""
    server_dir = _Direction()
    pending: list[list] = []  # [start offset, end offset, sent ts, valid]
    samples: list[tuple[float, float]] = []
    for i, s in enumerate(segs):
        if not from_client[i]:
            off = server_dir.offset(s.seq)
            if s.payload_len:
                end = off + s.payload_len
                if retransmitted[i]:
                    for entry in pending:
                        if entry[0] < end and off < entry[1]:
                            entry[3] = False
                else:
                    pending.append([off, end, s.ts, True])
            continue
        if not s.has_ack or server_dir.base is None:
            continue
        # unwrapped like the data (a connection may carry more than 4 GiB)
        ack_off = server_dir.nearest(s.ack)
        still = []
        for entry in pending:
            if entry[1] <= ack_off:
                if entry[3]:
                    samples.append((s.ts, (s.ts - entry[2]) * 1e3))
            else:
                still.append(entry)
        pending = still
    return samples
