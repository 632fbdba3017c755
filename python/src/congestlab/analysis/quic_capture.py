"""QUIC connections of a server-side capture, decrypted by tshark with the client's TLS key
log, measured as analysis/metrics.py measures a TCP connection.

One tshark pass reads every connection (`quic_connections`); `parse_field_lines` turns its
tab-separated field lines into connections and needs no tshark (tests feed it lines). A
second pass, with every stream byte, runs only when a STREAM frame has no Length field
(quic-go, Caddy's QUIC, leaves it out of a packet's last frame): its length is then its data's.

Definitions (the one definition of every protocol: the client's first packet -> the client's
acknowledgement of the last response byte):
- start: the client's first datagram (its Initial: QUIC's SYN and ClientHello at once)
- end: the first client datagram after which the server packets the client has acknowledged
  (its ACK ranges so far) carry every byte of the response stream and its FIN (the lowest
  client-initiated bidirectional stream the server sent data on: stream 0 for a single GET;
  its bytes are the HTTP/3 frames, HEADERS included): a byte lost and resent counts once a
  packet carrying it is acknowledged, as TCP's cumulative ACK says. When the client never
  acknowledges them all, its CONNECTION_CLOSE, if every byte and the FIN had been sent before
  it (curl closes as soon as it holds the response, before its ACK is due): `ended_by` says
  which ("ack" or "close")
- delay_ms = syn_to_last_ack_ms = end - start
- payload_bytes: unique response stream bytes; goodput over the delay
- bytes_captured: UDP payload bytes of both directions in [start, end]; bytes_nrt the same
  without the server datagrams that carry stream bytes sent before (as TCP's NRT drops
  retransmitted segments whole). TCP counts whole frames (metrics.py): QUIC counts UDP
  payloads, so the two differ by the IP and UDP headers
- retransmissions: server packets carrying stream bytes (any stream) sent before; QUIC never
  reuses a packet number, so a retransmission is the same stream range in a new packet
- rtt_samples_ms: server packet with stream data -> first client ACK covering its number, not
  for packets carrying resent bytes (Karn, as TCP); ack_delay is not subtracted (as TCP)
- server_data_unacked_bytes: response stream bytes in no acknowledged server packet (0 when
  the client's close ended the GET: the close stands for their acknowledgement)

Coalesced datagrams give several values per field. STREAM frames are read from the
datagram's short-header (1-RTT) packet, always its last. ACK frames count only in datagrams
without long-header packets: a coalesced datagram's ACKs may belong to the Initial or
Handshake number space, and after the handshake the client's datagrams are short-header only.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from congestlab.analysis.metrics import ByteRanges, ConnectionMetrics
from congestlab.analysis.trace import PcapConnection
from congestlab.errors import ToolError, TraceError

FIELDS = (
    "frame.time_epoch", "frame.len", "frame.cap_len", "ip.src", "ipv6.src", "ip.dst", "ipv6.dst",
    "udp.srcport", "udp.dstport", "udp.length", "quic.header_form", "quic.packet_number", "quic.scid",
    "quic.frame_type", "quic.stream.stream_id", "quic.stream.offset", "quic.stream.length",
    "quic.stream.fin", "quic.ack.largest_acknowledged", "quic.ack.first_ack_range",
    "quic.ack.ack_range_count", "quic.ack.gap", "quic.ack.ack_range", "quic.decryption_failed",
    "quic.msd.stream_id", "quic.msd.maximum_stream_data", "tls.quic.parameter.initial_max_stream_data_bidi_local",
    # last, and asked for only when a STREAM frame has no Length field (quic-go's): printing
    # every stream byte in hex doubles tshark's time
    "quic.stream_data",
)
_I = {name: i for i, name in enumerate(FIELDS)}
NOT_DECRYPTED = "not decrypted: no key in the key log"


class _NeedsStreamData(Exception):
    """A STREAM frame without Length in lines read without quic.stream_data."""
_UDP_HEADER = 8


@dataclass
class StreamChunk:
    stream_id: int
    offset: int
    length: int
    fin: bool


@dataclass
class QuicDatagram:
    """One UDP datagram of a connection (its QUIC packets coalesced)."""

    ts: float
    from_client: bool
    udp_payload: int
    truncated: bool  # cap_len < len: the snapshot length cut it
    long_header: bool  # holds an Initial/Handshake/0-RTT packet
    short_pn: int | None  # number of its 1-RTT packet
    chunks: list[StreamChunk] = field(default_factory=list)
    acked: list[tuple[int, int]] = field(default_factory=list)  # inclusive pn ranges (1-RTT ACKs)
    # flow control: (stream id, MAX_STREAM_DATA) frames; the client's initial limit of the streams it opens
    max_stream_data: list[tuple[int, int]] = field(default_factory=list)
    initial_max_stream_data: int | None = None
    encrypted: bool = False  # a 1-RTT packet tshark could not read
    closes: bool = False  # holds a CONNECTION_CLOSE frame
    scids: list[str] = field(default_factory=list)


@dataclass
class QuicConnection(PcapConnection):
    """One QUIC connection at the server's UDP port: trace.py's PcapConnection (request code
    treats both alike; `capture_duplicates` is not detected for QUIC and stays 0) and what
    QUIC adds."""

    server_scid: str | None = None
    client_scid: str | None = None
    response_stream_id: int | None = None
    # the client's first CONNECTION_CLOSE: curl may close right after the last byte without
    # acknowledging it; then, with the whole response sent, the close is the GET's end
    client_close_ts: float | None = None
    ended_by: str = ""  # "ack": the client's ACK of the last byte; "close": its CONNECTION_CLOSE
    datagrams: list[QuicDatagram] = field(default_factory=list, repr=False)


def quic_connections(pcap: Path, keylog: Path | None, server_ports: set[int],
                     tshark: str = "tshark") -> list[QuicConnection]:
    """Every QUIC connection at `server_ports` in `pcap`, measured (one tshark pass)."""
    pcap = Path(pcap)
    if not pcap.is_file():
        raise TraceError(f"{pcap}: no such capture")
    if shutil.which(tshark) is None:
        raise ToolError([tshark], None, "")
    ports = sorted(int(p) for p in server_ports)
    argv = [tshark, "-n", "-r", str(pcap), "--disable-protocol", "http3", "-T", "fields",
            "-E", "separator=/t", "-E", "aggregator=,",
            "-E", "occurrence=a", "-Y", " || ".join(f"udp.port == {p}" for p in ports)]
    for p in ports:  # decode as QUIC whatever the port number
        argv += ["-d", f"udp.port=={p},quic"]
    if keylog is not None and Path(keylog).is_file():
        argv += ["-o", f"tls.keylog_file:{keylog}"]
    for name in FIELDS[:-1]:
        argv += ["-e", name]
    try:
        return parse_field_lines(_run(argv), set(ports), stream_data=False)
    except _NeedsStreamData:  # a second pass, with the stream bytes
        return parse_field_lines(_run(argv + ["-e", FIELDS[-1]]), set(ports))


def _run(argv: list[str]) -> list[str]:
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ToolError(argv, proc.returncode, proc.stderr)
    return proc.stdout.splitlines()


def parse_field_lines(lines, server_ports: set[int], stream_data: bool = True) -> list[QuicConnection]:
    """tshark's field lines (FIELDS, tab-separated, ',' between a field's values) ->
    connections keyed by family and client port, in the order of their first datagram.
    `stream_data`: the lines have quic.stream_data (else they end before it)."""
    conns: dict[tuple[str, int, int], QuicConnection] = {}
    for line in lines:
        if not line.strip():
            continue
        f = line.rstrip("\n").split("\t")
        f += [""] * (len(FIELDS) - len(f))
        if "," in f[_I["udp.srcport"]]:
            continue  # an ICMP error quoting a datagram: not the connection's own
        sport, dport = int(f[_I["udp.srcport"]]), int(f[_I["udp.dstport"]])
        from_client = dport in server_ports
        if not from_client and sport not in server_ports:
            continue
        family = "v6" if f[_I["ipv6.src"]] else "v4"
        src = f[_I["ipv6.src"]] or f[_I["ip.src"]]
        dst = f[_I["ipv6.dst"]] or f[_I["ip.dst"]]
        client_port, server_port = (sport, dport) if from_client else (dport, sport)
        key = (family, client_port, server_port)
        dg = _datagram(f, from_client, stream_data)
        c = conns.get(key)
        if c is None:
            client, server = (src, dst) if from_client else (dst, src)
            c = conns[key] = QuicConnection(
                conn=len(conns), family=family, client=client, client_port=client_port, server=server,
                server_port=server_port, first_ts=dg.ts, last_ts=dg.ts, retransmissions=0, metrics=None)
        c.last_ts = max(c.last_ts, dg.ts)
        if from_client and dg.closes and c.client_close_ts is None:
            c.client_close_ts = dg.ts
        c.datagrams.append(dg)
        if dg.scids:
            if from_client and c.client_scid is None:
                c.client_scid = dg.scids[0]
            elif not from_client and c.server_scid is None:
                c.server_scid = dg.scids[0]
    out = list(conns.values())
    for c in out:
        measure_quic(c)
    return out


def _ints(value: str) -> list[int]:
    return [int(v, 0) for v in value.split(",") if v != ""] if value else []


def _datagram(f: list[str], from_client: bool, stream_data: bool) -> QuicDatagram:
    forms = _ints(f[_I["quic.header_form"]])
    pns = _ints(f[_I["quic.packet_number"]])
    types = _ints(f[_I["quic.frame_type"]])
    short = bool(forms) and forms[-1] == 0
    long_header = any(v == 1 for v in forms)
    frame_len, cap_len = int(f[_I["frame.len"]] or 0), int(f[_I["frame.cap_len"]] or 0)
    udp_len = int(f[_I["udp.length"]].split(",")[0] or _UDP_HEADER)
    dg = QuicDatagram(
        ts=float(f[_I["frame.time_epoch"]]), from_client=from_client, udp_payload=udp_len - _UDP_HEADER,
        truncated=cap_len < frame_len, long_header=long_header, short_pn=None,
        scids=[s.replace(":", "") for s in f[_I["quic.scid"]].split(",") if s])
    decrypted_short = short and len(pns) == len(forms)
    dg.encrypted = short and (not decrypted_short or bool(f[_I["quic.decryption_failed"]]))
    dg.initial_max_stream_data = next(iter(_ints(f[_I["tls.quic.parameter.initial_max_stream_data_bidi_local"]])),
                                      None)
    if not decrypted_short:
        return dg
    dg.max_stream_data = list(zip(_ints(f[_I["quic.msd.stream_id"]]), _ints(f[_I["quic.msd.maximum_stream_data"]])))
    dg.short_pn = pns[-1]
    dg.closes = 0x1C in types or 0x1D in types
    stream_types = [t for t in types if 0x08 <= t <= 0x0F]
    sids = _ints(f[_I["quic.stream.stream_id"]])
    offsets = iter(_ints(f[_I["quic.stream.offset"]]))
    lengths = iter(_ints(f[_I["quic.stream.length"]]))
    data = None
    for i, t in enumerate(stream_types):
        off = next(offsets, 0) if t & 0x04 else 0
        if t & 0x02:
            length = next(lengths, 0)
        else:  # no Length field: the data runs to the packet's end (quic-go's last frame)
            if not stream_data:
                raise _NeedsStreamData
            data = f[_I["quic.stream_data"]].split(",") if data is None else data
            length = len(data[i].replace(":", "")) // 2 if i < len(data) else 0
        dg.chunks.append(StreamChunk(sids[i], off, length, bool(t & 0x01)))
    if not long_header:
        dg.acked = _ack_ranges(f)
    return dg


def _ack_ranges(f: list[str]) -> list[tuple[int, int]]:
    """Inclusive packet-number ranges of the datagram's ACK frames (RFC 9000 19.3.1)."""
    largest = _ints(f[_I["quic.ack.largest_acknowledged"]])
    first = _ints(f[_I["quic.ack.first_ack_range"]])
    counts = _ints(f[_I["quic.ack.ack_range_count"]])
    gaps = iter(_ints(f[_I["quic.ack.gap"]]))
    ranges = iter(_ints(f[_I["quic.ack.ack_range"]]))
    out = []
    for i, top in enumerate(largest):
        low = top - first[i]
        out.append((low, top))
        for _ in range(counts[i] if i < len(counts) else 0):
            top = low - next(gaps) - 2
            low = top - next(ranges)
            out.append((low, top))
    return out


