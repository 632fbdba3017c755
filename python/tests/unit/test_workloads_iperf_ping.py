"""iperf 2 `-y C` and iperf3 `-J` parsing, `ss -ti` algorithms, ping output, command lines (no root)."""

from __future__ import annotations

import json

import pytest

from congestlab.traffic import iperf, ping, socket_stats
from congestlab.workloads.ping import loss_check, rtt_check

# real lines from iperf 2.1.8 on this machine (server side, -P 2 and -u -P 2)
TCP_SERVER = ("19700101000000,10.201.1.2,57282,10.201.2.2,50123,1,0.0-2.1,12451900,48118914\n"
              "19700101000000,10.201.1.2,57296,10.201.2.2,50123,2,0.0-2.1,12189756,47067557\n")
UDP_SERVER = ("19700101000000,10.201.1.2,33225,10.201.2.2,50123,1,0.0-2.0,269010,1065844,0.003,0,182,0.000,1\n"
              "19700101000000,10.201.1.2,59231,10.201.2.2,50123,2,0.0-2.0,266070,1060322,0.005,1,182,0.549,0\n")
# a server with -i 1: interval lines, then the whole-session line
INTERVALS = "".join(f"19700101000000,10.0.0.1,5000,10.0.0.2,50124,1,{t:.1f}-{t + 1:.1f},{b},{b * 8}\n"
                    for t, b in [(0, 5_000_000), (1, 11_000_000), (2, 12_000_000), (3, 12_000_000)]) + \
    "19700101000000,10.0.0.1,5000,10.0.0.2,50124,1,0.0-4.0,40000000,80000000\n"


def test_tcp_server_lines_parse_per_stream():
    reports, other = iperf.parse_csv(TCP_SERVER)
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
    reports, _ = iperf.parse_csv(UDP_SERVER)
    second = reports[1]
    assert second.protocol == "udp"
    assert (second.jitter_ms, second.lost, second.total_datagrams, second.lost_pct) == (0.005, 1, 182, 0.549)


def test_sum_lines_and_chatter_are_separated():
    text = ("------------------------------------------------------------\n"
            "Server listening on TCP port 50123\n"
            + TCP_SERVER +
            "19700101000000,10.201.1.2,0,10.201.2.2,50123,-1,0.0-2.1,24641656,95186471\n"
            "\n")
    reports, other = iperf.parse_csv(text)
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
    with pytest.raises(iperf.IperfParseError, match=f"line 2: .*{why}"):
        iperf.parse_csv("chatter\n" + bad + "\n")


def test_interval_reports_whole_run_and_steady_rate():
    reports, _ = iperf.parse_csv(INTERVALS)
    whole = iperf.whole_run(reports)
    assert len(whole) == 1 and whole[0].bytes == 40_000_000
    # after 2 s: 24 MB over 2 s = 96 Mbit/s (slow start's first seconds left out)
    assert iperf.steady_mbps(reports, 2.0) == pytest.approx(96.0)
    with pytest.raises(iperf.IperfParseError, match="no interval reports"):
        iperf.steady_mbps(reports, 10.0)


def test_iperf2_argv_carries_the_study_flags():
    argv = iperf.client2_argv("10.0.0.2", 50123, duration_s=30, parallel=3, window_bytes=10000, length_bytes=65536)
    assert argv == ["iperf", "-c", "10.0.0.2", "-p", "50123", "-t", "30", "-y", "C", "-P", "3",
                    "-w", "10000", "-l", "65536"]
    udp = iperf.client2_argv("10.0.0.2", 50123, duration_s=2.5, udp=True, parallel=2, udp_rate_bps=1_000_000)
    assert udp == ["iperf", "-c", "10.0.0.2", "-p", "50123", "-t", "2.5", "-y", "C", "-u", "-b", "1000000",
                   "-P", "2"]
    with pytest.raises(ValueError):
        iperf.client2_argv("10.0.0.2", 1, duration_s=0)
    with pytest.raises(ValueError):
        iperf.client2_argv("10.0.0.2", 1, duration_s=1, parallel=0)
    assert iperf.server2_argv(50123) == ["iperf", "-s", "-p", "50123", "-y", "C"]
    assert iperf.server2_argv(50123, udp=True, window_bytes=2000, length_bytes=64, interval_s=1) == [
        "iperf", "-s", "-p", "50123", "-y", "C", "-i", "1", "-u", "-w", "2000", "-l", "64"]


