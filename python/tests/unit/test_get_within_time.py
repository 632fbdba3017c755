"""The GET workload's part of the run design (workloads/get.py, workloads/closed.py): the
families' order drawn per repetition from the seed, and the closed-before-next check read
from a kernel server's socket table or a lean server's event log (no root: fakes for both)."""

from __future__ import annotations

import json
import subprocess
from types import SimpleNamespace

from congestlab.spec import load_preset
from congestlab.workloads.closed import ServerConnection, log_offset, wait_closed
from congestlab.workloads.get import GetRunner


def _runner(order: str, point_id: str = "main.server-apache.level-C0") -> GetRunner:
    study = load_preset("ipv6").model_copy(update={"order": order})
    ctx = SimpleNamespace(study=study, point_id=point_id)
    return GetRunner(study.workload("get"), ctx, None)


def test_family_order_is_drawn_per_repetition_and_reproducible():
    runner = _runner("interleaved")
    (req,) = runner.spec.requests
    orders = [tuple(runner.families(req, 0, rep)) for rep in range(1, 41)]
    assert orders == [tuple(_runner("interleaved").families(req, 0, rep)) for rep in range(1, 41)]
    assert set(orders) == {("v4", "v6"), ("v6", "v4")}
    assert 10 <= orders.count(("v4", "v6")) <= 30
    # another point draws its own orders
    other = [tuple(_runner("interleaved", "main.server-lean.level-C0").families(req, 0, rep)) for rep in range(1, 41)]
    assert other != orders


def test_sequential_keeps_the_declared_family_order():
    runner = _runner("sequential")
    (req,) = runner.spec.requests
    assert {tuple(runner.families(req, 0, rep)) for rep in range(1, 21)} == {("v4", "v6")}


class _FakeTestbed:
    """`ss` in a server's namespace: the socket's state goes through the given sequence."""

    def __init__(self, states: list[str]):
        self.states = states
        self.calls: list[list[str]] = []

    def run(self, node, argv, check=False, timeout_s=5):
        self.calls.append(argv)
        state = self.states[min(len(self.calls) - 1, len(self.states) - 1)]
        line = f"{state} 0 0 10.0.4.10:80 10.0.0.10:40000\n" if state else ""
        return subprocess.CompletedProcess(argv, 0, line, "")


def test_a_kernel_server_connection_is_closed_once_its_socket_has_nothing_left_to_send():
    conn = ServerConnection("apache", "server", 80, "10.0.0.10", 40000)
    tb = _FakeTestbed(["ESTAB", "LAST-ACK", ""])
    closed, waited_ms = wait_closed(tb, conn)
    assert closed and len(tb.calls) == 3 and waited_ms >= 0
    assert "dport = :40000" in tb.calls[0][-1] and "sport = :80" in tb.calls[0][-1]
    assert wait_closed(_FakeTestbed(["TIME-WAIT"]), conn)[0]
    closed, waited_ms = wait_closed(_FakeTestbed(["ESTAB"]), conn, max_s=0.1)
    assert not closed and waited_ms >= 100


def test_a_lean_server_connection_is_closed_at_its_close_event_for_that_peer(tmp_path):
    log = tmp_path / "leanweb.jsonl"
    old = {"event": "close", "peer": "[fd00::a]:40000", "conn": 1}  # before the GET: not this one
    log.write_text(json.dumps(old) + "\n")
    conn = ServerConnection("lean", "bare", 80, "fd00:0:0:0::a", 40000, log, log_offset(log))
    assert not wait_closed(None, conn, max_s=0.05)[0]
    with log.open("a") as f:
        f.write(json.dumps({"event": "close", "peer": "[fd00::a]:40001", "conn": 2}) + "\n")
        f.write('{"event":"rtt_sample","conn":3}\n{"event":"clo')  # another peer; a line half written
    assert not wait_closed(None, conn, max_s=0.05)[0]
    with log.open("a") as f:
        f.write('se"}\n' + json.dumps({"event": "close", "peer": "[fd00::a]:40000", "conn": 3}) + "\n")
    assert wait_closed(None, conn, max_s=0.05)[0]
    v4 = ServerConnection("lean", "bare", 80, "10.0.0.10", 40000, log, 0)
    with log.open("a") as f:
        f.write(json.dumps({"event": "close", "peer": "10.0.0.10:40000", "conn": 4}) + "\n")
    assert wait_closed(None, v4, max_s=0.05)[0]


def test_a_quic_connection_drains_three_ptos_after_a_complete_get():
    """No socket to look at: the client's CONNECTION_CLOSE went out as it exited; the server
    drains 3 PTO from a first RTT sample (RFC 9002 §6.2.1: 3 x sample + 25 ms)."""
    import time
    from congestlab.workloads.closed import quic_drain_s
    assert abs(quic_drain_s(0.020) - 3 * 0.085) < 1e-9
    conn = ServerConnection("q", "server", 4433, "10.0.0.10", 40000, quic_rtt_s=0.002,
                            quic_ended_s=time.monotonic())
    closed, waited_ms = wait_closed(None, conn)  # no testbed: nothing is asked of the server
    assert closed and quic_drain_s(0.002) * 1e3 - 20 <= waited_ms <= quic_drain_s(0.002) * 1e3 + 50


def test_a_failed_quic_get_waits_the_longest_and_counts_as_not_closed():
    import time
    conn = ServerConnection("q", "server", 4433, "10.0.0.10", 40000, quic_rtt_s=None, quic_ended_s=time.monotonic())
    closed, waited_ms = wait_closed(None, conn, max_s=0.1)
    assert not closed and 80 <= waited_ms <= 200
