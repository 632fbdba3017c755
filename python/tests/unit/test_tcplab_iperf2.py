"""iperf 2 `-y C` parsing and command lines (no root)."""

from __future__ import annotations

import pytest

from congestlab.tcplab import iperf2
from congestlab.tcplab.checks import parse_ping_loss

# real lines from iperf 2.1.8 on this machine (server side, -P 2 and -u -P 2)
TCP_SERVER = ("19700101000000,10.201.1.2,57282,10.201.2.2,50123,1,0.0-2.1,12451900,48118914\n"
              "19700101000000,10.201.1.2,57296,10.201.2.2,50123,2,0.0-2.1,12189756,47067557\n")
UDP_SERVER = ("19700101000000,10.201.1.2,33225,10.201.2.2,50123,1,0.0-2.0,269010,1065844,0.003,0,182,0.000,1\n"
              "19700101000000,10.201.1.2,59231,10.201.2.2,50123,2,0.0-2.0,266070,1060322,0.005,1,182,0.549,0\n")


def test_tcp_server_lines_parse_per_stream():
    reports, other = iperf2.parse_csv(TCP_SERVER)
    assert other == []
    assert [r.stream_id for r in reports] == [1, 2]
    first = reports[0]
    assert first.protocol == "tcp"
    assert (first.src, first.src_port, first.dst, first.dst_port) == ("10.201.1.2", 57282, "10.201.2.2", 50123)
    assert first.bytes == 12451900
    assert first.seconds == pytest.approx(2.1)
    assert first.mbit_per_s == pytest.approx(48.118914)
    assert first.jitter_ms is None


def test_udp_server_lines_carry_jitter_and_loss():
    reports, _ = iperf2.parse_csv(UDP_SERVER)
    second = reports[1]
    assert second.protocol == "udp"
    assert (second.jitter_ms, second.lost, second.total_datagrams, second.lost_pct) == (0.005, 1, 182, 0.549)


def test_sum_lines_and_chatter_are_separated():
    text = ("------------------------------------------------------------\n"
            "Server listening on TCP port 50123\n"
            + TCP_SERVER +
            "19700101000000,10.201.1.2,0,10.201.2.2,50123,-1,0.0-2.1,24641656,95186471\n"
            "\n")
    reports, other = iperf2.parse_csv(text)
    assert len(reports) == 2  # the SUM line (id -1) is dropped: we sum streams ourselves
    assert other[1] == "Server listening on TCP port 50123"


@pytest.mark.parametrize("bad, why", [
    ("19700101000000,10.0.0.1,1,10.0.0.2,2,1,0.0-2.0,100", "fields"),
    ("19700101000000,10.0.0.1,x,10.0.0.2,2,1,0.0-2.0,100,800", "bad field"),
    ("19700101000000,10.0.0.1,1,10.0.0.2,2,1,2.0-1.0,100,800", "negative"),
    ("19700101000000,10.0.0.1,1,10.0.0.2,2,1,0.0-2.0,-5,800", "negative"),
    ("19700101000000,10.0.0.1,1,10.0.0.2,2,1,0.0,100,800", "bad field"),
])
def test_malformed_report_lines_raise_naming_the_line(bad, why):
    with pytest.raises(iperf2.IperfParseError, match=f"line 2: .*{why}"):
        iperf2.parse_csv("chatter\n" + bad + "\n")


def test_client_argv_carries_the_study_flags():
    argv = iperf2.client_argv("10.0.0.2", duration_s=30, parallel=3, window_bytes=10000, length_bytes=65536)
    assert argv == ["iperf", "-c", "10.0.0.2", "-p", "50123", "-t", "30", "-y", "C", "-P", "3",
                    "-w", "10000", "-l", "65536"]
    udp = iperf2.client_argv("10.0.0.2", duration_s=2.5, udp=True, parallel=2, udp_rate_bps=1_000_000)
    assert udp == ["iperf", "-c", "10.0.0.2", "-p", "50123", "-t", "2.5", "-y", "C", "-u", "-b", "1000000",
                   "-P", "2"]
    with pytest.raises(ValueError):
        iperf2.client_argv("10.0.0.2", duration_s=0)
    with pytest.raises(ValueError):
        iperf2.client_argv("10.0.0.2", duration_s=1, parallel=0)


def test_server_argv():
    assert iperf2.server_argv() == ["iperf", "-s", "-p", "50123", "-y", "C"]
    assert iperf2.server_argv(udp=True, window_bytes=2000, length_bytes=64) == [
        "iperf", "-s", "-p", "50123", "-y", "C", "-u", "-w", "2000", "-l", "64"]


def test_ping_summary_parse():
    out = "--- 10.0.0.2 ping statistics ---\n5000 packets transmitted, 4949 received, 1.02% packet loss, time 6s\n"
    assert parse_ping_loss(out) == (5000, 4949)
    with pytest.raises(ValueError):
        parse_ping_loss("nothing here")
