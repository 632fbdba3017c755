"""Whether a measured GET's connection has closed at its server, so the next GET never shares
the path with its tail (e.g. the bare server retransmitting after curl gave up: a timed-out
GET's client resets, and the reset may be lost under congestion).

A kernel server: its socket for the client's port in the server's namespace (`ss`), closed
when it is gone or in a state with nothing left to send (TIME-WAIT, FIN-WAIT-2). A user-stack
server (leanweb): the `close` line of its event log for that peer (the log is flushed every
200 ms: crates/leanweb/src/main.rs), read from where the log stood when the GET started.

A QUIC connection has no socket of its own to look at (one UDP socket serves them all) and
ngtcp2's qlog has no close event: a client that got the whole response closed it as it exited
(CONNECTION_CLOSE), and its server, draining, sends nothing for three PTOs (RFC 9000 §10.2.2);
the GET waits that long from its end, the PTO taken from its handshake's round trip as RFC
9002 §6.2.1 computes it from a first sample (3 x sample + max_ack_delay 25 ms). After a GET
that failed nothing tells when its server stops sending: it waits the longest wait and counts
as not closed.
"""

from __future__ import annotations

import ipaddress
import time
from dataclasses import dataclass
from pathlib import Path

from congestlab.servers.lean_events import peer, read_events

# ss's names of the states in which the server sends nothing more
QUIET_STATES = {"TIME-WAIT", "FIN-WAIT-2", "CLOSED"}
# the longest a GET waits for the previous one's connection to close (then it starts anyway
# and its row says the previous one had not closed)
CLOSE_WAIT_MAX_S = 10.0
POLL_S = 0.02


@dataclass
class ServerConnection:
    """One measured GET's connection as its server sees it."""

    server: str
    node: str
    port: int
    client_addr: str
    client_port: int
    log_path: Path | None = None  # a user-stack server's event log
    log_offset: int = 0  # where that log stood when the GET started
    # QUIC: the GET's handshake round trip (None when it failed) and when the GET ended (monotonic)
    quic_rtt_s: float | None = None
    quic_ended_s: float | None = None

    @property
    def quic(self) -> bool:
        return self.quic_ended_s is not None


MAX_ACK_DELAY_S = 0.025  # RFC 9000 §18.2's default


def quic_drain_s(rtt_s: float) -> float:
    """Three PTOs after a first RTT sample (RFC 9002 §6.2.1, §5.3: rttvar = sample / 2)."""
    return 3 * (3 * rtt_s + MAX_ACK_DELAY_S)


def log_offset(log_path: Path | None) -> int:
    try:
        return log_path.stat().st_size if log_path else 0
    except OSError:
        return 0


def wait_closed(tb, conn: ServerConnection, max_s: float = CLOSE_WAIT_MAX_S) -> tuple[bool, float]:
    """Poll until the connection has closed at its server, at most `max_s`.
    Returns (closed, waited in ms)."""
    start = time.monotonic()
    if conn.quic:
        until = conn.quic_ended_s + (quic_drain_s(conn.quic_rtt_s) if conn.quic_rtt_s is not None else max_s)
        time.sleep(max(0.0, min(until, start + max_s) - start))
        return conn.quic_rtt_s is not None, round((time.monotonic() - start) * 1e3, 1)
    while True:
        closed = _lean_closed(conn) if conn.log_path is not None else _kernel_closed(tb, conn)
        waited_ms = (time.monotonic() - start) * 1e3
        if closed or waited_ms >= max_s * 1e3:
            return closed, round(waited_ms, 1)
        time.sleep(POLL_S)


def _kernel_closed(tb, conn: ServerConnection) -> bool:
    proc = tb.run(conn.node, ["ss", "-Htan", "state", "all", f"( sport = :{conn.port} and dport = :{conn.client_port} )"],
                  check=False, timeout_s=5)
    if proc.returncode != 0:
        return False
    states = [line.split()[0] for line in proc.stdout.splitlines() if line.strip()]
    return all(state in QUIET_STATES for state in states)


def _lean_closed(conn: ServerConnection) -> bool:
    want = (ipaddress.ip_address(conn.client_addr), conn.client_port)
    try:
        return any(peer(event.get("peer", "")) == want
                   for event in read_events(conn.log_path, offset_bytes=conn.log_offset, kinds=("close",)))
    except OSError:
        return False