def response_stream(dgs: list[QuicDatagram]) -> int | None:
    """The response's stream: the lowest client-initiated bidirectional stream the server sent
    data on (None: it sent none)."""
    ids = {ch.stream_id for d in dgs if not d.from_client for ch in d.chunks if ch.stream_id % 4 == 0 and ch.length}
    return min(ids) if ids else None


def covered(pn: int, ranges: list[tuple[int, int]]) -> bool:
    """Packet number `pn` lies in one of the ACK `ranges` (inclusive)."""
    return any(lo <= pn <= hi for lo, hi in ranges)


def measure_quic(c: QuicConnection) -> None:
    """Fills metrics (or error), retransmissions and server_data_unacked_bytes of `c`."""
    dgs = sorted(c.datagrams, key=lambda d: d.ts)
    label = f"connection {c.family} port {c.client_port}"
    cut = sum(1 for d in dgs if d.truncated)
    # Karn and retransmissions: per server datagram, does it carry stream bytes sent before?
    seen: dict[int, ByteRanges] = {}
    resent = [False] * len(dgs)
    for i, d in enumerate(dgs):
        if d.from_client:
            continue
        for ch in d.chunks:
            if ch.length and seen.setdefault(ch.stream_id, ByteRanges()).add(ch.offset, ch.offset + ch.length):
                resent[i] = True
    c.retransmissions = sum(resent)
    if cut:
        c.error = f"{label}: capture truncated: {cut} datagrams cut by the snapshot length (cap_len < len)"
        return
    if any(d.encrypted for d in dgs) and not any(d.chunks or d.acked for d in dgs):
        c.error = f"{label}: {NOT_DECRYPTED}"
        return
    sid = c.response_stream_id = response_stream(dgs)
    if sid is None:
        c.error = f"{label}: no response stream data from the server"
        return
    response = ByteRanges()
    for d in dgs:
        if not d.from_client:
            for ch in d.chunks:
                if ch.stream_id == sid and ch.length:
                    response.add(ch.offset, ch.offset + ch.length)
    end, c.ended_by, c.server_data_unacked_bytes = _response_end(dgs, sid, response)
    if end is None:
        last_byte = response.ranges[-1][1] - 1
        c.error = (f"{label}: no client ACK of the whole response (stream {sid}: {c.server_data_unacked_bytes} "
                   f"of {last_byte + 1} B never acknowledged)")
        if c.client_close_ts is not None:
            c.error += "; it closed the connection before the whole response had gone out"
        return
    start = next(d for d in dgs if d.from_client)
    if not start.long_header:
        c.error = f"{label}: no client Initial: the capture starts inside the connection"
        return
    delay_s = end.ts - start.ts
    if delay_s <= 0:
        c.error = f"{label}: non-positive delay"
        return
    inside = [(d, r) for d, r in zip(dgs, resent) if start.ts <= d.ts <= end.ts]
    captured = sum(d.udp_payload for d, _ in inside)
    nrt = sum(d.udp_payload for d, r in inside if not r)
    payload = sum(e - s for s, e in response.ranges)
    delay_ms = delay_s * 1e3
    c.metrics = ConnectionMetrics(
        family=c.family, client_port=c.client_port, delay_ms=delay_ms,
        nrt_throughput_mbps=nrt * 8 / delay_s / 1e6, captured_throughput_mbps=captured * 8 / delay_s / 1e6,
        goodput_mbps=payload * 8 / delay_s / 1e6, retransmissions=c.retransmissions, bytes_nrt=nrt,
        bytes_captured=captured, payload_bytes=payload, rtt_samples_ms=_rtt_samples_ms(dgs, resent),
        syn_to_last_ack_ms=delay_ms)


