"""analysis/quic_trace.py: a QUIC connection as the TCP segment trace the panels read, on
synthetic tshark lines (test_quic_capture.py's) and the real capture of data/quic; and
report/request_series.py's load of an HTTP/3 GET (its trace, ngtcp2's qlog series beside it)
drawn by report/panels.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

from congestlab.analysis.qlog_series import QlogSeries
from congestlab.analysis.quic_capture import FIELDS, quic_connections
from congestlab.analysis.quic_requests import write_qlog_series
from congestlab.analysis.quic_trace import quic_trace_lines
from congestlab.analysis.trace_files import read_trace, write_trace
from congestlab.report.panels import figure
from congestlab.report.request_series import load_get
from test_quic_capture import CLIENT, KEYS, PCAP, ack, data, handshake, line, needs_tshark, one


def _with(text: str, **fields) -> str:
    """A tshark line with fields set by name (dots as '__')."""
    f = text.split("\t")
    for name, value in fields.items():
        f[FIELDS.index(name.replace("__", "."))] = value
    return "\t".join(f)


def msd(ts, value, pn=8):
    return _with(line(ts, True, pns=str(pn), types="17"), quic__msd__stream_id="0",
                 quic__msd__maximum_stream_data=str(value))


def lossy_lines():
    """Three packets, the second lost: the client ACKs {1, 3}, the server resends its range
    in pn 4, the client ACKs {1, 3, 4}: pn 2 never arrived."""
    hs = handshake()
    hs[0] = _with(hs[0], tls__quic__parameter__initial_max_stream_data_bidi_local="32768")
    return hs + [msd(0.0025, 65536), data(0.003, 1, 0, 1000), data(0.004, 2, 1000, 1000),
                 data(0.005, 3, 2000, 1000, fin=True), ack(0.006, 3, 0, [(0, 0)]),
                 data(0.008, 4, 1000, 1000), ack(0.010, 4, 1, [(0, 0)])]


def _trace(conn, tmp_path):
    path = tmp_path / "t.csv"
    write_trace(path, quic_trace_lines(conn))
    return read_trace(path)


def test_a_lost_packet_is_a_hole_acked_above_and_its_resent_range_takes_no_rtt(tmp_path):
    conn = one(lossy_lines())
    rows = _trace(conn, tmp_path)
    assert len(rows) == len(conn.datagrams) and [r["ts_ns"] for r in rows] == sorted(r["ts_ns"] for r in rows)
    sent = [(r["seq_off"], r["end_off"], r["payload_bytes"], r["retransmitted"]) for r in rows
            if r["dir"] == "s" and r["payload_bytes"]]
    assert sent == [(0, 1000, 1000, False), (1000, 2000, 1000, False), (2000, 3000, 1000, False),
                    (1000, 2000, 1000, True)]
    assert [r["flags"] for r in rows if r["dir"] == "s" and r["payload_bytes"]] == ["", "", "F", ""]
    acks = [r for r in rows if r["ack_off"] is not None]
    # {1, 3}: bytes 0-1000 contiguous, 2000-3000 above the hole (QUIC's ACK ranges as SACK)
    assert [(r["ack_off"], r["sack_blocks"]) for r in acks] == [(1000, [(2000, 3000)]), (3000, [])]
    assert acks[0]["rwnd_bytes"] == 65536 - 1000 and acks[1]["rwnd_bytes"] == 65536 - 3000
    # pn 3 (newest newly acked) 1 ms; pn 4 carries resent bytes: no sample (Karn)
    assert acks[0]["rtt_ns"] == pytest.approx(1_000_000, abs=10) and acks[1]["rtt_ns"] is None
    flight = [r["in_flight_bytes"] for r in rows]
    assert max(flight) == 3000 and flight[-1] == 0
    assert next(r for r in rows if r["ts_ns"] == acks[0]["ts_ns"])["in_flight_bytes"] == 1000


def test_without_max_stream_data_the_window_is_zero_and_a_cut_connection_still_traces(tmp_path):
    # no ACK of the last byte: not measured (an error), traced all the same, the response
    # stream found by the trace itself
    conn = one(handshake() + [data(0.003, 1, 0, 1000), data(0.004, 2, 1000, 1000, fin=True), ack(0.005, 1, 0)])
    assert conn.error and conn.metrics is None
    rows = _trace(conn, tmp_path)
    last_ack = [r for r in rows if r["ack_off"] is not None][-1]
    assert (last_ack["ack_off"], last_ack["rwnd_bytes"], last_ack["in_flight_bytes"]) == (1000, 0, 1000)


@needs_tshark
def test_real_capture_traces_every_response_byte_to_its_ack(tmp_path):
    for conn in quic_connections(PCAP, KEYS, {4433}):
        rows = _trace(conn, tmp_path)
        m = conn.metrics
        new = sum(r["payload_bytes"] for r in rows if r["dir"] == "s" and not r["retransmitted"])
        acks = [r for r in rows if r["ack_off"] is not None]
        assert new == m.payload_bytes and acks[-1]["ack_off"] == m.payload_bytes and rows[-1]["in_flight_bytes"] == 0
        assert all(a["ack_off"] <= b["ack_off"] for a, b in zip(acks, acks[1:]))
        rtts = [r["rtt_ns"] / 1e6 for r in acks if r["rtt_ns"] is not None]
        assert rtts and set(np.round(rtts, 6)) <= set(np.round(m.rtt_samples_ms, 6))
        assert rows[0]["dir"] == "c" and rows[0]["flags"] == "L"  # the client's Initial starts it


def _quic_get(run, conn, server="ngcubic", qlog: QlogSeries | None = None, qlog_column="complete"):
    d = run / "results" / "series" / "p1" / "r1"
    name = f"{server}-{conn.family}-{conn.client_port}"
    write_trace(d / f"{name}.csv", quic_trace_lines(conn))
    if qlog is not None:
        write_qlog_series(d / f"{name}.qlog.csv", qlog, conn.first_ts)
    return {"point_id": "p1", "repetition": "1", "server": server, "family": conn.family,
            "client_port": str(conn.client_port), "start_ts": str(conn.first_ts), "outcome": "complete",
            "delay_ms": "10.0", "http": "3", "qlog": qlog_column if qlog is not None else ""}


def _labels(fig) -> set[str]:
    return {t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()}


def _texts(fig) -> str:
    return " ".join(t.get_text() for ax in fig.axes for t in ax.texts) + " ".join(t.get_text() for t in fig.texts)


def test_an_http3_get_with_ngtcp2s_qlog_on_the_captures_clock(tmp_path):
    conn = one(lossy_lines())
    qlog = QlogSeries(path=tmp_path / "x.sqlog", time_ms=[0.0, 4.0, 6.0, 10.0], cwnd_bytes=[14520, 14520, 7260, 8000],
                      bytes_in_flight=[0, 3000, 1000, 0], smoothed_rtt_ms=[333, 333, 3, 3],
                      latest_rtt_ms=[0, 0, 3, 3], min_rtt_ms=[None, None, 3, 3], packets_sent=[0, 3, 3, 4],
                      packets_lost=[0, 0, 1, 1])
    row = _quic_get(tmp_path, conn, qlog=qlog)
    got = load_get(tmp_path, row)
    assert got.quic and got.t0_ns == round(conn.first_ts * 1e9)
    s = got.sender
    assert s.source == "ngtcp2 qlog" and s.retx_label == "packets lost (qlog)"
    # qlog time 0 is the client's first datagram, the trace's first row
    assert s.t_ms == pytest.approx([0.0, 4.0, 6.0, 10.0], abs=1e-3)
    assert list(s.cwnd_bytes) == [14520, 14520, 7260, 8000] and list(s.in_flight_bytes) == [0, 3000, 1000, 0]
    # srtt before the first RTT sample is ngtcp2's initial guess: left out
    assert math.isnan(s.srtt_ms[1]) and s.srtt_ms[2] == 3 and np.isnan(s.ssthresh_bytes).all()
    assert s.retx_t_ms == pytest.approx([6.0], abs=1e-3) and not len(s.rto_t_ms)
    assert got.trace.sack_lo.tolist() == [2000] and got.trace.data_retx.sum() == 1
    fig = figure([("median", got)], "t")
    labels = _labels(fig)
    assert {"ACK ranges", "MAX_STREAM_DATA", "cwnd (ngtcp2 qlog)", "packets lost (qlog)"} <= labels
    assert not {"SACK blocks", "receive window", "ssthresh"} & labels
    assert "no ssthresh" in _texts(fig)


def test_an_http3_get_without_a_qlog_or_a_window_says_so(tmp_path):
    conn = one(handshake() + [data(0.003, 1, 0, 1000), data(0.004, 2, 1000, 1000, fin=True), ack(0.006, 2, 1)])
    got = load_get(tmp_path, _quic_get(tmp_path, conn, server="caddy"))
    assert got.quic and got.sender is None and got.family == "v4" and got.client_port == CLIENT
    assert got.sender_absent == "cwnd not recorded (the server writes no qlog)"
    assert any("writes no qlog" in n for n in got.notes) and any("MAX_STREAM_DATA" in n for n in got.notes)
    fig = figure([("median", got)], "t")
    assert "MAX_STREAM_DATA" not in _labels(fig) and "receive window" not in _labels(fig)
    assert "the server writes no qlog" in _texts(fig)