def test_iperf3_argv_selects_the_flow_cc():
    argv = iperf.client3_argv("10.2.0.1", 5202, duration_s=5, cc="compound")
    assert argv[:2] == ["iperf3", "-c"] and argv[argv.index("-C") + 1] == "compound"
    assert argv[argv.index("-t") + 1] == "5" and "-J" in argv
    assert "-C" not in iperf.client3_argv("10.2.0.1", 5202, duration_s=5)


def _iperf3_json(received_bps: float, retransmits: int) -> str:
    return json.dumps({"start": {"connected": [{"local_port": 40000}]},
                       "end": {"sum_sent": {"bytes": 62_500_000, "retransmits": retransmits},
                               "sum_received": {"bytes": 62_000_000, "seconds": 5.0,
                                                "bits_per_second": received_bps}}})


def test_iperf3_json_tcp_and_errors():
    result = iperf.parse_iperf3_json(_iperf3_json(99.2e6, 17))
    assert (result.bytes, result.seconds, result.received_bps, result.retransmits, result.local_port) == (
        62_000_000, 5.0, 99.2e6, 17, 40000)
    with pytest.raises(iperf.IperfParseError, match="not JSON"):
        iperf.parse_iperf3_json("garbage")
    with pytest.raises(iperf.IperfParseError, match="unable to connect"):
        iperf.parse_iperf3_json(json.dumps({"start": {}, "end": {}, "error": "unable to connect to server"}))
    with pytest.raises(iperf.IperfParseError, match="lacks"):
        iperf.parse_iperf3_json(json.dumps({"start": {"connected": []}, "end": {}}))


def test_ss_algorithm_of_the_busiest_connection_per_port():
    # `ss -tinH state established` in the sender: iperf3's control and data connection share the port
    out = ("0      0         10.1.0.1:40000      10.2.0.1:5201\n"
           "\t ts sack cubic wscale:7,7 rto:204 rtt:0.1/0.05 bytes_acked:123 segs_out:5\n"
           "0      0         10.1.0.1:40002      10.2.0.1:5201\n"
           "\t ts sack cubic wscale:7,7 rto:204 rtt:3.1/0.5 bytes_acked:99999999 segs_out:70000\n"
           "0      0         10.1.0.1:40004      10.2.0.1:5202\n"
           "\t ts sack compound wscale:7,7 rto:204 rtt:3.1/0.5 bytes_acked:5000000 segs_out:3000\n"
           "0      0         10.1.0.1:22         10.9.9.9:5000\n"
           "\t ts sack bbr wscale:7,7 rto:204 bytes_acked:1\n")
    seen = socket_stats.parse_ss_algorithms(out, "10.2.0.1")
    assert seen == {5201: (99999999, "cubic"), 5202: (5000000, "compound")}


def test_ss_algorithm_without_window_scaling():
    # a peer with tcp_window_scaling = 0 (an XP-like receive window): ss prints no wscale
    assert socket_stats.ss_algorithm("\t ts sack cubic rto:204 rtt:0.1/0.05 mss:1448") == "cubic"
    assert socket_stats.ss_algorithm("\t sack compound wscale:7,7 rto:204") == "compound"
    assert socket_stats.ss_algorithm("0      0   10.1.0.1:80   10.2.0.1:40000") is None


