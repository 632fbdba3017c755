"""Analysis on pcaps the tests build with known answers, cross-checked with tshark."""

from __future__ import annotations

import json
import shutil
import subprocess
from types import SimpleNamespace

import pytest
from pcap_builder import transfer_with_loss_and_reordering

from congestlab.analysis import server_views
from congestlab.analysis.connections import group_connections
from congestlab.analysis.lean_log import LogIndex, compare_with_pcap, logged_connections
from congestlab.analysis.metrics import ByteRanges, measure_connection
from congestlab.analysis.packets import ReadStats, read_segments
from congestlab.errors import TraceError


def _measure(path):
    conns = group_connections(read_segments(path), server_port=80)
    assert len(conns) == 1
    return measure_connection(conns[0])


@pytest.mark.parametrize("family", ["v4", "v6"])
@pytest.mark.parametrize("snaplen", [None, 128])
def test_metrics_match_hand_computed_answers(tmp_path, family, snaplen, within):
    conv, want = transfer_with_loss_and_reordering(family)
    m = _measure(conv.write(tmp_path / "t.pcap", snaplen=snaplen))
    within("delay_ms", m.delay_ms, want["delay_ms"], 0.002)
    assert m.bytes_captured == want["bytes_captured"]
    assert m.bytes_nrt == want["bytes_nrt"]
    assert m.payload_bytes == want["payload_bytes"]
    assert m.retransmissions == want["retransmissions"]
    within("goodput", m.goodput_mbps, want["goodput_mbps"], 1e-3)
    within("nrt throughput", m.nrt_throughput_mbps, want["bytes_nrt"] * 8 / want["delay_ms"] / 1e3, 1e-3)
    assert len(m.rtt_samples_ms) == want["rtt_samples"]
    within("first rtt", m.rtt_samples_ms[0], want["first_rtt_ms"], 0.002)


def test_reordered_segment_is_not_a_retransmission():
    ranges = ByteRanges()
    assert ranges.add(0, 100) is False
    assert ranges.add(200, 300) is False
    assert ranges.add(100, 200) is False  # below the highest seen, but new bytes
    assert ranges.add(150, 250) is True
    assert ranges.ranges == [[0, 300]]


def _tshark(path, fields):
    argv = ["tshark", "-r", str(path), "-T", "fields", *sum((["-e", f] for f in fields), [])]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    return [line.split("\t") for line in out.splitlines()]


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is installed by `make test`")
@pytest.mark.parametrize("family", ["v4", "v6"])
def test_agrees_with_tshark(tmp_path, family, within):
    conv, want = transfer_with_loss_and_reordering(family)
    path = conv.write(tmp_path / "t.pcap")
    m = _measure(path)
    rows = _tshark(path, ["frame.time_epoch", "frame.len", "tcp.analysis.retransmission",
                          "tcp.analysis.out_of_order", "tcp.len", "tcp.srcport"])
    retrans = sum(1 for r in rows if r[2])
    out_of_order = sum(1 for r in rows if r[3])
    assert retrans == m.retransmissions == 1
    assert out_of_order == 1  # tshark sees the reordering we deliberately do not count
    get_ts = min(float(r[0]) for r in rows if r[5] != "80" and int(r[4] or 0) > 0)
    end_ts = get_ts + m.delay_ms / 1e3
    in_window = [r for r in rows if get_ts - 1e-7 <= float(r[0]) <= end_ts + 1e-7]
    assert sum(int(r[1]) for r in in_window) == m.bytes_captured
    assert sum(int(r[1]) for r in in_window if not r[2]) == m.bytes_nrt
    payload = sum(int(r[4]) for r in rows if r[5] == "80" and not r[2])
    assert payload == m.payload_bytes


def test_connection_without_request_is_a_trace_error(tmp_path):
    conv, _ = transfer_with_loss_and_reordering("v4")
    conv.frames = conv.frames[:3]  # handshake only
    with pytest.raises(TraceError, match="no request"):
        _measure(conv.write(tmp_path / "t.pcap"))