def _rtt_samples_ms(dgs: list[QuicDatagram], resent: list[bool]) -> list[float]:
    pending: dict[int, float] = {}  # server packet number -> sent ts
    samples = []
    for d, r in zip(dgs, resent):
        if not d.from_client:
            if d.chunks and not r and d.short_pn is not None:
                pending.setdefault(d.short_pn, d.ts)
            continue
        if d.acked and pending:
            for pn in [pn for pn in pending if covered(pn, d.acked)]:
                samples.append((d.ts - pending.pop(pn)) * 1e3)
    return samples


def _response_end(dgs: list[QuicDatagram], sid: int, response: ByteRanges) -> tuple[QuicDatagram | None, str, int]:
    """(the GET's end, "ack" or "close" or "", response bytes never acknowledged): the first
    client datagram after which the server packets it and earlier ones acknowledged carry every
    response byte and the FIN (QUIC's ACKs are per packet: a byte resent after a loss counts
    once a packet carrying it is acknowledged, as TCP's cumulative ACK would say); else the
    client's CONNECTION_CLOSE, if every byte and the FIN had been sent before it without a hole
    (curl closes as soon as it holds the response; its own record says it got it all)."""
    carried: dict[int, list[tuple[int, int]]] = {}  # server packet number -> its response ranges
    fin_pns: set[int] = set()
    sent = ByteRanges()
    fin_sent_ts = None
    final = response.ranges[-1][1] if response.ranges else 0
    for d in dgs:
        if not d.from_client and d.short_pn is not None:
            for ch in d.chunks:
                if ch.stream_id == sid:
                    carried.setdefault(d.short_pn, []).append((ch.offset, ch.offset + ch.length))
                    if ch.fin:
                        fin_pns.add(d.short_pn)
    acked: set[int] = set()
    got = ByteRanges()
    fin_acked = False
    for d in dgs:
        if not d.from_client:
            for ch in d.chunks:
                if ch.stream_id == sid:
                    sent.add(ch.offset, ch.offset + ch.length)
                    fin_sent_ts = d.ts if ch.fin and fin_sent_ts is None else fin_sent_ts
            continue
        for lo, hi in d.acked:
            for pn in range(lo, hi + 1):
                if pn in carried and pn not in acked:
                    acked.add(pn)
                    fin_acked = fin_acked or pn in fin_pns
                    for a, b in carried[pn]:
                        if b > a:
                            got.add(a, b)
        if fin_acked and got.ranges == [[0, final]]:
            return d, "ack", 0
        if d.closes:
            whole = fin_sent_ts is not None and sent.ranges == [[0, final]]
            return (d, "close", 0) if whole else (None, "", final - byte_count(got))
    return None, "", final - byte_count(got)


def byte_count(ranges: ByteRanges) -> int:
    """The bytes the ranges hold."""
    return sum(e - s for s, e in ranges.ranges)
