"""HTTP/3 beside HTTP/2 from one client stack (docs/http3.md): Caddy over HTTP/2 and HTTP/3
and ngtcp2's server with its own cubic, GETs by curl-cffi, the QUIC capture decrypted with the
client's key log into the same request rows as TCP (one delay definition), ngtcp2's qlog tied
to each GET; and a QUIC server the client cannot reach, one line with nothing left behind.
Real namespaces on a small network (two hosts, one router port at 50 Mbit/s, 5 ms each way
on the client's link so a handshake's round trip shows)."""

from __future__ import annotations

import json

import pytest
from spine_helpers import namespaces_with, processes_mentioning

from congestlab.errors import CongestlabError
from congestlab.results import read_results
from congestlab.spec.loader import parse_spec
from congestlab.study import run_study
from congestlab.testbed.cgroups import run_cgroups

pytestmark = pytest.mark.netns

NETWORK = """
name = "{name}"
title = "http3"
repetitions = 1
warmup_s = 0.2
gap_s = 0.1

[topology]
switches = [
  {{ name = "s0", subnet4 = "10.9.0.0/24", subnet6 = "fd09:0:0:0::/64" }},
  {{ name = "s1", subnet4 = "10.9.1.0/24", subnet6 = "fd09:0:0:1::/64" }},
]

[[topology.nodes]]
name = "r1"
kind = "router"
links = [{{ switch = "s0", host_id = 1, rate_bps = 50_000_000, queue_packets = 100, delay_ms = 5.0 }},
         {{ switch = "s1", host_id = 1 }}]

[[topology.nodes]]
name = "client"
links = [{{ switch = "s0", host_id = 10 }}]

[[topology.nodes]]
name = "web"
links = [{{ switch = "s1", host_id = 10 }}]

[[workloads]]
name = "get"
kind = "get"
client_kind = "curl-cffi"
timeout_s = 10
requests = [{{ client = "client", server = "{server}", file_kib = 64, families = ["v4", "v6"], tls = true, http = "{http}" }}]
"""

SERVERS = """
[[servers]]
name = "caddy"
kind = "caddy"
node = "web"
port = 8444
files_kib = [64]
tls = true
http = ["1.1", "2", "3"]

[[servers]]
name = "ngcubic"
kind = "ngtcp2"
node = "web"
port = 4433
quic_cc = "cubic"
files_kib = [64]
tls = true
http = ["3"]
"""

# (server, http) of each point, by label
VARIANTS = {"caddy-h2": ("caddy", "2"), "caddy-h3": ("caddy", "3"), "ngcubic-h3": ("ngcubic", "3")}


def assert_nothing_left(run_dir, prefix: str) -> None:
    assert namespaces_with(prefix) == []
    assert prefix not in run_cgroups()
    assert processes_mentioning(str(run_dir)) == []


def test_http3_and_http2_side_by_side_from_one_client(tmp_path):
    values = ", ".join(f'["{srv}", "{http}"]' for srv, http in VARIANTS.values())
    tail = f"""
[[experiments]]
name = "main"
axes = [{{ name = "variant", fields = ["workloads.get.requests.0.server", "workloads.get.requests.0.http"], values = [
  {values}], labels = {json.dumps(list(VARIANTS))} }}]
"""
    spec = parse_spec(NETWORK.format(name="http3", server="caddy", http="2") + SERVERS + tail, "http3")
    run_dir = run_study(spec, out=tmp_path / "run")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete", manifest.get("error")
    assert_nothing_left(run_dir, manifest["testbed"]["prefix"])
    assert manifest["tools"]["curl-cffi"].startswith("curl_cffi/") and "ngtcp2/" in manifest["tools"]["curl-cffi"]
    quic = manifest["servers"]["ngcubic"][0]
    assert quic["version"].startswith("ngtcp2/0.12") and quic["cc_effective"] == "ngtcp2 --cc cubic", quic
    assert quic["quic"]["quic_cc"] == "cubic" and quic["cc_kernel"] is None, quic
    assert "a probe run's debug log names no BBR" in quic["cc_effective_from"], quic  # runner/quic_cc_probe.py
    assert manifest["servers"]["caddy"][0]["quic"]["stack"].startswith("quic-go"), manifest["servers"]["caddy"]

    rows = read_results(run_dir, "request")
    assert sorted((r["variant"], r["family"]) for r in rows) == [(v, f) for v in sorted(VARIANTS) for f in ("v4", "v6")]
    for row in rows:
        server, http = VARIANTS[row["variant"]]
        assert row["outcome"] == "complete", row
        assert (row["server"], row["http"], row["http_negotiated"], row["tls_version"]) == \
            (server, http, http, "TLSv1.3"), row
        # one delay for every protocol: the first client packet to its ACK of the last byte,
        # the handshakes in it; curl's request-to-last-byte is inside it
        delay = float(row["syn_to_last_ack_ms"])
        assert delay >= 10 and 0 < float(row["request_to_last_byte_ms"]) < delay, row
        # TLS records / QUIC and HTTP/3 frames: a little more than the file, never less
        assert 64 * 1024 <= int(row["payload_bytes"]) <= 64 * 1024 * 1.05 + 400, row
        assert 0 < float(row["server_cpu_ms"]) < 1000, row
        trace = (run_dir / "results" / "series" / row["point_id"] / "r1" /
                 f"{row['server']}-{row['family']}-{row['client_port']}.csv")
        assert trace.is_file(), trace  # TCP's segment trace, or the QUIC connection's as one (panels)
        if row["server"] == "ngcubic":  # ngtcp2's qlog of this very connection
            assert row["qlog"] == "complete" and int(float(row["qlog_cwnd_max_bytes"])) > 0, row
            series = (run_dir / "results" / "series" / row["point_id"] / "r1" /
                      f"ngcubic-{row['family']}-{row['client_port']}.qlog.csv")
            assert series.is_file(), series
        else:
            assert row["qlog"] == "", row  # Caddy's quic-go writes none: nothing claims one
    pcaps = sorted(p.name for p in run_dir.glob("points/*/r1/quic/*"))
    assert pcaps.count("keys.log") == 2 and "ngcubic.pcap" in pcaps, pcaps  # the h3 points' captures and keys


