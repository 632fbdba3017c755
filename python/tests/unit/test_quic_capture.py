"""analysis/quic_capture.py: a real capture of two HTTP/3 GETs (data/quic, made with
gtlsserver 0.12.1 and curl-cffi on loopback, v4 and v6) decrypted by tshark, and synthetic
tshark field lines for ACK ranges, retransmissions and the errors."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from congestlab.analysis.qlog_series import qlog_for_connection
from congestlab.analysis.quic_capture import FIELDS, NOT_DECRYPTED, parse_field_lines, quic_connections
from congestlab.errors import ToolError, TraceError

QUIC = Path(__file__).parent / "data" / "quic"
PCAP, KEYS = QUIC / "gtls-48KiB.pcap", QUIC / "gtls-48KiB.keys.log"
FILE_BYTES = 49152  # 48KiB.bin, served on both GETs
needs_tshark = pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is installed by `make test`")

SERVER, CLIENT = 4433, 50000


def line(ts, from_client, *, forms="0", pns="", types="", sids="", offs="", lens="", fins="", data="",
         largest="", first="", counts="", gaps="", ranges="", scid="", frame_len=100, cap_len=None, udp_len=100):
    f = dict.fromkeys(FIELDS, "")
    f.update({"frame.time_epoch": repr(ts), "frame.len": str(frame_len),
              "frame.cap_len": str(frame_len if cap_len is None else cap_len), "ip.src": "10.0.0.1",
              "ip.dst": "10.0.0.2", "udp.srcport": str(CLIENT if from_client else SERVER),
              "udp.dstport": str(SERVER if from_client else CLIENT), "udp.length": str(udp_len),
              "quic.header_form": forms, "quic.packet_number": pns, "quic.scid": scid, "quic.frame_type": types,
              "quic.stream.stream_id": sids, "quic.stream.offset": offs, "quic.stream.length": lens,
              "quic.stream.fin": fins, "quic.stream_data": data, "quic.ack.largest_acknowledged": largest,
              "quic.ack.first_ack_range": first, "quic.ack.ack_range_count": counts, "quic.ack.gap": gaps,
              "quic.ack.ack_range": ranges})
    return "\t".join(f[name] for name in FIELDS)


def handshake():
    return [line(0.0, True, forms="1", pns="0", types="6", scid="c1:c1"),
            line(0.001, False, forms="1,1", pns="0,0", types="2,6,6", scid="5e,5e"),
            line(0.002, True, forms="0", pns="0", types="11", sids="0", lens="20", fins="1")]


def data(ts, pn, off, length, fin=False):
    return line(ts, False, pns=str(pn), types=str(0x0E | fin), sids="0", offs=str(off), lens=str(length),
                fins=str(int(fin)), udp_len=length + 40)


def ack(ts, largest, first, pairs=()):
    return line(ts, True, pns="9", types="2", largest=str(largest), first=str(first), counts=str(len(pairs)),
                gaps=",".join(str(g) for g, _ in pairs), ranges=",".join(str(r) for _, r in pairs))


def one(lines):
    [conn] = parse_field_lines(lines, {SERVER})
    return conn


def test_ack_ranges_decide_the_end_not_the_largest_acknowledged():
    c = one(handshake() + [data(0.003, 1, 0, 1000), data(0.004, 2, 1000, 1000, fin=True),
                           line(0.0045, False, pns="3", types="1"),
                           ack(0.005, 3, 0, [(0, 0)]),  # {3, 1}: not 2, which carries the last byte
                           ack(0.007, 3, 2)])
    assert c.error is None and c.key == ("v4", CLIENT)
    assert c.metrics.delay_ms == pytest.approx(7.0) and c.metrics.syn_to_last_ack_ms == pytest.approx(7.0)
    assert c.metrics.payload_bytes == 2000 and c.retransmissions == 0
    assert c.metrics.rtt_samples_ms == pytest.approx([2.0, 3.0])  # pn 1 at 5 ms, pn 2 at 7 ms
    assert (c.server_scid, c.client_scid, c.response_stream_id) == ("5e", "c1c1", 0)


def test_a_retransmitted_range_is_counted_and_gives_no_rtt_sample():
    c = one(handshake() + [data(0.003, 1, 0, 1000), data(0.004, 2, 1000, 1000, fin=True),
                           data(0.010, 3, 1000, 1000, fin=True),  # pn 2 lost: the same range again
                           ack(0.012, 3, 0, [(0, 0)])])  # {3, 1}
    m = c.metrics
    assert c.error is None and c.retransmissions == m.retransmissions == 1
    assert m.delay_ms == pytest.approx(12.0) and m.payload_bytes == 2000
    assert m.rtt_samples_ms == pytest.approx([9.0])  # pn 1 only: not the resent pn 3
    assert m.bytes_captured - m.bytes_nrt == 1032 and c.server_data_unacked_bytes == 0


def test_no_client_ack_of_the_last_byte_is_an_error():
    c = one(handshake() + [data(0.003, 1, 0, 1000), data(0.004, 2, 1000, 1000, fin=True), ack(0.005, 1, 0)])
    assert c.metrics is None
    assert c.error.endswith("no client ACK of the whole response (stream 0: 1000 of 2000 B never acknowledged)")
    assert c.server_data_unacked_bytes == 1000


def test_a_byte_resent_after_a_loss_ends_the_get_only_once_its_new_packet_is_acknowledged():
    # pn 2 (bytes 1000-1999) lost; pn 3 (the FIN) acknowledged first; the resend pn 4 later
    c = one(handshake() + [data(0.003, 1, 0, 1000), data(0.004, 2, 1000, 1000), data(0.0041, 3, 2000, 0, fin=True),
                           ack(0.006, 3, 0, [(0, 0)]),  # {3, 1}: every packet but the lost one
                           data(0.010, 4, 1000, 1000), ack(0.012, 4, 1, [(0, 0)])])  # {4, 3, 1}
    assert c.error is None and c.ended_by == "ack" and c.retransmissions == 1
    assert c.metrics.delay_ms == pytest.approx(12.0) and c.server_data_unacked_bytes == 0


def test_a_client_closing_after_the_whole_response_without_acknowledging_it_ends_the_get():
    # curl-cffi (ngtcp2 1.20) may send CONNECTION_CLOSE (0x1d) right after the last packet, no ACK
    c = one(handshake() + [data(0.003, 1, 0, 1000), data(0.004, 2, 1000, 1000, fin=True), ack(0.0041, 1, 0),
                           line(0.0043, True, pns="10", types="29")])
    assert c.error is None and c.client_close_ts == 0.0043 and c.ended_by == "close"
    assert c.metrics.delay_ms == pytest.approx(4.3) and c.metrics.payload_bytes == 2000
    acked = one(handshake() + [data(0.003, 1, 0, 1000), data(0.004, 2, 1000, 1000, fin=True), ack(0.005, 2, 1)])
    assert acked.ended_by == "ack"


@pytest.mark.parametrize("lines, why", [
    # the last bytes went out only after the client closed: the close is no end
    ([data(0.003, 1, 0, 1000), line(0.0035, True, pns="10", types="29"), data(0.004, 2, 1000, 1000, fin=True)],
     "before the whole response had gone out"),
    # a hole in the stream: the client closed before it could hold the response
    ([data(0.003, 1, 0, 1000), data(0.004, 2, 1500, 500, fin=True), line(0.0043, True, pns="10", types="29")],
     "before the whole response had gone out"),
    # no FIN: the response never ended
    ([data(0.003, 1, 0, 1000), data(0.004, 2, 1000, 1000), line(0.0043, True, pns="10", types="29")],
     "before the whole response had gone out"),
])
def test_a_client_closing_before_the_whole_response_went_out_is_named(lines, why):
    c = one(handshake() + lines)
    assert c.metrics is None and c.ended_by == "" and why in c.error, c.error


def test_a_datagram_cut_by_the_snapshot_length_is_an_error():
    lines = handshake() + [data(0.003, 1, 0, 1000, fin=True), ack(0.005, 1, 0)]
    lines[3] = lines[3].replace("\t100\t100\t", "\t1100\t96\t", 1)
    c = one(lines)
    assert c.metrics is None and "capture truncated: 1 datagrams cut by the snapshot length" in c.error


def test_no_response_stream_data_is_an_error():
    c = one(handshake() + [ack(0.005, 0, 0)])
    assert c.metrics is None and c.error.endswith("no response stream data from the server")


def test_coalesced_datagram_stream_frames_belong_to_its_short_packet_and_its_acks_are_not_counted():
    c = one(handshake() + [
        line(0.003, False, forms="1,0", pns="1,4", types="6,14", sids="0", offs="0", lens="500", fins="0"),
        data(0.004, 5, 500, 500, fin=True),
        # a Handshake ACK and a 1-RTT packet in one datagram: the ACK's number space is unknown
        line(0.005, True, forms="1,0", pns="2,7", types="2,1", largest="5", first="5", counts="0"),
        ack(0.006, 5, 1)])
    assert c.error is None and c.metrics.delay_ms == pytest.approx(6.0) and c.metrics.payload_bytes == 1000


def test_a_stream_frame_without_length_runs_to_its_data_end():
    # quic-go leaves the Length field out of a packet's last STREAM frame (type 0x0c, 0x0d)
    c = one(handshake() + [line(0.003, False, pns="1", types="12", sids="0", offs="0", fins="0", data="00" * 700),
                           line(0.004, False, pns="2", types="13", sids="0", offs="700", fins="1", data="ab:cd:ef"),
                           ack(0.005, 2, 1)])
    assert c.error is None and c.metrics.payload_bytes == 703


def test_a_capture_without_the_client_initial_is_an_error():
    c = one(handshake()[2:] + [data(0.003, 1, 0, 1000, fin=True), ack(0.005, 1, 0)])
    assert c.metrics is None and c.error.endswith("no client Initial: the capture starts inside the connection")


def test_other_ports_are_ignored():
    assert parse_field_lines(handshake(), {443}) == []


@needs_tshark
def test_real_capture_one_connection_per_get_decrypted():
    conns = quic_connections(PCAP, KEYS, {4433})
    assert sorted(c.family for c in conns) == ["v4", "v6"]
    for c in conns:
        m = c.metrics
        assert c.error is None, c.error
        assert m.delay_ms > 0 and m.syn_to_last_ack_ms == m.delay_ms
        # the body plus its HTTP/3 framing (HEADERS, the DATA frame's header)
        assert FILE_BYTES < m.payload_bytes < FILE_BYTES + 200
        assert c.retransmissions == 0 and c.server_data_unacked_bytes == 0
        assert m.rtt_samples_ms and all(r >= 0 for r in m.rtt_samples_ms)
        assert m.bytes_captured >= m.bytes_nrt > m.payload_bytes
        assert c.response_stream_id == 0 and c.first_ts < c.last_ts
        qlog = qlog_for_connection(QUIC / "qlog", c.server_scid)
        assert qlog is not None and qlog.stem == c.server_scid
        assert qlog_for_connection(QUIC / "client-qlog", c.client_scid) is not None or c.family == "v6"


@needs_tshark
def test_real_capture_without_the_key_log_is_not_decrypted(tmp_path):
    empty = tmp_path / "empty.keys.log"
    empty.write_text("")
    for keylog in (None, empty, tmp_path / "missing.keys.log"):
        conns = quic_connections(PCAP, keylog, {4433})
        assert len(conns) == 2
        assert all(c.metrics is None and c.error.endswith(NOT_DECRYPTED) for c in conns)
        assert all(c.server_scid for c in conns)  # Initial packets decrypt without the key log


def test_missing_tshark_or_capture_is_one_clear_error(tmp_path):
    with pytest.raises(ToolError, match="tool not found: no-such-tshark"):
        quic_connections(PCAP, KEYS, {4433}, tshark="no-such-tshark")
    with pytest.raises(TraceError, match="no such capture"):
        quic_connections(tmp_path / "none.pcap", KEYS, {4433})


@needs_tshark
def test_tshark_failure_is_a_tool_error(tmp_path):
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(b"not a capture at all" * 10)
    with pytest.raises(ToolError, match="exited"):
        quic_connections(bad, KEYS, {4433})
