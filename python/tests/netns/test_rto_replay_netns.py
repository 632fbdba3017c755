"""leanweb's transmission log against the capture under real loss, and the offline RTO
replay against leanweb's own logged RTO (docs/rto-replay.md).

Random loss (iptables `statistic` in the client namespace, past the capture point) forces
timeouts and go-back-N. Per connection, the retransmissions leanweb logged as written to
its TAP device must equal those the capture at the server port shows; and the replay,
run with leanweb's live settings over its logged samples, must give leanweb's RTO to the
microsecond, sample for sample.
"""

from __future__ import annotations

import subprocess
import time

import pytest
from test_leanweb_netns import SERVER4, LanPair, docroot, lean_server, require_leanweb, sha, url  # noqa: F401 - fixtures

from congestlab.analysis.lean_log import compare_with_pcap, logged_connections
from congestlab.analysis.rto_estimator import Estimator
from congestlab.analysis.rto_replay import replay_stream, sample_stream, settings_of
from congestlab.analysis.rto_streams import pcap_streams, read_lean_log
from congestlab.analysis.trace import measure_pcap
from congestlab.capture.tcpdump import tcpdump_argv, wait_listening
from congestlab.servers.files import file_name

pytestmark = pytest.mark.netns

FETCHES = 4  # per family, 320 KiB each, two at a time
LOSS = "0.04"


def test_log_matches_capture_and_replay_matches_logged_rto_under_loss(tmp_path, docroot):  # noqa: F811 - the imported fixture
    require_leanweb()
    log = tmp_path / "lean.jsonl"
    pcap = tmp_path / "lean.pcap"
    # A 200 ms minimum RTO keeps the test short; W5/all makes every ACK a sample.
    with LanPair() as lan, lean_server(lan, docroot, log, rto_min_ms=200, weight="W5", sampling="all") as server:
        lan.exec_c("ping", "-c", "1", "-W", "2", SERVER4)
        argv = tcpdump_argv(lan.veth_s, pcap, "tcp port 80")
        err = tmp_path / "tcpdump.err"
        with open(err, "wb") as err_fh:
            dump = subprocess.Popen(["ip", "netns", "exec", lan.ns_s, *argv], stderr=err_fh)
        try:
            wait_listening(err, dump, argv)
            for tool in ("iptables", "ip6tables"):
                lan.exec_c(tool, "-A", "INPUT", "-p", "tcp", "--sport", "80", "-m", "statistic", "--mode",
                           "random", "--probability", LOSS, "-j", "DROP")
            started = time.monotonic()
            for family in (4, 6):
                for pair in range(FETCHES // 2):
                    outs = [tmp_path / f"f{family}-{pair}-{i}" for i in range(2)]
                    curls = [subprocess.Popen(["ip", "netns", "exec", lan.ns_c, "curl", "-sS", "--max-time", "60",
                                               "-o", str(out), url(family, "/" + file_name(320))]) for out in outs]
                    for curl in curls:
                        assert curl.wait(timeout=90) == 0
                    for out in outs:
                        assert sha(out) == sha(docroot / file_name(320))
            print(f"\n{2 * FETCHES} x 320 KiB with {LOSS} loss: {time.monotonic() - started:.1f} s")
            time.sleep(0.3)  # the last ACKs reach the capture
        finally:
            dump.terminate()
            dump.wait(timeout=10)
        assert server.pids

    # 1. per connection: retransmissions in the capture == retransmissions leanweb wrote
    conns = measure_pcap(pcap, server_port=80).connections
    logged = logged_connections(log)
    compared = compare_with_pcap(conns, logged, "loss")
    agreeing, problems = compared.agreeing, compared.disagreements
    retransmitted = sum(c.retransmissions for c in conns)
    print(f"connections {len(conns)}, retransmissions in the capture {retransmitted}")
    assert retransmitted > 0, "4 % loss must cause retransmissions"
    assert len(conns) >= 2 * FETCHES and agreeing == len(conns), problems

    # 2. the replay with the live settings reproduces leanweb's RTO, sample for sample
    lean = read_lean_log(log)
    live = settings_of(lean.settings)
    checked = 0
    timeouts = sum(1 for s in lean.conns for e in s.events if e[0] == "timeout")
    assert timeouts > 0, "the loss must cause timeouts in the middle of connections"
    for stream in lean.conns:
        est = Estimator(live)
        for rtt_us, _srtt, _rttvar, rto_us in stream.logged_samples:
            est.on_sample(rtt_us)
            assert est.rto_us() == rto_us, (stream.key, rtt_us)
            checked += 1
        # the sampler re-run over the logged transmissions and ACKs finds the same samples
        replayed = replay_stream(sample_stream(stream, "all"), live, stream.logged_samples)
        assert [s.rtt_us for s in replayed] == [x[0] for x in stream.logged_samples], stream.key
        assert all(s.rto_us == s.logged_rto_us for s in replayed)
        # ... and gives each the unfloored RTO leanweb had in force when the segment left
        # (segments leaving at the same instant share it: no ACK came between them)
        in_force = {s.sent_us: s.rto_unfloored_us for s in replayed}
        sends = [e for e in stream.events if e[0] == "send"]
        assert len(sends) == len(stream.logged_tx_rto)
        for (_, logged_unfloored), (_, sent_us, *_) in zip(stream.logged_tx_rto, sends):
            if logged_unfloored is not None and sent_us in in_force:
                assert in_force[sent_us] == logged_unfloored
    print(f"replayed {checked} logged samples over {len(lean.conns)} connections; {timeouts} timeouts")
    assert checked > 100

    # 3. the capture's own samples (Karn) replay too, and agree with the log's in number
    from_pcap = pcap_streams(pcap, 80, go_back_n=True)
    pcap_samples = sum(len(sample_stream(s, "all")) for s in from_pcap)
    print(f"samples: log {checked}, pcap {pcap_samples}")
    assert pcap_samples > 0
