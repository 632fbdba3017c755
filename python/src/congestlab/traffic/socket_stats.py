"""`ss` (iproute2) output: the listening ports of `ss -Hltn`/`-Hlun`, the connections of
`ss -tinH` with their counters, and the congestion control an info line of `ss -ti` names.
Read by the iperf runner (workloads/iperf.py: its servers listening, each iperf3 flow's
algorithm) and the servers' congestion-control check (runner/servers.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass


def listening_ports(out: str) -> set[int]:
    """`ss -Hltn` or `ss -Hlun` -> the local ports listened on (v4 "addr:port", v6 "[addr]:port",
    wildcard "*:port")."""
    return {int(m) for m in re.findall(r"[\]:*](\d+)\s", out)}


# the info line of `ss -ti`: "ts sack cubic wscale:7,7 rto:204 ..." (flags, then the algorithm)
_SS_ALGORITHM = re.compile(r"(?:^|\s)(?!ts\s|sack\s|ecn\s|ecnseen\s|fastopen\s)([a-z_][a-z0-9_]*)\s+(?:wscale|rto):")


def ss_algorithm(line: str) -> str | None:
    """The congestion control named on one info line of `ss -ti` (also without window
    scaling, where ss prints no wscale: "ts sack cubic rto:204 ...")."""
    match = _SS_ALGORITHM.search(line)
    return match.group(1) if match else None


@dataclass(frozen=True)
class SsConnection:
    """One connection of `ss -tinH`: its two endpoints ("addr:port", v6 as "[addr]:port"),
    the `name:integer` counters of its info line (bytes_acked, bytes_received, ...) and that
    line itself (ss_algorithm reads it)."""

    local: str
    peer: str
    counters: dict[str, int]
    info: str


def parse_ss_connections(out: str) -> list[SsConnection]:
    """`ss -tinH` (with or without a state filter) -> its connections, in order. A connection
    is an address line (the last two fields the endpoints) followed by its info line, which
    ss indents; a connection without one (TIME-WAIT) is left out."""
    conns: list[SsConnection] = []
    endpoints: tuple[str, str] | None = None
    for line in out.splitlines():
        fields = line.split()
        if not fields:
            continue
        if not line[:1].isspace():
            endpoints = (fields[-2], fields[-1]) if len(fields) >= 4 else None
            continue
        if endpoints is not None:
            counters = {k: int(v) for k, v in (f.split(":", 1) for f in fields if f.count(":") == 1)
                        if v.isdigit()}
            conns.append(SsConnection(endpoints[0], endpoints[1], counters, line))
            endpoints = None
    return conns


def parse_ss_algorithms(out: str, peer_addr: str) -> dict[int, tuple[int, str]]:
    """`ss -tinH state established` -> {remote port: (bytes_acked, algorithm)} of the busiest
    connection to `peer_addr` per remote port (iperf3 also opens a control connection)."""
    best: dict[int, tuple[int, str]] = {}
    peer = peer_addr if ":" not in peer_addr else f"[{peer_addr}]"
    for conn in parse_ss_connections(out):
        if not conn.peer.startswith(peer + ":"):
            continue
        port = int(conn.peer.rsplit(":", 1)[1])
        acked = conn.counters.get("bytes_acked", 0)
        algorithm = ss_algorithm(conn.info) or "?"
        if port not in best or acked >= best[port][0]:
            best[port] = (acked, algorithm)
    return best