# a QUIC server the client cannot reach: its namespace drops UDP to its port (as a firewall
# would), or it never opens UDP at all (a TCP-only program said to serve HTTP/3)
BAD = {
    "udp blocked": ('["sh", "-c", "iptables -A INPUT -p udp --dport {port} -j DROP && exec gtlsserver -q '
                    '--htdocs={docroot} \'*\' {port} {key} {cert}"]', "not ready over"),
    "never answers h3": ('["python3", "-m", "http.server", "--bind", "::", "{port}", "--directory", "{docroot}"]',
                         "not ready over"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_quic_server_the_client_cannot_reach_is_one_line_and_leaves_nothing(tmp_path, case):
    command, expected = BAD[case]
    bad = f"""
[[servers]]
name = "bad"
kind = "command"
node = "web"
port = 4443
files_kib = [64]
tls = true
http = ["3"]
command = {command}
ready = {{ timeout_s = 2 }}
"""
    spec = parse_spec(NETWORK.format(name="badquic", server="bad", http="3") + bad, "badquic")
    with pytest.raises(CongestlabError) as caught:
        run_study(spec, out=tmp_path / "run")
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["status"] == "failed"
    assert_nothing_left(tmp_path / "run", manifest["testbed"]["prefix"])
    message = str(caught.value)
    assert "\n" not in message and expected in message and "(HTTP/3 over TLS)" in message, message


def test_the_browser_over_http3_and_http2(tmp_path):
    """Chromium forced to QUIC for ngtcp2's origin and on TLS with h2 for Caddy, trusting the
    run's certificate by its SPKI hash: what it negotiated is recorded, and the analysis picks
    the QUIC connection that carried the file (the browser names no port)."""
    values = '["ngcubic", "3"], ["caddy", "2"]'
    tail = f"""
[[experiments]]
name = "main"
axes = [{{ name = "variant", fields = ["workloads.get.requests.0.server", "workloads.get.requests.0.http"], values = [
  {values}], labels = ["ngcubic-h3", "caddy-h2"] }}]
"""
    text = NETWORK.format(name="browserh3", server="caddy", http="2").replace('client_kind = "curl-cffi"',
                                                                            'client_kind = "chromium"')
    spec = parse_spec(text + SERVERS + tail, "browserh3")
    run_dir = run_study(spec, out=tmp_path / "run")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete", manifest.get("error")
    assert_nothing_left(run_dir, manifest["testbed"]["prefix"])
    rows = read_results(run_dir, "request")
    assert sorted((r["variant"], r["family"]) for r in rows) == [(v, f) for v in ("caddy-h2", "ngcubic-h3")
                                                                 for f in ("v4", "v6")]
    for row in rows:
        http = "3" if row["variant"] == "ngcubic-h3" else "2"
        assert row["outcome"] == "complete", row
        assert (row["client_kind"], row["http_negotiated"], row["tls_version"]) == ("chromium", http, "TLSv1.3"), row
        assert 64 * 1024 <= int(row["payload_bytes"]) <= 64 * 1024 * 1.05 + 400, row
