"""Capture duplicates: a frame with the bytes of one captured at most 10 µs before it (editcap
-w's rule) is the same packet recorded twice. It is counted per connection, port and capture and
left out of retransmissions and of every byte and time metric, by the Rust analyzer and the dpkt
reference alike; tshark, once `editcap -w` has removed the copies, sees what we see."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from pcap_builder import ACK, busy_capture, transfer_with_loss_and_reordering, write_frames
from trace_checks import (NEEDS_ANALYZER, assert_agrees_with_tshark, assert_same_measurement, both_backends, busy_run,
                          truthy, tshark_streams, write_suite)

from congestlab.analysis.connections import group_connections
from congestlab.analysis.packets import DUPLICATE_WINDOW_NS, CaptureDuplicates, read_segments
from congestlab.analysis.port import port_aggregate
from congestlab.analysis.run_analysis import analyze_run
from congestlab.analysis.trace import PcapMeasurement, measure_pcap

pytestmark = NEEDS_ANALYZER
needs_tshark = pytest.mark.skipif(shutil.which("tshark") is None or shutil.which("editcap") is None,
                                  reason="tshark and editcap are installed by `make test`")

WINDOW_S = DUPLICATE_WINDOW_NS / 1e9


def without_duplicates(m: PcapMeasurement) -> PcapMeasurement:
    """`m` as the capture without its duplicates would measure."""
    stats = m.read_stats
    return replace(m, connections=[replace(c, capture_duplicates=0) for c in m.connections],
                   port=replace(m.port, capture_duplicates=0),
                   read_stats=replace(stats, frames=stats.frames - stats.capture_duplicates, capture_duplicates=0))


def deduplicated(pcap: Path, out: Path) -> Path:
    """editcap's copy of `pcap` without the frames it finds within our window of an identical one."""
    subprocess.run(["editcap", "-w", f"{WINDOW_S:.9f}", str(pcap), str(out)], capture_output=True, check=True)
    return out


def test_the_rule_as_crates_traceanalyze_src_dedup_rs_tests_it():
    d = CaptureDuplicates()
    assert not d.check(1_000, b"abc")
    assert d.check(1_000, b"abc")  # written twice: same timestamp
    assert not d.check(1_000, b"abd") and not d.check(1_000, b"ab")
    assert d.check(1_000 + DUPLICATE_WINDOW_NS, b"abd")  # the window's edge is inside
    assert not d.check(1_000 + 2 * DUPLICATE_WINDOW_NS + 1, b"abc")
    d = CaptureDuplicates()
    assert not d.check(0, b"x") and d.check(DUPLICATE_WINDOW_NS, b"x") and d.check(2 * DUPLICATE_WINDOW_NS, b"x")
    assert not d.check(-1, b"x")  # stamped before the copies: out of time order, not compared
    d = CaptureDuplicates()
    for i in range(5_000):
        assert not d.check(7, i.to_bytes(4, "little"))
    assert len(d.recent) == 1024 and d.check(7, (4_999).to_bytes(4, "little"))
    assert not d.check(7, (0).to_bytes(4, "little"))  # beyond the frames kept
    for _ in range(50):
        d.check(7, bytes(300_000))
    assert len(d.recent) == (4 << 20) // 300_000


def test_every_frame_twice_is_the_capture_once(tmp_path):
    once, twice = write_suite(tmp_path / "once"), write_suite(tmp_path / "twice", copies=2)
    for name in once:
        single, single_ref = both_backends(once[name])
        rust, ref = both_backends(twice[name])
        assert_same_measurement(rust, ref)
        assert rust.read_stats.frames == 2 * single.read_stats.frames, name
        assert rust.read_stats.capture_duplicates == single.read_stats.frames, name
        segments = [len(c.segments) for c in group_connections(read_segments(once[name]), 80)]
        assert [c.capture_duplicates for c in rust.connections] == segments, name
        assert rust.port.capture_duplicates == single.port.segments == sum(segments), name
        assert single.read_stats.capture_duplicates == single.port.capture_duplicates == 0, name
        assert_same_measurement(single, without_duplicates(rust))
        assert_same_measurement(single_ref, without_duplicates(ref))


def test_a_few_frames_twice(tmp_path):
    """A server data segment (a retransmission if counted), the GET, a client ACK and a UDP
    datagram written twice: each copy right after its original, or 10 µs later (the window's
    edge, still inside)."""
    for family in ("v4", "v6"):
        frames = busy_capture(family)  # the first connection's frames first
        data = next(f for f in frames if not f.from_client and f.payload_len)
        get = next(f for f in frames if f.from_client and f.payload_len)
        ack = next(f for f in frames if f.from_client and not f.payload_len and f.ts > data.ts)
        udp = frames[-3]
        copies = [data, replace(get, ts=get.ts + WINDOW_S), ack, udp]
        single = both_backends(write_frames(tmp_path / f"once-{family}.pcap", frames))[0]
        rust, ref = both_backends(write_frames(tmp_path / f"few-{family}.pcap", frames + copies))
        assert_same_measurement(rust, ref)
        assert [c.capture_duplicates for c in rust.connections] == [3, 0, 0, 0], family
        assert (rust.read_stats.capture_duplicates, rust.port.capture_duplicates) == (4, 3)
        assert sum(c.retransmissions for c in rust.connections) == rust.port.retransmissions == 4
        assert_same_measurement(single, without_duplicates(rust))


