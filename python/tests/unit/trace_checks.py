"""What the capture-analysis tests share (test_trace.py, test_capture_duplicates.py): the
suite of test captures, the comparison of the two backends, tshark's view of a capture, and a
run directory around one capture."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from pcap_builder import (Frame, busy_capture, transfer_with_fast_and_spurious_retransmissions,
                          transfer_with_loss_and_reordering, write_frames)
from record_fixtures import get_row, tiny_stored_spec

from congestlab.analysis.connections import group_connections
from congestlab.analysis.metrics import measure_connection
from congestlab.analysis.packets import read_segments
from congestlab.analysis.trace import measure_pcap
from congestlab.errors import ToolError, TraceError
from congestlab.paths import rust_binary
from congestlab.rundir import FORMAT_VERSION, RAW_KIND


def _analyzer_built() -> bool:
    try:
        rust_binary("traceanalyze")
    except ToolError:  # not built
        return False
    return True


HAVE_ANALYZER = _analyzer_built()
NEEDS_ANALYZER = pytest.mark.skipif(not HAVE_ANALYZER, reason="traceanalyze is built by `make build`")

TIME_S = 1e-6  # 1 µs
TIME_MS = 1e-3


def suite_frames() -> dict[str, tuple[list[Frame], int | None, str]]:
    """Every capture the tests build, as (frames, snaplen, format): one conversation, many,
    three file formats, headers only."""
    out = {}
    for family in ("v4", "v6"):
        conv, _ = transfer_with_loss_and_reordering(family)
        out[f"loss-{family}"] = (conv.frames, None, "pcap")
        out[f"loss-{family}-snap128"] = (conv.frames, 128, "pcap")
        conv, _ = transfer_with_fast_and_spurious_retransmissions(family)
        out[f"fast-{family}"] = (conv.frames, None, "pcap")
        out[f"busy-{family}"] = (busy_capture(family), None, "pcap")
    out["busy-pcapng"] = (busy_capture("v6"), None, "pcapng")
    out["busy-ns-snap128"] = (busy_capture("v4"), 128, "pcap-ns")
    return out


def write_suite(tmp: Path, copies: int = 1) -> dict[str, Path]:
    """The suite's captures in `tmp`, every frame written `copies` times, one copy after the other."""
    tmp.mkdir(parents=True, exist_ok=True)
    return {name: write_frames(tmp / f"{name}.{'pcapng' if fmt == 'pcapng' else 'pcap'}", frames * copies,
                               snaplen, fmt)
            for name, (frames, snaplen, fmt) in suite_frames().items()}


def same_rate(what: str, a: float, b: float, interval_s: float) -> None:
    """Rates divide by a time known to 1 µs in each backend: they agree to that share."""
    assert abs(a - b) <= abs(a) * 2 * TIME_S / interval_s + 1e-12, f"{what}: {a} vs {b} over {interval_s} s"


def assert_same_measurement(a, b):
    """Counts exactly, times within 1 µs (rates, which divide by a time, to that share)."""
    sa, sb = a.read_stats, b.read_stats
    assert (sa.frames, sa.tcp_segments, sa.truncated, sa.capture_duplicates) == \
           (sb.frames, sb.tcp_segments, sb.truncated, sb.capture_duplicates)
    assert sum(sa.skipped.values()) == sum(sb.skipped.values())
    assert [c.key for c in a.connections] == [c.key for c in b.connections]
    for x, y in zip(a.connections, b.connections):
        where = f"{x.family} port {x.client_port} conn {x.conn}"
        assert (x.conn, x.client, x.server, x.server_port, x.retransmissions, x.error, x.server_data_unacked_bytes,
                x.capture_duplicates) == \
               (y.conn, y.client, y.server, y.server_port, y.retransmissions, y.error, y.server_data_unacked_bytes,
                y.capture_duplicates), where
        assert abs(x.first_ts - y.first_ts) <= TIME_S and abs(x.last_ts - y.last_ts) <= TIME_S, where
        assert (x.metrics is None) == (y.metrics is None), where
        if x.metrics is None:
            continue
        mx, my = x.metrics, y.metrics
        for name in ("retransmissions", "bytes_nrt", "bytes_captured", "payload_bytes", "family", "client_port"):
            assert getattr(mx, name) == getattr(my, name), f"{where}: {name}"
        assert abs(mx.delay_ms - my.delay_ms) <= TIME_MS, where
        assert (mx.syn_to_last_ack_ms is None) == (my.syn_to_last_ack_ms is None)
        if mx.syn_to_last_ack_ms is not None:
            assert abs(mx.syn_to_last_ack_ms - my.syn_to_last_ack_ms) <= TIME_MS, where
        for name in ("nrt_throughput_mbps", "captured_throughput_mbps", "goodput_mbps"):
            same_rate(f"{where}: {name}", getattr(mx, name), getattr(my, name), mx.delay_ms / 1e3)
        assert len(mx.rtt_samples_ms) == len(my.rtt_samples_ms), where
        assert all(abs(p - q) <= TIME_MS for p, q in zip(mx.rtt_samples_ms, my.rtt_samples_ms)), where
    pa, pb = a.port, b.port
    for name in ("connections", "segments", "bytes_to_server", "bytes_from_server", "payload_bytes_from_server",
                 "unique_payload_bytes_from_server", "bytes_nrt", "retransmissions", "capture_duplicates"):
        assert getattr(pa, name) == getattr(pb, name), f"port: {name}"
    assert abs(pa.interval_s - pb.interval_s) <= TIME_S
    for name in ("throughput_mbps", "nrt_throughput_mbps", "from_server_mbps", "goodput_mbps"):
        same_rate(f"port: {name}", getattr(pa, name), getattr(pb, name), pa.interval_s)


