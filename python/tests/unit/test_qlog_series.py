"""analysis/qlog_series.py on real ngtcp2 qlogs (data/quic: gtlsserver 0.12.1's and curl's
client qlog of the same GETs) and on cut, missing and garbled copies."""

from __future__ import annotations

from pathlib import Path

from congestlab.analysis.qlog_series import RS, qlog_for_connection, read_qlog_series

QUIC = Path(__file__).parent / "data" / "quic"
SERVER_QLOG = QUIC / "qlog" / "aa1f83a7a64d1ce502c8a016dd007084d4ba.sqlog"
CLIENT_QLOG = QUIC / "client-qlog" / "e097b80f9fda19c41fcf86c0704f3dadc7eaa66b.sqlog"


def test_server_qlog_series():
    s = read_qlog_series(SERVER_QLOG)
    assert s.complete and s.problems == [] and s.vantage_point == "server"
    n = len(s.time_ms)
    assert n > 10 and s.time_ms == sorted(s.time_ms)
    assert all(len(getattr(s, a)) == n for a in ("cwnd_bytes", "bytes_in_flight", "smoothed_rtt_ms",
                                                   "latest_rtt_ms", "min_rtt_ms", "packets_sent", "packets_lost"))
    assert all(c is not None and c > 0 for c in s.cwnd_bytes)
    assert s.min_rtt_ms[0] is None and s.min_rtt_ms[-1] is not None  # absent until the first sample, then carried
    assert s.packets_sent == sorted(s.packets_sent) and s.total_packets_sent >= s.packets_sent[-1] > 0
    assert s.total_packets_lost == 0


def test_client_qlog_has_the_same_format():
    s = read_qlog_series(CLIENT_QLOG)
    assert s.complete and s.vantage_point == "client" and s.cwnd_bytes


def test_truncated_qlog_keeps_what_came_before(tmp_path):
    raw = SERVER_QLOG.read_bytes()
    records = raw.split(RS.encode())
    cut = RS.encode().join(records[:40]) + RS.encode() + records[40][: len(records[40]) // 2]
    path = tmp_path / SERVER_QLOG.name
    path.write_bytes(cut)
    s = read_qlog_series(path)
    assert not s.complete
    assert s.problems == [f"{path.name}: truncated after record 39"]
    full = read_qlog_series(SERVER_QLOG)
    assert 0 < len(s.time_ms) < len(full.time_ms) and s.cwnd_bytes == full.cwnd_bytes[: len(s.cwnd_bytes)]


def test_missing_qlog(tmp_path):
    s = read_qlog_series(tmp_path / "none.sqlog")
    assert not s.complete and s.problems == ["none.sqlog: no such qlog file"] and s.time_ms == []
    assert qlog_for_connection(tmp_path, "abcd") is None and qlog_for_connection(QUIC / "qlog", None) is None


def test_garbage_and_no_metrics(tmp_path):
    junk = tmp_path / "junk.sqlog"
    junk.write_bytes(b"\x00\xffnot json at all")
    s = read_qlog_series(junk)
    assert not s.complete and "not JSON-SEQ" in s.problems[0]
    bad = tmp_path / "bad.sqlog"
    bad.write_text(f'{RS}{{"trace": {{}}}}\n{RS}{{oops\n{RS}{{"time": 1, "name": "recovery:metrics_updated"}}\n')
    s = read_qlog_series(bad)
    assert not s.complete and s.problems[0] == "bad.sqlog: unreadable record after record 1"
    header_only = tmp_path / "header.sqlog"
    header_only.write_text(f'{RS}{{"trace": {{"vantage_point": {{"type": "server"}}}}}}\n')
    s = read_qlog_series(header_only)
    assert s.complete and s.problems == ["header.sqlog: no metrics_updated events (no cwnd series)"]


def test_finder_uses_the_scid_file_name():
    assert qlog_for_connection(QUIC / "qlog", "AA:1F:83:a7a64d1ce502c8a016dd007084d4ba") == SERVER_QLOG
