"""Two servers answering at the same time (the seeds' "competing servers"): Apache and
nginx on two hosts behind one 20 Mbit/s router port, one GET to each from two clients at
once, and a dualbench `load` background toward Apache that lives across both points of a
file-size axis. Real namespaces; checks what each table of the run directory holds and that
nothing is left behind."""

from __future__ import annotations

import json
import subprocess

import pytest
from spine_helpers import namespaces_with, processes_mentioning

from congestlab.results import read_results
from congestlab.study import run_study
from congestlab.spec.loader import parse_spec

pytestmark = pytest.mark.netns

LOAD_MBPS = 4.0

SPEC = f"""
name = "competing"
title = "two servers at once, with http_load background"
repetitions = 1
warmup_s = 1.0
gap_s = 0.1

[topology]
switches = [
  {{ name = "s0", subnet4 = "10.9.0.0/24", subnet6 = "fd09:0:0:0::/64" }},
  {{ name = "s1", subnet4 = "10.9.1.0/24", subnet6 = "fd09:0:0:1::/64" }},
]

[[topology.nodes]]
name = "r1"
kind = "router"
links = [{{ switch = "s0", host_id = 1, rate_bps = 20_000_000, queue_packets = 100 }}, {{ switch = "s1", host_id = 1 }}]

[[topology.nodes]]
name = "c1"
links = [{{ switch = "s0", host_id = 10 }}]

[[topology.nodes]]
name = "c2"
links = [{{ switch = "s0", host_id = 11 }}]

[[topology.nodes]]
name = "loader"
links = [{{ switch = "s0", host_id = 12 }}]

[[topology.nodes]]
name = "web1"
links = [{{ switch = "s1", host_id = 10 }}]

[[topology.nodes]]
name = "web2"
links = [{{ switch = "s1", host_id = 11 }}]

[[servers]]
name = "apache"
kind = "apache"
node = "web1"
files_kib = [160, 320]

[[servers]]
name = "nginx"
kind = "nginx"
node = "web2"
files_kib = [160, 320]

[[workloads]]
name = "load"
kind = "http_load"
client = "loader"
server = "apache"
file_kib = 320
rate_mbps = {LOAD_MBPS}

[[workloads]]
name = "get"
kind = "get"
timeout_s = 20
requests = [
  {{ client = "c1", server = "apache", file_kib = 320, families = ["v4", "v6"] }},
  {{ client = "c2", server = "nginx", file_kib = 320, families = ["v4", "v6"] }},
]

[[experiments]]
name = "main"
axes = [{{ name = "size", fields = ["workloads.get.requests.0.file_kib", "workloads.get.requests.1.file_kib"], values = [[160, 160], [320, 320]], labels = ["160", "320"] }}]
"""


def syn_count(pcap) -> int:
    """Connections opened in the capture, counted by tshark (not by our analysis)."""
    out = subprocess.run(["tshark", "-r", str(pcap), "-Y", "tcp.flags.syn == 1 && tcp.flags.ack == 0", "-T", "fields",
                          "-e", "tcp.srcport"], capture_output=True, text=True, check=True).stdout
    return len(set(out.split()))


def test_two_servers_at_once_with_a_load_across_points(tmp_path):
    spec = parse_spec(SPEC, "competing")
    run_dir = tmp_path / "run"
    run_study(spec, out=run_dir)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete", manifest.get("error")
    assert namespaces_with(manifest["testbed"]["prefix"]) == []
    assert processes_mentioning(str(run_dir)) == []  # dualbench load, Apache, nginx, tcpdump, curl: all gone

    points = ["main.size-160", "main.size-320"]
    # both servers started once and kept across both points; nginx really served
    assert {n: len(v) for n, v in manifest["servers"].items()} == {"apache": 1, "nginx": 1}
    assert manifest["servers"]["nginx"][0]["version"].startswith("nginx/")
    assert manifest["servers"]["nginx"][0]["cc_effective"] == "cubic"
    # the load is one process across the block of both points
    instances = manifest["workloads"]["load"]["instances"]
    assert len(instances) == 1 and instances[0]["first_point"] in points

    for point in points:
        pcap = run_dir / "points" / point / "r1" / "pcap"
        assert sorted(p.name for p in pcap.iterdir()) == ["apache.pcap", "nginx.pcap"]

    requests = read_results(run_dir, "request")
    assert len(requests) == 2 * 2 * 2, manifest["analysis"]["problems"]  # points x servers x families
    for row in requests:
        assert row["ok"] == "True", row
        assert int(row["payload_bytes"]) >= int(row["file_kib"]) * 1024
    for point in points:
        for family in ("v4", "v6"):
            mine = {r["server"]: r for r in requests if r["point_id"] == point and r["family"] == family}
            assert set(mine) == {"apache", "nginx"}
            spans = {s: (float(r["start_ts"]), float(r["start_ts"]) + float(r["curl_time_ms"]) / 1e3)
                     for s, r in mine.items()}
            # the two GETs were on the wire at the same time
            assert max(a for a, _ in spans.values()) < min(b for _, b in spans.values()), (point, family, spans)

    load = read_results(run_dir, "load")
    assert [r["point_id"] for r in sorted(load, key=lambda r: r["point_id"])] == points
    for row in load:
        assert float(row["configured_mbps"]) == LOAD_MBPS and float(row["window_s"]) >= 1
        expected_fetches = LOAD_MBPS * 1e6 / (320 * 1024 * 8)
        # open loop: the count of fetches started per second is the schedule's, give or take one
        assert abs(float(row["offered_fetches_per_s"]) - expected_fetches) <= 1.0, row
        # body bytes are counted when a fetch completes: per second a whole number of 320 KiB files
        assert 0 <= float(row["achieved_mbps"]) <= 3 * LOAD_MBPS, row
        assert row["shared_bandwidth_pct"] != "" and int(row["fetches_failed"]) == 0, row

    port = read_results(run_dir, "port")
    assert sorted((r["point_id"], r["server"]) for r in port) == [(p, s) for p in points for s in ("apache", "nginx")]
    for row in port:
        pcap = run_dir / "points" / row["point_id"] / "r1" / "pcap" / f"{row['server']}.pcap"
        opened = syn_count(pcap)
        # every connection on the port: a load fetch already running when the capture began has no SYN
        assert opened <= int(row["connections"]) <= opened + 1, (row, opened)
        if row["server"] == "nginx":
            assert opened == 2  # the two measured GETs, nothing else
        else:
            assert int(row["connections"]) >= 3  # the measured GETs and the load's fetches
        assert float(row["captured_throughput_mbps"]) > 0
    checks = {c["name"]: c for c in manifest["fidelity"]["checks"]}
    assert checks["measured_requests"]["ok"], checks["measured_requests"]
