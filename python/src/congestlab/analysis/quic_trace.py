"""A QUIC connection (analysis/quic_capture.py) as a segment trace in the TCP trace's format
(analysis/trace_files.py TRACE_HEADER), so the report's panels draw an HTTP/3 GET as they
draw a TCP one. One row per UDP datagram, in time order; offsets are bytes of the response
stream (conn.response_stream_id: its HTTP/3 frames, HEADERS included), from 0.

- server datagram ("s"): seq_off/end_off the response bytes it carries (lowest to highest
  of its chunks), payload_bytes their sum; `retransmitted` when any of them was sent before
  (QUIC resends a range in a new packet); a datagram without response bytes has 0 payload
- client datagram ("c"): with 1-RTT ACK frames, ack_off = response bytes acknowledged
  contiguously from 0 (the bytes of every server packet its ACK ranges, and those before,
  cover) and sack_blocks the acknowledged ranges above ack_off: QUIC's ACK ranges are TCP's
  SACK; without an ACK frame ack_off is empty
- rwnd_bytes: the response stream's flow-control limit (the client's MAX_STREAM_DATA for it,
  else its initial_max_stream_data_bidi_local transport parameter) less ack_off; 0 while
  unknown. The connection's limit (MAX_DATA) is not read: on a single GET it is far above
- in_flight_bytes: response bytes sent and not yet acknowledged (a lost range stays in
  flight until a later packet carrying it is acknowledged)
- rtt_ns: on the client datagram first acknowledging a server packet with stream data, the
  newest such packet's RTT; not for packets carrying resent bytes (Karn's rule, as
  quic_capture.py's rtt samples); ack_delay is not subtracted
- flags: "F" on a server datagram with the response's FIN, "C" on a CONNECTION_CLOSE, "L"
  on one holding a long-header (handshake) packet, "A" on a client ACK
"""

from __future__ import annotations

from congestlab.analysis.metrics import ByteRanges
from congestlab.analysis.quic_capture import QuicConnection, QuicDatagram, byte_count, covered, response_stream


def quic_trace_lines(conn: QuicConnection) -> list[bytes]:
    """The connection's trace rows (TRACE_HEADER columns, no header line) as CSV lines."""
    sid = conn.response_stream_id if conn.response_stream_id is not None else response_stream(conn.datagrams)
    seen: dict[int, ByteRanges] = {}  # stream -> bytes the server sent of it
    pending: dict[int, tuple[float, bool, list]] = {}  # unacknowledged server pn -> (ts, resent, response ranges)
    sent, acked = seen.setdefault(sid, ByteRanges()), ByteRanges()
    limit: int | None = None
    out = []
    for d in sorted(conn.datagrams, key=lambda d: d.ts):
        row = {"dir": "c" if d.from_client else "s", "flags": _flags(d, sid), "seq_off": 0, "end_off": 0,
               "payload_bytes": 0, "retransmitted": 0, "ack_off": "", "rwnd_bytes": 0, "sack_blocks": "",
               "rtt_ns": ""}
        if not d.from_client:
            ranges = [(ch.offset, ch.offset + ch.length) for ch in d.chunks if ch.stream_id == sid and ch.length]
            resent = resent_response = False  # any stream's resent bytes cost the packet its RTT sample
            for ch in d.chunks:
                if ch.length and seen.setdefault(ch.stream_id, ByteRanges()).add(ch.offset, ch.offset + ch.length):
                    resent, resent_response = True, resent_response or ch.stream_id == sid
            if d.short_pn is not None and d.chunks:
                pending.setdefault(d.short_pn, (d.ts, resent, ranges))
            if ranges:
                row |= {"seq_off": min(lo for lo, _ in ranges), "end_off": max(hi for _, hi in ranges),
                        "payload_bytes": sum(hi - lo for lo, hi in ranges), "retransmitted": int(resent_response)}
        else:
            if d.initial_max_stream_data is not None and limit is None:
                limit = d.initial_max_stream_data
            for stream, value in d.max_stream_data:
                if stream == sid:
                    limit = max(limit or 0, value)
            if d.acked:
                newly = [pn for pn in pending if covered(pn, d.acked)]
                for pn in newly:
                    for lo, hi in pending[pn][2]:
                        acked.add(lo, hi)
                timed = [pn for pn in newly if not pending[pn][1]]
                rtt_ns = round((d.ts - pending[max(timed)][0]) * 1e9) if timed else ""
                for pn in newly:
                    del pending[pn]
                ack_off = acked.ranges[0][1] if acked.ranges and acked.ranges[0][0] == 0 else 0
                row |= {"ack_off": ack_off, "rwnd_bytes": max(limit - ack_off, 0) if limit else 0,
                        "sack_blocks": " ".join(f"{lo}-{hi}" for lo, hi in acked.ranges if lo >= ack_off and hi > lo),
                        "rtt_ns": rtt_ns}
        row["in_flight_bytes"] = byte_count(sent) - byte_count(acked)
        out.append(_line(conn.conn, d.ts, row))
    return out


def _flags(d: QuicDatagram, sid: int | None) -> str:
    flags = "L" if d.long_header else ""
    if d.from_client:
        flags += "A" if d.acked else ""
    elif any(ch.fin and ch.stream_id == sid for ch in d.chunks):
        flags += "F"
    return flags + ("C" if d.closes else "")


def _line(conn: int, ts: float, row: dict) -> bytes:
    cells = [conn, round(ts * 1e9), row["dir"], row["flags"], row["seq_off"], row["end_off"], row["payload_bytes"],
             row["retransmitted"], row["ack_off"], row["rwnd_bytes"], row["sack_blocks"], row["in_flight_bytes"],
             row["rtt_ns"]]
    return (",".join(str(c) for c in cells) + "\n").encode()