def test_garbage_frames_are_counted_not_fatal(tmp_path):
    conv, want = transfer_with_loss_and_reordering("v4")
    conv.frames[5].data = conv.frames[5].data[:20]  # cut inside the IP header
    path = conv.write(tmp_path / "t.pcap")
    stats = ReadStats()
    segs = list(read_segments(path, stats))
    assert stats.frames == len(conv.frames)
    assert len(segs) == len(conv.frames) - 1 and sum(stats.skipped.values()) == 1


def test_not_a_pcap_is_a_trace_error(tmp_path):
    bad = tmp_path / "x.pcap"
    bad.write_bytes(b"definitely not a capture file")
    with pytest.raises(TraceError, match="not a pcap"):
        list(read_segments(bad))


def test_lean_log_retransmissions_match_the_capture_per_connection(tmp_path):
    events = [
        {"event": "start", "cc": "none"},
        {"conn": 1, "event": "open", "peer": "10.0.0.10:40000", "family": "ipv4", "unix_us": 100_000_000},
        {"conn": 2, "event": "open", "peer": "[fd00::a]:40001", "family": "ipv6", "unix_us": 100_500_000},
        {"conn": 2, "event": "tx", "len": 1440, "seq": 1, "retransmission": False},
        {"conn": 2, "event": "tx", "len": 1440, "seq": 1, "retransmission": True},
        {"conn": 2, "event": "tx_dropped", "len": 1440, "seq": 1441, "retransmission": True},  # never left
        {"conn": 2, "event": "tx", "len": 0, "seq": 2881, "fin": True, "retransmission": True},  # a FIN, not data
        {"conn": 2, "event": "retransmit", "len": 1440, "seq": 1441},  # an older leanweb's event
        {"conn": 9, "event": "tx", "len": 1440, "seq": 7, "retransmission": True},  # no open event: ignored
    ]
    log = tmp_path / "leanweb.jsonl"
    log.write_text("\n".join(json.dumps(e) for e in events) + "\n{\"cut short")
    logged = logged_connections(log)
    assert [(c.family, c.client_port, c.opened_ts, c.retransmissions) for c in logged] == [
        ("v4", 40000, 100.0, 0), ("v6", 40001, 100.5, 2)]
    conns = [SimpleNamespace(key=("v4", 40000), family="v4", client_port=40000, first_ts=100.001, retransmissions=0),
             SimpleNamespace(key=("v6", 40001), family="v6", client_port=40001, first_ts=100.5, retransmissions=3),
             SimpleNamespace(key=("v6", 40001), family="v6", client_port=40001, first_ts=160.0, retransmissions=0)]
    compared = compare_with_pcap(conns, logged, "C1B #1")
    assert compared.agreeing == 1 and compared.continued == 0
    assert compared.disagreements == ["C1B #1 v6 port 40001: pcap 3 vs log 2 retransmissions",
                                      "C1B #1 v6 port 40001: not in the leanweb log"]


