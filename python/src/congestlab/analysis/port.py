"""Throughput of everything on a server's port during one repetition (seed 002: the
server's throughput over all its connections — stress, load and the measured request —
both directions, with retransmissions (captured) and without them (NRT))."""

from __future__ import annotations

from congestlab.analysis.connections import Connection
from congestlab.analysis.metrics import retransmission_flags


def port_aggregate(conns: list[Connection]) -> dict:
    first = min((c.segments[0].ts for c in conns if c.segments), default=None)
    last = max((c.segments[-1].ts for c in conns if c.segments), default=None)
    captured = nrt = retransmissions = 0
    for conn in conns:
        segs = conn.segments
        flags = retransmission_flags(segs, [conn.from_client(s) for s in segs])
        for seg, resent in zip(segs, flags):
            captured += seg.frame_len
            if resent:
                retransmissions += seg.payload_len > 0
            else:
                nrt += seg.frame_len
    interval_s = (last - first) if first is not None and last is not None else 0.0
    mbps = (lambda b: b * 8 / interval_s / 1e6) if interval_s > 0 else (lambda b: None)
    return {"connections": len(conns), "interval_s": interval_s, "captured_throughput_mbps": mbps(captured),
            "nrt_throughput_mbps": mbps(nrt), "retransmissions": retransmissions,
            "capture_duplicates": sum(len(conn.duplicates) for conn in conns)}
