"""Any web server under test from a spec alone (docs/servers.md): a user's own server (Python's
http.server, as docs/servers.md writes it), one that daemonizes, and the built-in entries over
TLS and HTTP/2, each measured side by side with its negotiated protocol and CPU per GET; and
the ways a server goes wrong, each one line with nothing left behind. Real namespaces on a
small network (two hosts, one router port at 50 Mbit/s)."""

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
title = "any server"
repetitions = {repetitions}
warmup_s = 0.2
gap_s = 0.1

[topology]
switches = [
  {{ name = "s0", subnet4 = "10.8.0.0/24", subnet6 = "fd08:0:0:0::/64" }},
  {{ name = "s1", subnet4 = "10.8.1.0/24", subnet6 = "fd08:0:0:1::/64" }},
]

[[topology.nodes]]
name = "r1"
kind = "router"
links = [{{ switch = "s0", host_id = 1, rate_bps = 50_000_000, queue_packets = 100 }}, {{ switch = "s1", host_id = 1 }}]

[[topology.nodes]]
name = "client"
links = [{{ switch = "s0", host_id = 10 }}]

[[topology.nodes]]
name = "web"
links = [{{ switch = "s1", host_id = 10 }}]
"""

# a user's own server, as docs/servers.md adds it
MINE = """
[[servers]]
name = "mine"
kind = "command"
node = "web"
port = 8080
files_kib = [64]
command = ["python3", "-m", "http.server", "--bind", "::", "--protocol", "HTTP/1.1", "{port}", "--directory", "{docroot}"]
version = ["python3", "--version"]
"""

# its first process exits at once; the server it leaves is found through its cgroup
DAEMON = """
[[servers]]
name = "daemon"
kind = "command"
node = "web"
port = 8081
files_kib = [64]
command = ["sh", "-c", "setsid python3 -m http.server --bind :: --protocol HTTP/1.1 {port} --directory {docroot} >{logdir}/daemon.log 2>&1 & exit 0"]
ready = { kind = "tcp_listen" }
version = "python3 http.server, daemonized"
"""

GET = """
[[workloads]]
name = "get"
kind = "get"
timeout_s = 10
requests = [{requests}]
"""


# the built-in servers over TLS (HTTP/1.1 and HTTP/2 by ALPN) and over h2c
BUILTINS = """
[[servers]]
name = "apaches"
kind = "apache"
node = "web"
port = 8442
files_kib = [64]
tls = true
http = ["1.1", "2"]

[[servers]]
name = "nginxs"
kind = "nginx"
node = "web"
port = 8443
files_kib = [64]
tls = true
http = ["1.1", "2"]

[[servers]]
name = "caddys"
kind = "caddy"
node = "web"
port = 8444
files_kib = [64]
tls = true
http = ["1.1", "2"]

[[servers]]
name = "lighttpd"
kind = "lighttpd"
node = "web"
port = 8084
files_kib = [64]
http = ["1.1", "2"]

[[servers]]
name = "h2os"
kind = "h2o"
node = "web"
port = 8445
files_kib = [64]
tls = true
http = ["1.1", "2"]
"""

# (server, http, tls) of each point, by label
VARIANTS = {"mine": ("mine", "1.1", False), "daemon": ("daemon", "1.1", False), "apache-h2": ("apaches", "2", True),
            "nginx-h2": ("nginxs", "2", True),
            "caddy-tls": ("caddys", "1.1", True), "lighttpd-h2c": ("lighttpd", "2", False),
            "h2o-h2": ("h2os", "2", True)}


def spec_text(name: str, servers: str, server: str, repetitions: int = 1, tail: str = "") -> str:
    """One GET per family to `server` (a comma-separated list: GETs to each at once)."""
    requests = ", ".join(f'{{ client = "client", server = "{s}", file_kib = 64, families = ["v4", "v6"] }}'
                         for s in server.split(","))
    return NETWORK.format(name=name, repetitions=repetitions) + servers + GET.format(requests=requests) + tail


def assert_nothing_left(run_dir, prefix: str) -> None:
    assert namespaces_with(prefix) == []
    assert prefix not in run_cgroups()
    assert processes_mentioning(f"congestlab-{prefix}-docroot") == []  # a daemonized server's argv names it
    assert processes_mentioning(str(run_dir)) == []


def test_servers_side_by_side_with_protocol_and_cpu_per_get(tmp_path):
    values = ", ".join(f'["{srv}", "{http}", {str(tls).lower()}]' for srv, http, tls in VARIANTS.values())
    tail = f"""
[[experiments]]
name = "main"
axes = [{{ name = "variant", fields = ["workloads.get.requests.0.server", "workloads.get.requests.0.http",
  "workloads.get.requests.0.tls"], values = [{values}], labels = {json.dumps(list(VARIANTS))} }}]
