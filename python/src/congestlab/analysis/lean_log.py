"""leanweb's own log (JSON lines) as ground truth for the pcap analysis.

The lean server logs each segment once, when its frame is written to the TAP device (`tx`,
with `retransmission`). For its connections the retransmissions the analysis infers from
the capture must equal those the server logged: a disagreement means the capture lost
packets, the analysis miscounts, or the log does not say what went on the wire. An older
leanweb's retransmissions count too (rundir/upgrade.py logged_retransmission).

A connection can outlive its repetition's capture: a GET that times out leaves the server
retransmitting (backoff up to 60 s) into the next repetition's capture, on the same client
port. So the log's retransmissions are counted inside the capture's own time span, and a
connection that was already open when the capture started is not compared (its earlier
segments, which the capture never saw, make the capture's count meaningless): it is reported
as continued (docs/notes/rto-study.md, "the log/capture disagreement").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from congestlab.errors import LeanLogError
from congestlab.rundir.upgrade import logged_retransmission
from congestlab.servers.lean_events import family, numbered_events, peer_port

# A log connection is the capture's when it was open (from its opening to its last event, with
# this margin either side) at the capture's first packet of it.
SAME_CONNECTION_S = 1.0


@dataclass
class LoggedConnection:
    family: str  # v4 | v6, as the capture analysis names them
    client_port: int
    opened_ts: float  # epoch s
    retransmission_ts: list[float] = field(default_factory=list)  # epoch s of each data segment written again
    last_ts: float = 0.0  # epoch s of its last event

    @property
    def retransmissions(self) -> int:
        return len(self.retransmission_ts)

    def retransmissions_within(self, span_s: tuple[float, float] | None) -> int:
        if span_s is None:
            return self.retransmissions
        return sum(1 for ts in self.retransmission_ts if span_s[0] <= ts <= span_s[1])


def logged_connections(log_path: Path) -> list[LoggedConnection]:
    """Every connection of the log, with the data segments the server retransmitted on it;
    LeanLogError naming the line that is not an event or holds a wrong value (a last line cut
    short is passed over: leanweb may have been writing it)."""
    conns: dict[int, LoggedConnection] = {}
    try:
        for number, event in numbered_events(log_path, strict=True):
            try:
                _take(conns, event)
            except (KeyError, TypeError, ValueError, IndexError) as err:
                raise LeanLogError(f"{log_path}:{number}: {event.get('event')!r} event with a wrong value "
                                   f"({err!r})") from None
    except OSError as err:
        raise LeanLogError(f"{log_path}: {err.strerror}") from None
    return list(conns.values())


def _take(conns: dict[int, LoggedConnection], event: dict) -> None:
    kind = event["event"]
    if kind == "open":
        conns[event["conn"]] = LoggedConnection(family(event.get("family")), peer_port(event),
                                                event.get("unix_us", 0) / 1e6)
    elif event.get("conn") not in conns:
        return
    conn = conns[event["conn"]]
    ts = event.get("unix_us", 0) / 1e6
    conn.last_ts = max(conn.last_ts, ts)
    if logged_retransmission(event):
        conn.retransmission_ts.append(ts)


class LogIndex:
    """A log's connections by (family, client port), built once per log and shared by every
    repetition compared against it (analysis/run_analysis.py): a load of 10,000 connections per
    repetition (anma) made the scan of every logged connection for every captured one minutes of
    CPU, and rebuilding the index for each repetition a pass over the whole log each time."""

    def __init__(self, logged: list[LoggedConnection]):
        self.by_key: dict[tuple[str, int], list[LoggedConnection]] = {}
        for c in logged:  # in the log's order: the latest to open last
            self.by_key.setdefault((c.family, c.client_port), []).append(c)

    def on_port(self, key: tuple[str, int]) -> list[LoggedConnection]:
        return self.by_key.get(key, [])


@dataclass
class Comparison:
    agreeing: int = 0  # capture connections whose retransmissions equal the log's in the span
    continued: int = 0  # open before the capture started: not compared
    disagreements: list[str] = field(default_factory=list)
    not_in_log: list[str] = field(default_factory=list)  # capture connections the log does not hold


def compare_with_pcap(pcap_conns: list, logged: list[LoggedConnection] | LogIndex, where: str,
                      capture_span_s: tuple[float, float] | None = None) -> Comparison:
    """Each capture connection against the log connection on its port that was open at the
    capture's first packet of it. `pcap_conns` are analysis/trace.py's PcapConnection records;
    `logged` the log's connections or their LogIndex (built once for a log compared against
    several captures); `capture_span_s` (epoch s, the capture's start and stop) bounds the log's
    count (None: the whole log, for a capture that saw every connection from its start to its end)."""
    result = Comparison()
    index = logged if isinstance(logged, LogIndex) else LogIndex(logged)
    for conn in pcap_conns:
        match = [c for c in index.on_port(conn.key)
                 if c.opened_ts - SAME_CONNECTION_S <= conn.first_ts <= c.last_ts + SAME_CONNECTION_S]
        label = f"{where} {conn.family} port {conn.client_port}"
        if not match:
            result.disagreements.append(f"{label}: not in the leanweb log")
            result.not_in_log.append(f"{label}: not in the log")
            continue
        logged_conn = match[-1]  # the latest to open: a port reused after an earlier one closed
        if capture_span_s is not None and logged_conn.opened_ts < capture_span_s[0] - SAME_CONNECTION_S:
            result.continued += 1
            continue
        in_log = logged_conn.retransmissions_within(capture_span_s)
        if conn.retransmissions == in_log:
            result.agreeing += 1
        else:
            result.disagreements.append(f"{label}: pcap {conn.retransmissions} vs log {in_log} retransmissions")
    return result
