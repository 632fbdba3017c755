"""measure_pcap: the Rust analyzer (crates/traceanalyze) against the dpkt reference and tshark.

Both backends must agree on every capture here: counts exactly, times within 1 µs. Both must
agree with tshark: delay within 1 ms, and our retransmissions equal to the segments tshark
marks retransmission, fast_retransmission or spurious_retransmission.
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import tempfile

import pytest
from pcap_builder import PSH, Conversation, transfer_with_fast_and_spurious_retransmissions, write_frames
from trace_checks import (NEEDS_ANALYZER, TIME_S, assert_agrees_with_tshark, assert_same_measurement, both_backends,
                          busy_run, same_rate, truthy, tshark_streams, write_suite)

from congestlab.analysis.connections import Connection
from congestlab.analysis.metrics import measure_connection
from congestlab.analysis.packets import ACK, FIN, SYN, Segment
from congestlab.analysis.port import port_aggregate
from congestlab.analysis.request_rows import metric_columns as run_metrics
from congestlab.analysis.run_analysis import analyze_run
from congestlab.analysis.trace import PcapConnection, measure_pcap
from congestlab.analysis.trace_files import read_series, read_trace, write_trace
from congestlab.errors import TraceError
from congestlab.paths import rust_binary

pytestmark = NEEDS_ANALYZER
needs_tshark = pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is installed by `make test`")


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    return write_suite(tmp_path_factory.mktemp("suite"))


def test_backends_agree_on_every_capture(suite, tmp_path):
    assert len(suite) == 10
    for name, pcap in suite.items():
        rust, ref = both_backends(pcap)
        assert rust.backend == "rust" and ref.backend == "dpkt"
        assert rust.connections, name
        assert_same_measurement(rust, ref)


def test_hand_computed_answers_for_fast_and_spurious_retransmissions(tmp_path, within):
    for family in ("v4", "v6"):
        conv, want = transfer_with_fast_and_spurious_retransmissions(family)
        m = measure_pcap(conv.write(tmp_path / "f.pcap", snaplen=128), 80)
        (c,) = m.connections
        within("delay_ms", c.metrics.delay_ms, want["delay_ms"], 0.002)
        assert c.metrics.retransmissions == want["retransmissions"]
        assert c.metrics.payload_bytes == want["payload_bytes"]
        assert len(c.metrics.rtt_samples_ms) == want["rtt_samples"]


def test_busy_capture_connections_errors_and_skips(suite):
    m = measure_pcap(suite["busy-v4"], 80)
    keys = [(c.key, c.error is None) for c in m.connections]
    assert keys == [(("v4", 40000), True), (("v4", 40010), True), (("v4", 40020), False), (("v4", 40000), True)]
    assert m.connections[2].error == "connection v4 port 40020: no request from the client"
    assert m.read_stats.frames == m.read_stats.tcp_segments + 3  # ARP, UDP, a frame cut in its IP header
    assert m.port.connections == 4 and m.port.segments == m.read_stats.tcp_segments - 1  # one SYN to :5201
    assert sum(c.retransmissions for c in m.connections) == m.port.retransmissions == 4


@needs_tshark
def test_agrees_with_tshark_on_delay_and_retransmissions(suite):
    checked = sum(assert_agrees_with_tshark(name, pcap, measure_pcap(pcap, 80)) for name, pcap in suite.items())
    assert checked == 18  # every connection with a request, in every capture


@needs_tshark
def test_tshark_out_of_order_is_our_reordering(suite):
    """The reordered segment (new bytes below the highest sequence) is what tshark calls
    out_of_order; it is not a retransmission for either."""
    rows = [r for rs in tshark_streams(suite["loss-v4"]).values() for r in rs]
    assert sum(1 for r in rows if truthy(r[11])) == 1
    assert measure_pcap(suite["loss-v4"], 80).connections[0].retransmissions == 1


def test_truncated_capture_is_measured_up_to_the_cut(suite, tmp_path, caplog):
    full = suite["busy-v4"].read_bytes()
    last_record = 16 + 66  # header + a 66-byte frame: the final ACK of the reused connection
    for cut_name, cut in (("inside data", len(full) - 30), ("inside a record header", len(full) - 74),
                          ("after the first records", 24 + 3 * 90)):
        path = tmp_path / "cut.pcap"
        path.write_bytes(full[:cut])
        rust, ref = both_backends(path)
        assert rust.read_stats.truncated and ref.read_stats.truncated, cut_name
        assert_same_measurement(rust, ref)
        assert "measured up to the cut" in caplog.text
    whole = measure_pcap(suite["busy-v4"], 80)
    path.write_bytes(full[: len(full) - last_record + 5])
    cut = measure_pcap(path, 80)
    assert cut.read_stats.frames < whole.read_stats.frames


def test_not_a_pcap_and_missing_file_are_trace_errors(tmp_path):
    bad = tmp_path / "x.pcap"
    bad.write_bytes(b"definitely not a capture file")
    for backend in ("rust", "dpkt"):
        with pytest.raises(TraceError, match="not a pcap"):
            measure_pcap(bad, 80, backend=backend)
        with pytest.raises(TraceError, match="No such file"):
            measure_pcap(tmp_path / "missing.pcap", 80, backend=backend)


def test_series_and_samples_files_agree(suite, tmp_path):
    for name in ("busy-v4", "busy-pcapng"):
        out = {}
        for backend in ("rust", "dpkt"):
            d = tmp_path / f"{name}-{backend}"
            out[backend] = measure_pcap(suite[name], 80, backend=backend, samples_dir=d, series_bin_ms=100)
            assert out[backend].series_path.parent == d and out[backend].rtt_samples_path.exists()
        # the analyzer writes a bin when it is complete, so connections interleave
        rows = {b: sorted(read_series(m.series_path), key=lambda r: (r["conn"], r["bin_start_s"]))
                for b, m in out.items()}
        assert len(rows["rust"]) == len(rows["dpkt"]) > 4
        for r, p in zip(rows["rust"], rows["dpkt"]):
            for k, v in r.items():
                assert p[k] == pytest.approx(v, rel=1e-9, abs=1e-9), (name, k)
        # the bins add up to the connection's bytes; in flight ends at zero after the FIN's ACK
        m = out["rust"]
        summary = json.loads(subprocess.run([str(rust_binary("traceanalyze")), str(suite[name]), "--server-port", "80"],
                                            capture_output=True, text=True, check=True).stdout.splitlines()[1])
        first = [r for r in rows["rust"] if r["conn"] == 0]
        assert sum(r["server_bytes"] for r in first) == summary["bytes_from_server"]
        assert first[-1]["in_flight_end_bytes"] == 0
        assert max(r["in_flight_max_bytes"] for r in first) > 0
        assert m.rtt_samples_path.read_text().splitlines()[0] == "conn,ack_ts_ns,rtt_ns"


def test_port_aggregate_over_a_window(suite, tmp_path):
    # the end of the first transfer (its resend at 0.25 s), the fast/spurious one, the idle one
    window = (1_700_000_000.19, 1_700_000_000.35)
    rust, ref = both_backends(suite["busy-v6"], window_s=window)
    assert_same_measurement(rust, ref)
    assert rust.port.connections == 3 and abs(rust.port.interval_s - 0.16) <= TIME_S
    assert rust.port.retransmissions == 3


def test_analyze_run_rows_are_unchanged(suite, tmp_path):
    """analyze_run through measure_pcap gives the rows the dpkt path gave (request rows from
    measure_connection, the port row from analysis/port.py)."""
    run, manifest, reqs, conns = busy_run(tmp_path, suite["busy-v4"])
    rep_dir = run / "points" / "p1" / "r1"
    result = analyze_run(run, manifest)
    assert result.summary["analysis_s"] >= 0
    # each GET's connection has its segment trace once, whatever its outcome (40020 has no
    # request; the three rows of port 40000 find its one connection)
    # under results/, not in the repetition (a resumed run keeps finished repetitions as they are)
    assert not (rep_dir / "series").exists()
    series_dir = run / "results" / "series" / "p1" / "r1"
    series = sorted(p.name for p in series_dir.iterdir())
    assert series == ["lean-v4-40000.csv", "lean-v4-40010.csv", "lean-v4-40020.csv"], series
    for name in series:
        rows = read_trace(series_dir / name)
        assert rows and len({r["conn"] for r in rows}) == 1
    assert result.summary["pcap_read"]["p1/r1/lean"]["frames"] == 90
    assert result.summary["problems"] == [
        "p1 #1 lean v4: invalid: connection v4 port 40020: no request from the client",
        "p1 #1 lean v4: timed_out: Operation timed out after 250 milliseconds"]
    assert result.summary["request_outcomes"] == {"complete": 3, "timed_out": 1, "invalid": 1}
    assert [r["outcome"] for r in result.rows["request"]] == ["complete"] * 3 + ["invalid", "timed_out"]
    measured = [row for row in result.rows["request"] if row.get("delay_ms") is not None]
    assert [r["client_port"] for r in measured] == [40000, 40010, 40000]
    for row, req in zip(measured, reqs):
        conn = next(c for c in conns if c.key == ("v4", req["client_port"])
                    and req["start_ts"] - 1 <= c.segments[0].ts <= req["end_ts"])
        want = run_metrics(measure_connection(conn))
        for key, value in want.items():
            if isinstance(value, float):
                assert abs(row[key] - value) <= 0.0011, key  # both rounded to 3 decimals
            else:
                assert row[key] == value, key
    (port_row,) = result.rows["port"]
    want = port_aggregate(conns)
    assert (port_row["connections"], port_row["retransmissions"]) == (want["connections"], want["retransmissions"])
    assert abs(port_row["interval_s"] - want["interval_s"]) <= TIME_S
    for key in ("captured_throughput_mbps", "nrt_throughput_mbps"):
        same_rate(key, port_row[key], want[key], want["interval_s"])


def test_rtt_samples_continue_past_4_gib():
    """ACKs are unwrapped like the data: a connection carrying more than 4 GiB keeps its RTT
    samples (the ACK offset used to be taken modulo 2^32)."""
    gib = 1 << 30
    c_addr, s_addr = "10.0.0.10", "10.0.4.10"

    def seg(ts, from_client, seq, ack, flags, payload):
        src, dst, sp, dp = (c_addr, s_addr, 40000, 80) if from_client else (s_addr, c_addr, 80, 40000)
        return Segment(ts, "v4", src, dst, sp, dp, seq % (1 << 32), ack % (1 << 32), flags, payload, 66 + payload)

    segs = [seg(0.0, True, 0, 0, SYN, 0), seg(0.001, False, 500, 1, SYN | ACK, 0), seg(0.002, True, 1, 501, ACK, 0),
            seg(0.003, True, 1, 501, ACK, 100)]
    for i in range(6):
        segs.append(seg(0.01 * (i + 1), False, 501 + i * gib, 101, ACK, gib))
        segs.append(seg(0.01 * (i + 1) + 0.002, True, 101, 501 + (i + 1) * gib, ACK, 0))
    segs.append(seg(0.2, True, 101, 501 + 6 * gib, FIN | ACK, 0))
    conn = Connection("v4", c_addr, 40000, s_addr, 80, segs)
    m = measure_connection(conn)
    assert len(m.rtt_samples_ms) == 6 and all(abs(r - 2.0) < 1e-6 for r in m.rtt_samples_ms)
    assert m.retransmissions == 0 and m.payload_bytes == 6 * gib


def _traced_conversation(client_port: int, isn: int, t0: float):
    """Handshake with window scale 7 (client) and 9 (server), a GET, three 1000-byte segments
    (the second lost), a duplicate ACK with the SACK block of the third, the resend, the ACK."""
    conv = Conversation("v4", client_port=client_port, client_isn=isn, server_isn=4_294_967_000)

    def wscale(shift: int) -> bytes:
        return b"\x01\x03\x03" + bytes([shift])  # NOP, window scale

    conv.segment(t0, True, 0, 0, SYN, 0, win=64240, opts=wscale(7))
    conv.segment(t0 + 0.001, False, 0, 1, SYN | ACK, 0, win=65160, opts=wscale(9))
    conv.segment(t0 + 0.002, True, 1, 1, ACK | PSH, 100, win=502, opts=b"")
    for i in range(3):
        conv.segment(t0 + 0.003, False, 1 + 1000 * i, 101, ACK, 1000, win=128, opts=b"")
    sack = b"\x01\x01\x05\x0a" + struct.pack(">II", (4_294_967_000 + 2001) % 2**32, (4_294_967_000 + 3001) % 2**32)
    conv.segment(t0 + 0.004, True, 101, 1001, ACK, 0, win=500, opts=sack)
    conv.segment(t0 + 0.010, False, 1001, 101, ACK, 1000, win=128, opts=b"", retransmission=True)
    conv.segment(t0 + 0.011, True, 101, 3001, ACK, 0, win=501, opts=b"")
    return conv


def test_segment_trace_of_the_measured_port_only(tmp_path):
    """The trace of client port 40000 only (40001 shares the server port): the rows of the
    known packets, with the retransmission flagged, ACK progress, the SACK block in relative
    offsets, the scaled receive window and in-flight bytes."""
    a = _traced_conversation(40000, 1000, 1_700_000_000.0)
    b = _traced_conversation(40001, 7000, 1_700_000_000.0005)
    frames = sorted(a.frames + b.frames, key=lambda f: f.ts)
    pcap = write_frames(tmp_path / "two.pcap", frames)
    m = measure_pcap(pcap, 80, trace_client_ports=[40000])
    (conn,) = [c for c in m.connections if c.client_port == 40000]
    assert list(m.trace_lines) == [conn.conn]
    write_trace(tmp_path / "series" / "lean-v4-40000.csv", m.trace_lines[conn.conn])
    rows = read_trace(tmp_path / "series" / "lean-v4-40000.csv")
    assert len(rows) == 9 and {r["conn"] for r in rows} == {conn.conn}
    assert [(r["dir"], r["flags"], r["seq_off"], r["end_off"]) for r in rows[:3]] == [
        ("c", "S", 0, 1), ("s", "SA", 0, 1), ("c", "PA", 1, 101)]
    # SYN windows unscaled, then each sender's shift
    assert [r["rwnd_bytes"] for r in rows[:4]] == [64240, 65160, 502 << 7, 128 << 9]
    dup = rows[6]
    assert (dup["ack_off"], dup["sack_blocks"], dup["in_flight_bytes"], dup["rtt_ns"]) == (1001, [(2001, 3001)], 2000,
                                                                                          1_000_000)
    resend = rows[7]
    assert (resend["dir"], resend["seq_off"], resend["payload_bytes"], resend["retransmitted"]) == ("s", 1001, 1000, True)
    assert not any(r["retransmitted"] for r in rows[:7])
    last = rows[8]
    assert (last["ack_off"], last["in_flight_bytes"], last["sack_blocks"]) == (3001, 0, [])
    assert last["rtt_ns"] == 8_000_000  # the never-resent third segment (Karn: none for the resend)
    assert [r["ack_off"] for r in rows if r["dir"] == "c"] == [None, 1, 1001, 3001]
    # no trace without ports; the dpkt reference has none
    assert measure_pcap(pcap, 80).trace_lines == {}
    with pytest.raises(ValueError, match="rust backend"):
        measure_pcap(pcap, 80, backend="dpkt", trace_client_ports=[40000])


def test_temporary_files_only_when_needed_in_the_scratch_dir_and_removed(tmp_path, monkeypatch):
    pcap = write_frames(tmp_path / "one.pcap", _traced_conversation(40000, 1000, 1_700_000_000.0).frames)
    system_tmp, scratch = tmp_path / "tmp", tmp_path / "scratch"
    system_tmp.mkdir(), scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(system_tmp))
    made = []
    real = tempfile.TemporaryDirectory
    monkeypatch.setattr(tempfile, "TemporaryDirectory", lambda **kw: made.append(kw.get("dir")) or real(**kw))
    measure_pcap(pcap, 80, samples_dir=tmp_path / "samples")  # every file kept: no temporary directory
    assert made == []
    m = measure_pcap(pcap, 80, trace_client_ports=[40000], scratch_dir=scratch)
    assert m.trace_lines and made == [scratch]
    measure_pcap(pcap, 80)
    assert made == [scratch, None]
    assert list(scratch.iterdir()) == [] and list(system_tmp.iterdir()) == []


def test_series_file_per_connection_with_a_reused_port(tmp_path):
    """Two connections from one client port in a repetition: the second file gets its conn id;
    a GET row naming a connection already written writes nothing again."""
    from congestlab.analysis.repetition_analysis import _write_series
    conns = [PcapConnection(conn=i, family="v6", client="fd00::a", client_port=41000, server="fd00::b",
                            server_port=80, first_ts=0.0, last_ts=1.0, retransmissions=0, metrics=None)
             for i in (3, 7)]
    traces = {3: [b"3,1,c,S,0,1,0,0,,100,,0,\n"], 7: [b"7,2,c,S,0,1,0,0,,100,,0,\n"]}
    names: dict = {}
    for conn in (conns[0], conns[1], conns[0]):
        _write_series(tmp_path, "nginx", conn, traces, names)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["nginx-v6-41000-7.csv", "nginx-v6-41000.csv"]
    assert [r["conn"] for r in read_trace(tmp_path / "nginx-v6-41000-7.csv")] == [7]


def test_server_data_after_the_clients_fin_is_owed_no_ack():
    """A TLS server answers the client's close with a 24-byte close_notify after the client's
    FIN; the client's socket is gone and answers with a RST. The GET was complete: nothing
    the client wanted went unacknowledged (crates/traceanalyze/src/flow.rs does the same)."""
    from congestlab.analysis.metrics import server_data_unacked
    from congestlab.analysis.packets import RST

    def seg(ts, from_client, seq, ack, flags, payload):
        src, dst, sp, dp = ("10.0.0.2", "10.0.0.1", 40000, 443) if from_client else ("10.0.0.1", "10.0.0.2", 443, 40000)
        return Segment(ts, "v4", src, dst, sp, dp, seq, ack, flags, payload, 66 + payload)

    body = [seg(0.0, True, 0, 0, SYN, 0), seg(0.001, False, 500, 1, SYN | ACK, 0), seg(0.002, True, 1, 501, ACK, 0),
            seg(0.003, True, 1, 501, ACK, 100), seg(0.004, False, 501, 101, ACK, 1000),
            seg(0.005, True, 101, 1501, ACK, 0), seg(0.006, True, 101, 1501, FIN | ACK, 0)]
    client = [s.sport == 40000 for s in body]
    assert server_data_unacked(body, client) == 0
    closing = body + [seg(0.007, False, 1501, 102, ACK, 24), seg(0.008, True, 102, 0, RST, 0)]
    assert server_data_unacked(closing, [s.sport == 40000 for s in closing]) == 0
    # the same 24 bytes before the client's FIN were owed an ACK: the capture lacks it
    early = body[:6] + [seg(0.0055, False, 1501, 101, ACK, 24)]
    assert server_data_unacked(early, [s.sport == 40000 for s in early]) == 24


def test_a_tls_close_notify_neither_ends_the_delay_nor_is_owed_an_ack():
    """The client acknowledged the body at 5 ms; curl's close_notify (24 B) leaves 40 ms later,
    the server answers with its own before the client's FIN, then the client's RST: the delay
    ends at the body's last ACK and the server's 24 bytes are owed nothing."""
    from congestlab.analysis.metrics import server_data_unacked
    from congestlab.analysis.packets import RST

    def seg(ts, from_client, seq, ack, flags, payload):
        src, dst, sp, dp = ("10.0.0.2", "10.0.0.1", 40000, 443) if from_client else ("10.0.0.1", "10.0.0.2", 443, 40000)
        return Segment(ts, "v4", src, dst, sp, dp, seq, ack, flags, payload, 66 + payload)

    segs = [seg(0.0, True, 0, 0, SYN, 0), seg(0.001, False, 500, 1, SYN | ACK, 0), seg(0.002, True, 1, 501, ACK, 0),
            seg(0.003, True, 1, 501, ACK, 100), seg(0.004, False, 501, 101, ACK, 1000),
            seg(0.005, True, 101, 1501, ACK, 0), seg(0.045, True, 101, 1501, ACK, 24),
            seg(0.046, False, 1501, 125, ACK, 24), seg(0.047, True, 125, 1525, FIN | ACK, 0),
            seg(0.048, True, 126, 0, RST, 0)]
    client = [s.sport == 40000 for s in segs]
    m = measure_connection(Connection("v4", "10.0.0.2", 40000, "10.0.0.1", 443, segs))
    assert m.delay_ms == pytest.approx(2.0)  # 3 ms -> 5 ms, not to the close_notify at 45 ms
    assert server_data_unacked(segs, client) == 0
    assert server_data_unacked(segs[:8], client[:8]) == 24  # cut before the client's FIN: owed