"""
    spec = parse_spec(spec_text("anyserver", MINE + DAEMON + BUILTINS, "mine", tail=tail), "anyserver")
    run_dir = run_study(spec, out=tmp_path / "run")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete", manifest.get("error")
    assert_nothing_left(run_dir, manifest["testbed"]["prefix"])

    mine, daemon = manifest["servers"]["mine"][0], manifest["servers"]["daemon"][0]
    assert mine["version"].startswith("Python 3") and daemon["version"] == "python3 http.server, daemonized"
    assert mine["argv"][1:4] == ["-m", "http.server", "--bind"] and "8080" in mine["argv"]
    for record in (mine, daemon):
        assert record["cc_effective"] == "cubic" and 0 < record["ready_s"] < 10, record
        assert record["cgroup"].startswith(manifest["testbed"]["prefix"] + "-")
        assert record["cpu_total_ms"] > 0, record  # the whole instance, the daemonized child's too
    versions = {name: records[0]["version"] for name, records in manifest["servers"].items()}
    assert versions["nginxs"].startswith("nginx/") and versions["caddys"] == "Caddy/2.6.2", versions
    assert versions["apaches"].startswith("Apache/2.4"), versions
    assert versions["lighttpd"].startswith("lighttpd/1.4") and versions["h2os"].startswith("h2o/2."), versions
    fingerprints = {r[0].get("certificate_sha256") for n, r in manifest["servers"].items() if r[0]["tls"]}
    assert fingerprints == {manifest["tls"]["fingerprint_sha256"]}  # one run CA, one certificate
    assert (run_dir / "tls" / "server.key").stat().st_mode & 0o777 == 0o600

    rows = read_results(run_dir, "request")
    assert sorted((r["variant"], r["family"]) for r in rows) == [(v, f) for v in sorted(VARIANTS) for f in ("v4", "v6")]
    for row in rows:
        server, http, tls = VARIANTS[row["variant"]]
        assert row["outcome"] == "complete", row
        assert (row["server"], row["http"], row["http_negotiated"], row["tls"]) == (server, http, http, str(tls)), row
        assert row["tls_version"] == ("TLSv1.3" if tls else ""), row
        # a server spends well under a second of CPU on 64 KiB, and more than nothing
        assert 0 < float(row["server_cpu_ms"]) < 1000, row
        # the one delay for every protocol holds the handshakes; the seeds' starts later
        assert float(row["syn_to_last_ack_ms"]) >= float(row["delay_ms"]) > 0
        assert 0 < float(row["request_to_last_byte_ms"]) <= float(row["curl_time_ms"])
        # TLS records and HTTP/2 frames cross TCP: a little more than the file, never less
        assert 64 * 1024 <= int(row["payload_bytes"]) <= 64 * 1024 * (1.05 if tls or http == "2" else 1) + 400, row


def _failed_run(tmp_path, servers: str, server: str) -> tuple[str, dict]:
    # both servers run in the point, the user's own one first (it holds port 8080)
    spec = parse_spec(spec_text("badserver", servers, f"mine,{server}"), "badserver")
    with pytest.raises(CongestlabError) as caught:
        run_study(spec, out=tmp_path / "run")
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["status"] == "failed"
    assert_nothing_left(tmp_path / "run", manifest["testbed"]["prefix"])
    message = str(caught.value)
    assert "\n" not in message, message
    return message, manifest


BAD = {
    "missing": ('command = ["no-such-server-congestlab", "{port}"]', "no-such-server-congestlab"),
    "never ready": ('command = ["sh", "-c", "echo warming up; sleep 30"]\n'
                    'ready = { kind = "log_regex", regex = "^listening", timeout_s = 1 }',
                    "not ready (log_regex) after 1 s: warming up"),
    "port taken": ('command = ["python3", "-m", "http.server", "--bind", "::", "8080"]', "Address already in use"),
    "h2 not spoken": ('command = ["python3", "-m", "http.server", "--bind", "::", "--protocol", "HTTP/1.1", "{port}",'
                      ' "--directory", "{docroot}"]\nhttp = ["1.1", "2"]\nready = { timeout_s = 1 }',
                      "not ready over v4 (HTTP/2)"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_server_that_goes_wrong_is_one_line_and_leaves_nothing(tmp_path, case):
    settings, expected = BAD[case]
    bad = f'\n[[servers]]\nname = "bad"\nkind = "command"\nnode = "web"\nport = 8082\nfiles_kib = [64]\n{settings}\n'
    message, _ = _failed_run(tmp_path, MINE + bad, "bad")
    assert expected in message, message


# serves the ready check's GET and the congestion-control probe, then one measured GET, then exits
ONE_GET = """
[[servers]]
name = "brief"
kind = "command"
node = "web"
port = 8083
files_kib = [64]
on_exit = "restart"
command = ["python3", "-c", "import functools, socket, http.server as h; h.SimpleHTTPRequestHandler.protocol_version = 'HTTP/1.1'; S = type('S', (h.HTTPServer,), dict(address_family=socket.AF_INET6)); s = S(('::', {port}), functools.partial(h.SimpleHTTPRequestHandler, directory='{docroot}')); [s.handle_request() for _ in range(4)]; s.server_close()"]
"""


def test_a_server_that_exits_mid_run_makes_its_gets_invalid_and_restarts(tmp_path):
    spec = parse_spec(spec_text("brief", ONE_GET, "brief", repetitions=2), "brief")
    run_dir = run_study(spec, out=tmp_path / "run")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete", manifest.get("error")
    assert_nothing_left(run_dir, manifest["testbed"]["prefix"])
    instances = manifest["servers"]["brief"]
    assert len(instances) == 2 and all(i["exited"]["returncode"] == 0 for i in instances), instances
    rows = read_results(run_dir, "request")
    assert len(rows) == 4
    for repetition in ("1", "2"):
        mine = sorted((r["family_position"], r["outcome"]) for r in rows if r["repetition"] == repetition)
        assert mine == [("0", "complete"), ("1", "invalid")], rows
    for row in rows:
        if row["outcome"] == "invalid":
            assert "server brief exited (0) before this GET ended" in row["error"], row
