"""leanweb's own log (JSON lines) as ground truth for the pcap analysis.

The lean server logs every retransmission it makes. For its measured connections the
retransmissions the analysis infers from the capture must equal those the server logged:
a disagreement means the capture lost packets or the analysis miscounts.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path


def retransmissions_by_peer_port(log_path: Path) -> dict[int, int]:
    """Client port -> data segments the server retransmitted on that connection.

    Connections are keyed by the client's port (as metrics.csv does); a port reused by a
    later connection adds up, which the run's short, distinct connections do not do.
    """
    port_of_conn: dict[int, int] = {}
    resent: Counter[int] = Counter()
    with log_path.open() as log:
        for line in log:
            try:
                event = json.loads(line)
            except ValueError:
                continue  # a line cut short by the server's exit
            kind = event.get("event")
            if kind == "open":
                port_of_conn[event["conn"]] = int(str(event["peer"]).rsplit(":", 1)[1])
            elif kind == "retransmit" and event.get("len", 0) > 0 and event.get("conn") in port_of_conn:
                resent[port_of_conn[event["conn"]]] += 1
    return {port: resent.get(port, 0) for port in port_of_conn.values()}


def compare_with_pcap(rows: list[dict], logged: dict[int, int]) -> tuple[int, list[str]]:
    """(rows whose count agrees with the log, descriptions of the disagreements)."""
    agreeing = 0
    disagreements = []
    for row in rows:
        port = int(row["client_port"])
        where = f"{row.get('point_id', '')} {row['family']} #{row['repetition']}"
        if port not in logged:
            disagreements.append(f"{where}: port {port} not in the log")
            continue
        if int(row["retransmissions"]) == logged[port]:
            agreeing += 1
        else:
            disagreements.append(f"{where}: pcap "
                                 f"{row['retransmissions']} vs log {logged[port]} retransmissions")
    return agreeing, disagreements
