"""Group segments into TCP connections, oriented client -> server by the server's port."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from congestlab.analysis.packets import Segment


@dataclass
class Connection:
    family: str
    client: str
    client_port: int
    server: str
    server_port: int
    segments: list[Segment] = field(default_factory=list)
    # capture duplicates of its segments (packets.py): counted here, in no metric
    duplicates: list[Segment] = field(default_factory=list)

    def from_client(self, seg: Segment) -> bool:
        return seg.src == self.client and seg.sport == self.client_port

    @property
    def key(self) -> tuple[str, int]:
        return (self.family, self.client_port)


def group_connections(segments: Iterable[Segment], server_port: int) -> list[Connection]:
    """One Connection per (client, client port, server) 4-tuple, in order of first packet.
    A reused 4-tuple after a completed close starts a new connection at its SYN. A capture
    duplicate goes to the connection its original went to, in `duplicates`."""
    open_conns: dict[tuple, Connection] = {}
    done: list[Connection] = []
    for seg in segments:
        if seg.dport == server_port:
            key = (seg.family, seg.src, seg.sport, seg.dst)
        elif seg.sport == server_port:
            key = (seg.family, seg.dst, seg.dport, seg.src)
        else:
            continue
        conn = open_conns.get(key)
        if seg.capture_duplicate:
            if conn is not None:
                conn.duplicates.append(seg)
            continue
        fresh_syn = seg.syn and not seg.has_ack and seg.dport == server_port
        if conn is not None and fresh_syn and any(s.fin or s.rst for s in conn.segments):
            done.append(conn)
            conn = None
        if conn is None:
            conn = Connection(seg.family, key[1], key[2], key[3], server_port)
            open_conns[key] = conn
        conn.segments.append(seg)
    done.extend(open_conns.values())
    done.sort(key=lambda c: c.segments[0].ts)
    return done