def _loss_with_copy(family: str, delay_s: float, new_ip_id: bool, path: Path):
    """The lossy transfer with its first data segment captured again `delay_s` later: the same
    bytes, or sent again with the sender's next IPv4 ID."""
    conv, want = transfer_with_loss_and_reordering(family)
    first = next(f for f in conv.frames if not f.from_client and f.payload_len)
    if new_ip_id:
        conv.segment(first.ts + delay_s, False, 1, 101, ACK, first.payload_len)
        conv.frames.sort(key=lambda f: f.ts)
    else:
        conv.frames.append(replace(first, ts=first.ts + delay_s))
    return conv.write(path), want


def test_a_copy_after_the_window_or_a_resend_with_a_new_ip_id_is_a_retransmission(tmp_path):
    cases = [("v4", 10e-6, False, 1), ("v4", 11e-6, False, 0), ("v4", 5e-6, True, 0),
             ("v6", 10e-6, False, 1), ("v6", 11e-6, False, 0), ("v6", 0.25, False, 0)]
    for family, delay_s, new_ip_id, duplicates in cases:
        case = f"{family} +{delay_s * 1e6:g} µs{' new IP ID' if new_ip_id else ''}"
        pcap, want = _loss_with_copy(family, delay_s, new_ip_id, tmp_path / "copy.pcap")
        rust, ref = both_backends(pcap)
        assert_same_measurement(rust, ref)
        (conn,) = rust.connections
        assert conn.capture_duplicates == rust.read_stats.capture_duplicates == duplicates, case
        assert conn.retransmissions == want["retransmissions"] + 1 - duplicates, case
        assert conn.metrics.payload_bytes == want["payload_bytes"], case


@needs_tshark
def test_tshark_after_editcap_sees_our_counts(tmp_path):
    """editcap -w with our window removes exactly the frames we call capture duplicates, and
    tshark's retransmissions and delays in what is left are ours in the capture with them; on
    the doubled capture itself tshark marks a retransmission per copied data segment."""
    twice = write_suite(tmp_path / "twice", copies=2)
    checked = 0
    for name, pcap in twice.items():
        m = measure_pcap(pcap, 80)
        left = deduplicated(pcap, tmp_path / f"{name}-dedup.pcapng")
        assert measure_pcap(left, 80).read_stats.frames == m.read_stats.frames - m.read_stats.capture_duplicates
        checked += assert_agrees_with_tshark(name, left, m)
        marked = sum(1 for rows in tshark_streams(pcap).values() for r in rows if any(truthy(v) for v in r[8:11]))
        assert marked > sum(c.retransmissions for c in m.connections), name
    assert checked == 18  # every connection with a request, in every capture
    for family, delay_s, new_ip_id in [("v4", 11e-6, False), ("v4", 5e-6, True), ("v4", 10e-6, False),
                                       ("v6", 11e-6, False), ("v6", 10e-6, False)]:
        pcap, _ = _loss_with_copy(family, delay_s, new_ip_id, tmp_path / "copy.pcap")
        assert assert_agrees_with_tshark(family, deduplicated(pcap, tmp_path / "copy-dedup.pcapng"),
                                         measure_pcap(pcap, 80)) == 1


def test_the_analysis_reports_them_and_its_rows_leave_them_out(tmp_path):
    frames = busy_capture("v4")
    once = write_frames(tmp_path / "once.pcap", frames)
    twice = write_frames(tmp_path / "twice.pcap", frames * 2)
    results = {}
    for name, pcap in (("once", once), ("twice", twice)):
        run, manifest, _, _ = busy_run(tmp_path / name, pcap)
        results[name] = analyze_run(run, manifest)
    single, double = results["once"], results["twice"]
    read = single.summary["pcap_read"]["p1/r1/lean"]
    assert read["capture_duplicates"] == 0
    assert double.summary["pcap_read"]["p1/r1/lean"] == read | {"frames": 180, "capture_duplicates": 90}
    assert double.summary["problems"] == [
        "points/p1/r1/pcap/lean.pcap: 90 frames recorded twice (capture duplicates) left out",
        *single.summary["problems"]]
    conns = group_connections(read_segments(twice, duplicates=True), 80)
    for kind in ("request", "port"):
        for a, b in zip(single.rows[kind], double.rows[kind], strict=True):
            assert {k: v for k, v in b.items() if k != "capture_duplicates"} == \
                   {k: v for k, v in a.items() if k != "capture_duplicates"}
            assert a.get("capture_duplicates") in (0, None)
    complete = [r for r in double.rows["request"] if r["outcome"] == "complete"]
    assert [r["capture_duplicates"] for r in complete] == [len(conns[i].duplicates) for i in (0, 1, 3)]
    (port_row,) = double.rows["port"]
    assert port_row["capture_duplicates"] == port_aggregate(conns)["capture_duplicates"] == 86