PING = """PING 10.203.2.2 (10.203.2.2) 56(84) bytes of data.
64 bytes from 10.203.2.2: icmp_seq=1 ttl=63 time=40.3 ms
64 bytes from 10.203.2.2: icmp_seq=2 ttl=63 time=40.1 ms
64 bytes from 10.203.2.2: icmp_seq=3 ttl=63 time=40.6 ms

--- 10.203.2.2 ping statistics ---
4 packets transmitted, 3 received, 25% packet loss, time 31ms
rtt min/avg/max/mdev = 40.100/40.333/40.600/0.205 ms
"""
FLOOD = """PING 10.203.2.2 (10.203.2.2) 56(84) bytes of data.

--- 10.203.2.2 ping statistics ---
5000 packets transmitted, 4949 received, 1.02% packet loss, time 6012ms
rtt min/avg/max/mdev = 0.071/0.160/1.203/0.044 ms, pipe 2, ipg/ewma 1.202/0.150 ms
"""


def test_ping_parse_replies_summary_and_flood():
    r = ping.parse_ping(PING)
    assert (r.sent, r.received, r.rtts_ms) == (4, 3, [40.3, 40.1, 40.6])
    assert (r.rtt_min_ms, r.rtt_avg_ms, r.rtt_max_ms, r.rtt_mdev_ms) == (40.1, 40.333, 40.6, 0.205)
    assert r.loss == pytest.approx(0.25) and r.rtt_median_ms == pytest.approx(40.3)
    f = ping.parse_ping(FLOOD)
    assert (f.sent, f.received, f.rtts_ms, f.rtt_median_ms) == (5000, 4949, [], None)
    assert f.loss == pytest.approx(0.0102)
    none = ping.parse_ping("--- x ping statistics ---\n3 packets transmitted, 0 received, 100% packet loss\n")
    assert none.loss == 1.0 and none.rtt_avg_ms is None
    with pytest.raises(ping.PingParseError):
        ping.parse_ping("nothing here")


def test_ping_checks_pass_and_fail():
    r = ping.parse_ping(PING)
    assert rtt_check("rtt", r, 40.0, 0.5, "a -> b").ok
    bad = rtt_check("rtt", r, 20.0, 0.5, "a -> b")
    assert not bad.ok and "median 40.300" in bad.message
    f = ping.parse_ping(FLOOD)
    ok = loss_check("loss", f, 0.01, 0.003, 10_000, "a -> b")
    assert ok.ok and ok.value == pytest.approx(1.02) and "only 5000 packets" in ok.message
    assert not loss_check("loss", f, 0.05, 0.003, 1000, "a -> b").ok


def test_ping_argv_flood_and_deadline():
    argv = ping.ping_argv("10.0.0.2", "v4", 5000, 0.001, flood=True)
    assert argv[:4] == ["ping", "-f", "-q", "-4"] and argv[-1] == "10.0.0.2"
    assert "-w" not in argv  # no deadline: in-flight requests would count as lost
    assert "-f" not in ping.ping_argv("fd00::2", "v6", 10, 0.01, flood=False)


def test_ss_connections_endpoints_and_counters():
    # `ss -tinH` without a state filter: the state column first; a TIME-WAIT socket has no info line
    out = ("ESTAB 0      0      10.61.0.10:5201 10.62.0.10:40002\n"
           "\t cubic wscale:7,7 rto:204 rtt:0.1/0.05 mss:1448 bytes_acked:1 bytes_received:3000000 segs_out:5\n"
           "TIME-WAIT 0 0 10.61.0.10:41999 10.62.0.12:80\n"
           "ESTAB 0      0      [fd00:61::a]:41000 [fd00:62::b]:80\n"
           "\t ts sack cubic wscale:7,7 rto:204 bytes_received:42\n")
    conns = socket_stats.parse_ss_connections(out)
    assert [(c.local, c.peer) for c in conns] == [("10.61.0.10:5201", "10.62.0.10:40002"),
                                                 ("[fd00:61::a]:41000", "[fd00:62::b]:80")]
    assert conns[0].counters["bytes_received"] == 3_000_000 and conns[0].counters["mss"] == 1448
    assert "rtt" not in conns[0].counters  # rtt:0.1/0.05 is not an integer counter
    assert socket_stats.ss_algorithm(conns[1].info) == "cubic"