def both_backends(pcap: Path, **kw):
    return [measure_pcap(pcap, 80, backend=b, **kw) for b in ("rust", "dpkt")]


def tshark_streams(pcap: Path) -> dict[int, list[list[str]]]:
    fields = ["tcp.stream", "frame.time_epoch", "tcp.srcport", "tcp.dstport", "tcp.len", "tcp.flags.ack",
              "tcp.flags.fin", "tcp.flags.reset", "tcp.analysis.retransmission",
              "tcp.analysis.fast_retransmission", "tcp.analysis.spurious_retransmission", "tcp.analysis.out_of_order"]
    argv = ["tshark", "-r", str(pcap), "-Y", "tcp.port == 80", "-T", "fields", *sum((["-e", f] for f in fields), [])]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    streams: dict[int, list[list[str]]] = {}
    for line in out.splitlines():
        row = line.split("\t")
        streams.setdefault(int(row[0]), []).append(row)
    return streams


def truthy(v: str) -> bool:
    return v not in ("", "0", "False")


def assert_agrees_with_tshark(name: str, pcap: Path, m) -> int:
    """Per tshark stream of `pcap`: its segments marked retransmission, fast_retransmission or
    spurious_retransmission are our connection's retransmissions in `m`, and its delay ours
    within 1 ms. Returns how many delays were compared."""
    checked = 0
    for rows in tshark_streams(pcap).values():
        first = float(rows[0][1])
        conn = next(c for c in m.connections if abs(c.first_ts - first) <= TIME_S)
        marked = sum(1 for r in rows if any(truthy(v) for v in r[8:11]))
        assert conn.retransmissions == marked, f"{name} port {conn.client_port}"
        if conn.metrics is None:
            continue
        client = [r for r in rows if r[3] == "80"]
        get = next(r for r in client if int(r[4] or 0) > 0)
        t_get = float(get[1])
        fin_ts = next((float(r[1]) for r in client if truthy(r[6]) and float(r[1]) > t_get), float("inf"))
        t_ack = max(float(r[1]) for r in client if t_get <= float(r[1]) < fin_ts and truthy(r[5])
                    and not truthy(r[6]) and not truthy(r[7]))
        assert abs((t_ack - t_get) * 1e3 - conn.metrics.delay_ms) <= 1.0, name
        checked += 1
    return checked


def busy_run(tmp: Path, capture: Path) -> tuple[Path, dict, list[dict], list]:
    """A run directory in `tmp` whose one repetition holds `capture` (a busy_capture("v4")) as
    the lean server's, with GET records for its connections (curl's time: the capture's delay,
    as the cross-check wants): (run directory, manifest, GET rows, dpkt connections)."""
    run = tmp / "run"
    rep_dir = run / "points" / "p1" / "r1"
    (rep_dir / "pcap").mkdir(parents=True)
    pcap = shutil.copy(capture, rep_dir / "pcap" / "lean.pcap")
    (rep_dir / "rep.json").write_text(json.dumps({"servers": {}}))
    conns = group_connections(read_segments(pcap), server_port=80)

    def client_s(port: int, start: float) -> float:
        """curl's own time: the capture's delay (the cross-check holds them together)."""
        conn = next((c for c in conns if c.key == ("v4", port) and start - 1 <= c.segments[0].ts <= start + 0.3), None)
        if conn is None:
            return 0.0
        try:
            return measure_connection(conn).delay_ms / 1e3
        except TraceError:  # a connection without a request: the analysis finds it invalid anyway
            return 0.0

    reqs = [get_row(server="lean", file_kib=14, client_port=port, start_ts=start, end_ts=start + 0.3,
                    time_total_s=client_s(port, start), request=i)
            for i, (port, start) in enumerate([(40000, 1_700_000_000.0), (40010, 1_700_000_000.2),
                                               (40000, 1_700_000_000.5), (40020, 1_700_000_000.3)])]
    reqs.append({**reqs[0], "ok": False, "error": "Operation timed out after 250 milliseconds", "request": 4})
    (rep_dir / "records.jsonl").write_text("".join(json.dumps({"kind": RAW_KIND, "row": r}) + "\n" for r in reqs))
    manifest = {"points": [{"id": "p1", "experiment": "e", "axes": {}}], "axes": [], "servers": {},
                "spec": tiny_stored_spec(server="lean", files_kib=(14,)), "format_version": FORMAT_VERSION}
    return run, manifest, reqs, conns
