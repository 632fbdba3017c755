"""dualbench against real Apache inside a namespace of our own (its loopback only:
127.0.0.1 and ::1): exact per-family counts for patterns A-E, all NORMAL, run through
`congestlab bench ... --netns`; and the open-loop stress client's fetch count.
"""

from __future__ import annotations

import json
import os
import subprocess
import secrets
import sys
import tempfile
from pathlib import Path

import pytest

from congestlab.bench.anma_report import PATTERNS
from congestlab.bench.results import read_report
from congestlab.servers.apache import ApacheServer
from congestlab.servers.files import url_path, write_files
from congestlab.testbed.namespaces import delete_namespace

pytestmark = [
    pytest.mark.netns,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
]

PORT = 8080
REQUESTS = 200


def congestlab(*args: str) -> subprocess.CompletedProcess:
    code = "from congestlab.cli import main; main()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120)


@pytest.fixture
def apache_ns(tmp_path):
    """A namespace with only loopback, Apache listening on 127.0.0.1 and ::1."""
    ns = f"t{secrets.token_hex(2)}-bench"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    docroot = Path(tempfile.mkdtemp(prefix=f"{ns}-docroot-"))
    server = None
    try:
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
        docroot.chmod(0o755)
        write_files(docroot, [4])
        server = ApacheServer(ns, tmp_path / "apache", docroot, tmp_path / "logs",
                              [("127.0.0.1", PORT), ("::1", PORT)])
        server.start()
        server.wait_started()
        yield ns
    finally:
        if server is not None:
            server.stop()
        delete_namespace(ns)  # kills whatever still runs inside first
        subprocess.run(["rm", "-rf", str(docroot)], check=False)


def test_anma_patterns_exact_against_apache(apache_ns, tmp_path):
    for name, n6, n4 in PATTERNS:
        addresses = tmp_path / f"{name}.txt"
        addresses.write_text("::1\n" * n6 + "127.0.0.1\n" * n4)
        out = tmp_path / f"{name}.json"
        proc = congestlab("bench", "anma", "--netns", apache_ns, "--addresses", str(addresses), "--port", str(PORT),
                          "--path", url_path(4), "--requests", str(REQUESTS), "--concurrency", "20",
                          "--json", str(out))
        assert proc.returncode == 0, proc.stderr
        rep = read_report(out)
        expect6 = REQUESTS * n6 // (n6 + n4)
        v6, v4 = rep.family("v6"), rep.family("v4")
        assert (v6.requests, v4.requests) == (expect6, REQUESTS - expect6), name
        assert (v6.normal, v4.normal) == (expect6, REQUESTS - expect6), (name, v6.other_kinds, v4.other_kinds)
        assert rep.family("all").body_bytes == REQUESTS * 4096
        assert rep.family("all").connect_us.count == REQUESTS
        assert f"{expect6:>8}" in proc.stdout  # the human table is printed too


def test_open_loop_load_against_apache(apache_ns, tmp_path):
    out = tmp_path / "load.json"
    proc = congestlab("bench", "load", "--netns", apache_ns, "--url", f"http://127.0.0.1:{PORT}{url_path(4)}",
                      "--url", f"http://[::1]:{PORT}{url_path(4)}", "--rate", "100", "--seconds", "1.5",
                      "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert doc["started"] == 150
    assert doc["families"]["v4"]["normal"] == 75 and doc["families"]["v6"]["normal"] == 75
    assert doc["per_second"][0]["started"] in range(95, 106)


class _NamespaceShim:
    """The two Testbed methods StressRun uses, for a bare namespace."""

    def __init__(self, ns: str):
        self.ns = ns

    def start(self, node, argv, stdout=None, stderr=None):
        return subprocess.Popen(["ip", "netns", "exec", self.ns, *argv], stdout=stdout, stderr=stderr)

    def stop(self, proc):
        proc.kill()
        proc.wait()


def test_stress_runner_offers_the_rate_for_a_throughput(apache_ns, tmp_path):
    from congestlab.bench.stress import HttpStress, StressRun

    stress = HttpStress.for_throughput(f"http://127.0.0.1:{PORT}{url_path(4)}", 4, 1_000_000, 1.5)
    rep = StressRun(_NamespaceShim(apache_ns), "client", stress, tmp_path / "s.json", tmp_path / "s.log").wait()
    expected = -(-1.5 * 1_000_000 // (4 * 1024 * 8))  # ceil(rate x seconds) = 46 fetches
    assert rep.family("v4").requests == expected == rep.family("v4").normal
