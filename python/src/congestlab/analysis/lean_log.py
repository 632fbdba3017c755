"""leanweb's own log (JSON lines) as ground truth for the pcap analysis.

The lean server logs each segment once, when its frame is written to the TAP device (`tx`,
with `retransmission`). For its connections the retransmissions the analysis infers from
the capture must equal those the server logged: a disagreement means the capture lost
packets, the analysis miscounts, or the log does not say what went on the wire. Logs of
an older leanweb have `retransmit` events instead (logged when a segment was made).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

# A log connection is the capture's when it opened within this of the capture's first packet.
SAME_CONNECTION_S = 1.0


@dataclass
class LoggedConnection:
    family: str  # v4 | v6, as the capture analysis names them
    client_port: int
    opened_ts: float  # epoch s
    retransmissions: int = 0  # data segments (payload > 0) written again


def logged_connections(log_path: Path) -> list[LoggedConnection]:
    """Every connection of the log, with the data segments the server retransmitted on it."""
    conns: dict[int, LoggedConnection] = {}
    with log_path.open() as log:
        for line in log:
            try:
                event = json.loads(line)
            except ValueError:
                continue  # a line cut short by the server's exit
            kind = event.get("event")
            if kind == "open":
                family = {"ipv4": "v4", "ipv6": "v6"}.get(event.get("family"), event.get("family"))
                conns[event["conn"]] = LoggedConnection(family, int(str(event["peer"]).rsplit(":", 1)[1]),
                                                        event.get("unix_us", 0) / 1e6)
            elif event.get("conn") not in conns:
                continue
            elif kind == "tx" and event.get("retransmission") and event.get("len", 0) > 0:
                conns[event["conn"]].retransmissions += 1
            elif kind == "retransmit" and event.get("len", 0) > 0:
                conns[event["conn"]].retransmissions += 1
    return list(conns.values())


def compare_with_pcap(pcap_conns: list, logged: list[LoggedConnection], where: str) -> tuple[int, list[str]]:
    """(capture connections whose retransmission count agrees with the log, descriptions of
    the disagreements). `pcap_conns` are analysis/trace.py's PcapConnection records."""
    agreeing = 0
    disagreements = []
    for conn in pcap_conns:
        match = [c for c in logged if (c.family, c.client_port) == conn.key
                 and abs(c.opened_ts - conn.first_ts) <= SAME_CONNECTION_S]
        label = f"{where} {conn.family} port {conn.client_port}"
        if not match:
            disagreements.append(f"{label}: not in the leanweb log")
        elif conn.retransmissions == match[0].retransmissions:
            agreeing += 1
        else:
            disagreements.append(f"{label}: pcap {conn.retransmissions} vs log {match[0].retransmissions} "
                                 "retransmissions")
    return agreeing, disagreements
