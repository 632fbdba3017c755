"""Per-connection send/ACK streams of a lean server for the RTO replay, from its two
independent witnesses: leanweb's JSON-lines log (`tx`, `tx_dropped`, `ack`, `timeout`,
`rtt_sample`; crates/leanweb/src/stack/events.rs) and the capture at its port (docs/rto-replay.md).

A stream is the sender's view in order: ("send", t_us, start, end, retransmission),
("ack", t_us, ack) for every ACK of new data, ("timeout", t_us) for a go-back-N rewind.
Sequence numbers are unwrapped to 64 bits from the connection's first one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from congestlab.analysis.connections import group_connections
from congestlab.analysis.packets import read_segments
from congestlab.errors import LeanLogError
from congestlab.rundir.upgrade import sample_stands_in
from congestlab.servers.lean_events import family, numbered_events, peer_port

class _Unwrap:
    """32-bit sequence numbers to a monotone 64-bit line (nearest to the last one seen)."""

    def __init__(self) -> None:
        self.last: int | None = None

    def __call__(self, seq: int) -> int:
        if self.last is None:
            self.last = seq
            return seq
        delta = (seq - self.last) & 0xFFFFFFFF
        if delta >= 1 << 31:
            delta -= 1 << 32
        self.last += delta
        return self.last


@dataclass
class ConnStream:
    family: str  # v4 | v6
    client_port: int
    opened_unix_us: int
    events: list[tuple] = field(default_factory=list)
    # leanweb's own samples: (rtt_us, srtt_us, rttvar_us, rto_us); log source only
    logged_samples: list[tuple[int, int, int, int]] = field(default_factory=list)
    # leanweb's RTO state per logged transmission: (start, rto_unfloored_us or None)
    logged_tx_rto: list[tuple[int, float | None]] = field(default_factory=list)
    unix_offset_us: int = 0  # add to a t_us of `events` for epoch µs
    opened_in_capture: bool = False  # capture source: the client's SYN is its first segment

    @property
    def key(self) -> tuple[str, int]:
        return (self.family, self.client_port)


@dataclass
class LeanLog:
    settings: dict  # leanweb's `start` event
    conns: list[ConnStream]
    has_tx: bool  # written by a leanweb that logs transmissions (else only rtt_sample)


def read_lean_log(path: Path) -> LeanLog:
    """Parses a leanweb log; a line that is not JSON (other than an unterminated last line,
    cut by the server's exit) raises LeanLogError naming the file and line."""
    settings: dict | None = None
    conns: dict[int, ConnStream] = {}
    unwrap: dict[int, _Unwrap] = {}
    has_tx = False
    try:
        for number, event in numbered_events(path, strict=True):
            kind = event["event"]
            try:
                if kind == "start":
                    settings = event
                    continue
                conn = event.get("conn")
                if kind == "open":
                    conns[conn] = ConnStream(family(event["family"]), peer_port(event), int(event["unix_us"]),
                                             unix_offset_us=int(event["unix_us"]) - int(event["t_us"]))
                    unwrap[conn] = _Unwrap()
                    continue
                stream = conns.get(conn)
                if stream is None:
                    continue
                if kind in ("tx", "tx_dropped"):
                    has_tx = True
                    start = unwrap[conn](int(event["seq"]))
                    end = start + int(event["len"]) + int(bool(event["syn"])) + int(bool(event["fin"]))
                    stream.events.append(("send", int(event["sent_us"]), start, end, bool(event["retransmission"])))
                    stream.logged_tx_rto.append((start, event["rto_unfloored_us"]))
                elif kind == "ack":
                    stream.events.append(("ack", int(event["at_us"]), unwrap[conn](int(event["ack"]))))
                elif kind == "timeout":
                    stream.events.append(("timeout", int(event["t_us"])))
                elif kind == "rtt_sample":
                    stream.logged_samples.append((int(event["rtt_us"]), int(event["srtt_us"]),
                                                  int(event["rttvar_us"]), int(event["rto_us"])))
                    if sample_stands_in(kind, has_tx):  # the sample's own time stands in for its ACK
                        stream.events.append(("sample", int(event["t_us"]), int(event["rtt_us"])))
            except (KeyError, ValueError, TypeError, IndexError) as err:
                raise LeanLogError(f"{path}:{number}: {kind} event lacks a valid field ({err})") from None
    except OSError as err:
        raise LeanLogError(f"{path}: {err.strerror}") from None
    if settings is None:
        raise LeanLogError(f"{path}: no start event (not a leanweb log)")
    return LeanLog(settings, list(conns.values()), has_tx)


def pcap_streams(pcap: Path, server_port: int, go_back_n: bool) -> list[ConnStream]:
    """The server's data segments and the client's ACKs of new data, per connection.

    A segment carrying sequence space sent before is a retransmission. With go-back-N (the
    bare stack's only repair), a retransmission starting at the highest ACK is the rewind
    after a timeout: like leantcp, it cancels every outstanding measurement (Karn).
    """
    streams = []
    for conn in group_connections(read_segments(pcap), server_port):
        first = conn.segments[0]
        stream = ConnStream(conn.family, conn.client_port, round(first.ts * 1e6),
                            opened_in_capture=first.syn and conn.from_client(first))
        unwrap_seq, unwrap_ack = _Unwrap(), _Unwrap()
        snd_max = snd_una = None
        for seg in conn.segments:
            t_us = round(seg.ts * 1e6)
            if conn.from_client(seg):
                if seg.has_ack and snd_una is not None:
                    ack = unwrap_ack(seg.ack)
                    if snd_una < ack <= snd_max:
                        snd_una = ack
                        stream.events.append(("ack", t_us, ack))
                continue
            length = seg.payload_len + int(seg.syn) + int(seg.fin)
            if not length:
                continue
            start = unwrap_seq(seg.seq)
            if snd_max is None:
                snd_max = snd_una = start
                unwrap_ack(seg.seq)  # the client's ACKs live on the same line
            retransmission = start < snd_max
            if retransmission and go_back_n and start == snd_una:
                stream.events.append(("timeout", t_us))
            stream.events.append(("send", t_us, start, start + length, retransmission))
            snd_max = max(snd_max, start + length)
        streams.append(stream)
    return streams