def test_lean_log_counts_inside_the_capture_and_skips_a_connection_from_an_earlier_one(tmp_path):
    """A GET that timed out leaves the server retransmitting into the next repetition's capture
    on the same client port (rto quick, docs/notes/rto-study.md): capture 1 saw 2 of the
    connection's 3 retransmissions, capture 2 the third; curl's next GET reuses the port later."""
    def tx(conn, s, retransmission=True):
        return {"conn": conn, "event": "tx", "len": 1440, "retransmission": retransmission, "unix_us": int(s * 1e6)}

    events = [{"conn": 1, "event": "open", "peer": "10.0.0.10:33908", "family": "ipv4", "unix_us": 100_000_000},
              tx(1, 100.1, False), tx(1, 101.1), tx(1, 103.1), tx(1, 125.0),
              {"conn": 1, "event": "reset_received", "unix_us": 125_100_000},
              {"conn": 2, "event": "open", "peer": "10.0.0.10:40000", "family": "ipv4", "unix_us": 121_000_000},
              tx(2, 121.1, False), tx(2, 122.1),
              {"conn": 3, "event": "open", "peer": "10.0.0.10:33908", "family": "ipv4", "unix_us": 200_000_000},
              tx(3, 200.1, False), tx(3, 201.1)]
    log = tmp_path / "leanweb.jsonl"
    log.write_text("\n".join(json.dumps(e) for e in events))
    logged = logged_connections(log)
    assert [(c.client_port, c.retransmissions, c.last_ts) for c in logged] == [
        (33908, 3, 125.1), (40000, 1, 122.1), (33908, 1, 201.1)]

    def seen(port, first_ts, retransmissions):
        return SimpleNamespace(key=("v4", port), family="v4", client_port=port, first_ts=first_ts,
                               retransmissions=retransmissions)

    first = compare_with_pcap([seen(33908, 100.0, 2)], logged, "r1", (99.5, 120.2))
    assert (first.agreeing, first.continued, first.disagreements) == (1, 0, [])
    assert compare_with_pcap([seen(33908, 100.0, 2)], logged, "r1").disagreements == [
        "r1 v4 port 33908: pcap 2 vs log 3 retransmissions"]  # without the span: the whole log
    second = compare_with_pcap([seen(33908, 125.0, 0), seen(40000, 121.0, 1)], logged, "r2", (120.5, 140.2))
    assert (second.agreeing, second.continued, second.disagreements) == (1, 1, [])
    third = compare_with_pcap([seen(33908, 200.0, 1)], logged, "r3", (199.0, 220.0))  # the port reused
    assert (third.agreeing, third.continued, third.disagreements) == (1, 0, [])
    lost = compare_with_pcap([seen(33908, 200.0, 0)], logged, "r3", (199.0, 220.0))
    assert lost.disagreements == ["r3 v4 port 33908: pcap 0 vs log 1 retransmissions"]

    # the same comparisons against one index of the log, built once for every capture
    index = LogIndex(logged)
    for conns, where, span, expected in [([seen(33908, 100.0, 2)], "r1", (99.5, 120.2), first),
                                         ([seen(33908, 125.0, 0), seen(40000, 121.0, 1)], "r2", (120.5, 140.2), second),
                                         ([seen(33908, 200.0, 1)], "r3", (199.0, 220.0), third),
                                         ([seen(33908, 200.0, 0)], "r3", (199.0, 220.0), lost)]:
        assert compare_with_pcap(conns, index, where, span) == expected


def test_lean_log_checks_index_each_log_once_for_all_its_repetitions(tmp_path, monkeypatch):
    built = []

    class CountedIndex(LogIndex):
        def __init__(self, logged):
            built.append(len(logged))
            super().__init__(logged)

    monkeypatch.setattr(server_views, "LogIndex", CountedIndex)
    logs = {}
    for server, port in (("lean", 40000), ("leanmodern", 41000)):
        logs[server] = tmp_path / f"{server}.jsonl"
        logs[server].write_text("\n".join(json.dumps(
            {"conn": rep, "event": "open", "peer": f"10.0.0.10:{port + rep}", "family": "ipv4",
             "unix_us": (100 + 10 * rep) * 1_000_000}) for rep in range(1, 4)))

    def seen(port, first_ts):
        return SimpleNamespace(key=("v4", port), family="v4", client_port=port, first_ts=first_ts, retransmissions=0)

    by_server = {server: [(f"p #{rep}", [seen(40000 + offset + rep, 100.0 + 10 * rep)], logs[server],
                           (99.0 + 10 * rep, 109.0 + 10 * rep)) for rep in range(1, 4)]
                 for server, offset in (("lean", 0), ("leanmodern", 1000))}
    checks, log_problems = server_views.lean_log_checks(by_server)
    assert [(c.name, c.ok, c.value) for c in checks] == [("retransmissions_pcap_vs_log_lean", True, "3/3"),
                                                        ("retransmissions_pcap_vs_log_leanmodern", True, "3/3")]
    assert log_problems == []
    assert built == [3, 3]  # one index per log, not one per repetition
