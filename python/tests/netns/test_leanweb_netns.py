"""leanweb in real namespaces: a server namespace holds a Linux bridge joining leanweb's
TAP device and a veth whose peer sits in a client namespace (dual stack). curl in the
client fetches the studies' files over IPv4 and IPv6; random loss (iptables `statistic`
inside the client namespace) forces timeouts and go-back-N, seen in leanweb's --log.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from congestlab.errors import ToolError
from congestlab.paths import rust_binary
from congestlab.servers.files import file_name, write_files
from congestlab.servers.lean import LeanServer

pytestmark = [
    pytest.mark.netns,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
]

SERVER4, CLIENT4, KERNEL4 = "10.9.0.1", "10.9.0.2", "10.9.0.3"
SERVER6, CLIENT6, KERNEL6 = "fd09::1", "fd09::2", "fd09::3"
SIZES_KIB = [160, 320, 504]


def sh(*argv: str, timeout_s: float = 30, check: bool = True) -> str:
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s)
    if check and proc.returncode != 0:
        raise ToolError(list(argv), proc.returncode, proc.stderr)
    return proc.stdout


def require_leanweb() -> Path:
    """The release binary must exist (`make test` builds the workspace first); never build here."""
    try:
        return rust_binary("leanweb")
    except ToolError as err:
        pytest.fail(f"{err}: run `cargo build --release -p leanweb` (or `make build`) first")


class LanPair:
    """Server ns (bridge br0 + veth; leanweb's TAP joins later) and client ns, both dual-stack."""

    def __init__(self) -> None:
        self.prefix = f"t{uuid.uuid4().hex[:4]}"
        self.ns_s = f"{self.prefix}-lws"
        self.ns_c = f"{self.prefix}-lwc"
        self.bridge = "br0"
        self.veth_s = "vs0"
        self.veth_c = "vc0"

    def __enter__(self) -> LanPair:
        try:
            self._build()
        except BaseException:
            self.teardown()
            raise
        return self

    def _build(self) -> None:
        p = self.prefix
        sh("ip", "netns", "add", self.ns_s)
        sh("ip", "netns", "add", self.ns_c)
        sh("ip", "link", "add", f"{p}vs", "type", "veth", "peer", "name", f"{p}vc")
        sh("ip", "link", "set", f"{p}vs", "netns", self.ns_s, "name", self.veth_s)
        sh("ip", "link", "set", f"{p}vc", "netns", self.ns_c, "name", self.veth_c)
        s, c = ["ip", "-n", self.ns_s], ["ip", "-n", self.ns_c]
        sh(*s, "link", "add", self.bridge, "type", "bridge")
        sh(*s, "link", "set", self.veth_s, "master", self.bridge)
        # The kernel of the server ns also gets an address: Apache/nginx listen there in the benchmark.
        sh(*s, "addr", "add", f"{KERNEL4}/24", "dev", self.bridge)
        sh(*s, "addr", "add", f"{KERNEL6}/64", "dev", self.bridge, "nodad")
        sh(*c, "addr", "add", f"{CLIENT4}/24", "dev", self.veth_c)
        sh(*c, "addr", "add", f"{CLIENT6}/64", "dev", self.veth_c, "nodad")
        for ns, dev in ((self.ns_s, self.veth_s), (self.ns_c, self.veth_c)):
            sh("ip", "netns", "exec", ns, "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off")
            sh("ip", "-n", ns, "link", "set", dev, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh(*s, "link", "set", self.bridge, "up")

    def exec_c(self, *argv: str, timeout_s: float = 60, check: bool = True) -> str:
        return sh("ip", "netns", "exec", self.ns_c, *argv, timeout_s=timeout_s, check=check)

    def teardown(self) -> None:
        for ns in (self.ns_s, self.ns_c):
            pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), 9)
                except (ProcessLookupError, ValueError):
                    pass
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)

    def __exit__(self, *exc: object) -> None:
        self.teardown()


@pytest.fixture
def docroot(tmp_path) -> Path:
    root = tmp_path / "www"
    write_files(root, SIZES_KIB + [4])
    return root


def lean_server(lan: LanPair, docroot: Path, log_path: Path, **knobs) -> LeanServer:
    require_leanweb()
    return LeanServer(netns=lan.ns_s, tap="lw0", bridge=lan.bridge, addr4_cidr=f"{SERVER4}/24",
                      addr6_cidr=f"{SERVER6}/64", gateway4=None, gateway6=None, root_dir=docroot,
                      log_path=log_path, knobs=knobs)


def url(family: int, path: str) -> str:
    return f"http://{SERVER4}{path}" if family == 4 else f"http://[{SERVER6}]{path}"


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_log(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_leanweb_serves_files_over_ipv4_and_ipv6_byte_identical(tmp_path, docroot):
    with LanPair() as lan, lean_server(lan, docroot, tmp_path / "lean.jsonl") as server:
        assert server.ready_line and "addr6=fd09::1/64" in server.ready_line
        lan.exec_c("ping", "-c", "1", "-W", "2", SERVER4)
        lan.exec_c("ping", "-6", "-c", "1", "-W", "2", SERVER6)
        for family in (4, 6):
            for size in SIZES_KIB:
                out = tmp_path / f"got{family}-{size}"
                timing = lan.exec_c("curl", "-sS", "--max-time", "20", "-o", str(out),
                                    "-w", "%{http_code} %{time_total}",
                                    url(family, "/" + file_name(size)))
                code, seconds = timing.split()
                assert code == "200"
                assert sha(out) == sha(docroot / file_name(size)), f"IPv{family} {size} KiB differs"
                print(f"\nleanweb IPv{family} {size} KiB: {float(seconds) * 1000:.2f} ms")
        head = lan.exec_c("curl", "-sS", "-I", "--max-time", "5", url(4, "/" + file_name(160)))
        assert "Content-Length: 163840" in head
        for extra, target, status in (([], url(6, "/missing"), "404"),
                                      (["--path-as-is"], url(4, "/%2e%2e/etc/passwd"), "400"),
                                      (["--path-as-is"], url(6, "/../etc/passwd"), "400"),
                                      (["-X", "DELETE"], url(4, "/"), "405")):
            code = lan.exec_c("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "5", *extra, target)
            assert code == status, (target, code)
    events = read_log(tmp_path / "lean.jsonl")
    assert events[0]["event"] == "start" and events[-1]["event"] == "stop"
    assert any(e["event"] == "rtt_sample" for e in events)
    assert events[-1]["malformed"] == 0


def test_leanweb_100_concurrent_fetches_all_succeed(tmp_path, docroot):
    with LanPair() as lan, lean_server(lan, docroot, tmp_path / "lean.jsonl"):
        lan.exec_c("ping", "-c", "1", "-W", "2", SERVER4)
        lan.exec_c("ping", "-6", "-c", "1", "-W", "2", SERVER6)
        procs = []
        try:
            for i in range(100):
                family = 4 if i % 2 == 0 else 6
                out = tmp_path / f"c{i}"
                procs.append((out, subprocess.Popen(
                    ["ip", "netns", "exec", lan.ns_c, "curl", "-sS", "--max-time", "60", "-o", str(out),
                     url(family, "/" + file_name(320))], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)))
            failures = []
            for out, proc in procs:
                _, err = proc.communicate(timeout=90)
                if proc.returncode != 0 or sha(out) != sha(docroot / file_name(320)):
                    failures.append((out.name, proc.returncode, err.strip()))
        finally:
            for _, proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        assert failures == []
    served = [e for e in read_log(tmp_path / "lean.jsonl") if e["event"] == "request" and e["status"] == 200]
    assert len(served) == 100


def test_leanweb_random_loss_completes_with_timeouts_and_go_back_n(tmp_path, docroot):
    log = tmp_path / "lean.jsonl"
    # A 200 ms minimum RTO keeps the test short; the RTO machinery is the same as at 1 s.
    with LanPair() as lan, lean_server(lan, docroot, log, rto_min_ms=200, weight="W5", sampling="all") as server:
        settings = server.effective_settings()  # readable right after the ready line
        assert (settings["rto_min_ms"], settings["rto_alpha"], settings["rto_beta"]) == (200, 3 / 16, 3 / 8)
        assert (settings["sampling"], settings["cc"], settings["recovery"]) == ("all", "none", "go-back-n")
        lan.exec_c("ping", "-c", "1", "-W", "2", SERVER4)
        lan.exec_c("ping", "-6", "-c", "1", "-W", "2", SERVER6)
        for tool in ("iptables", "ip6tables"):
            lan.exec_c(tool, "-A", "INPUT", "-p", "tcp", "--sport", "80", "-m", "statistic", "--mode", "random",
                       "--probability", "0.03", "-j", "DROP")
        for family in (4, 6):
            out = tmp_path / f"lossy{family}"
            started = time.monotonic()
            lan.exec_c("curl", "-sS", "--max-time", "120", "-o", str(out), url(family, "/" + file_name(504)),
                       timeout_s=150)
            print(f"\nleanweb 504 KiB over IPv{family} with 3 % loss: {time.monotonic() - started:.2f} s")
            assert sha(out) == sha(docroot / file_name(504))
        dropped = lan.exec_c("iptables", "-L", "INPUT", "-v", "-n", "-x")
        assert server.pids
    events = read_log(log)
    timeouts = [e for e in events if e["event"] == "timeout"]
    gbn = [e for e in events if e["event"] in ("tx", "tx_dropped") and e["retransmission"] and e["go_back_n"]]
    closes = [e for e in events if e["event"] == "close"]
    print(f"timeouts {len(timeouts)}, go-back-N retransmissions {len(gbn)}; iptables:\n{dropped}")
    assert timeouts, "3 % loss must cause retransmission timeouts"
    assert len(gbn) > len(timeouts), "go-back-N resends everything outstanding, not one segment per timeout"
    assert sum(c["timeouts"] for c in closes) == len(timeouts)
    samples = [e for e in events if e["event"] == "rtt_sample"]
    assert samples and all(e["rto_us"] >= 200_000 and e["srtt_us"] > 0 for e in samples)
    first_timeout = timeouts[0]
    assert first_timeout["rto_us"] >= 400_000, "RTO doubled from the 200 ms floor"


def test_leanweb_modern_profile_recovers_loss_with_sack_and_no_go_back_n(tmp_path, docroot):
    """The modern profile against Linux's curl: SACK and timestamps are negotiated, 5 % loss
    is repaired by SACK/RACK recovery (kind "recovery"/"tail-loss-probe"), never by go-back-N."""
    log = tmp_path / "lean.jsonl"
    with LanPair() as lan, lean_server(lan, docroot, log, profile="modern") as server:
        settings = server.effective_settings()
        assert (settings["profile"], settings["cc"], settings["recovery"]) == ("modern", "cubic", "sack")
        assert settings["sack"] and settings["timestamps"] and settings["rack_tlp"] and settings["rto_min_ms"] == 200
        lan.exec_c("ping", "-c", "1", "-W", "2", SERVER4)
        lan.exec_c("ping", "-6", "-c", "1", "-W", "2", SERVER6)
        for tool in ("iptables", "ip6tables"):
            lan.exec_c(tool, "-A", "INPUT", "-p", "tcp", "--sport", "80", "-m", "statistic", "--mode", "random",
                       "--probability", "0.05", "-j", "DROP")
        for family in (4, 6):
            for attempt in range(3):
                out = tmp_path / f"modern{family}-{attempt}"
                started = time.monotonic()
                lan.exec_c("curl", "-sS", "--max-time", "60", "-o", str(out), url(family, "/" + file_name(504)),
                           timeout_s=90)
                print(f"\nleanweb modern 504 KiB over IPv{family} with 5 % loss: {time.monotonic() - started:.3f} s")
                assert sha(out) == sha(docroot / file_name(504))
        assert server.pids
    events = read_log(log)
    closes = [e for e in events if e["event"] == "close"]
    retransmits = [e for e in events if e["event"] in ("tx", "tx_dropped") and e["retransmission"]]
    assert len(closes) == 6 and all(c["sack"] and c["timestamps"] and c["recovery"] == "sack" for c in closes)
    assert retransmits, "5 % loss over 6 x 504 KiB must cause retransmissions"
    assert not [e for e in retransmits if e["go_back_n"]]
    assert {e["kind"] for e in retransmits} <= {"recovery", "tail-loss-probe", "timeout", "handshake"}
    assert [e for e in events if e["event"] == "recovery" and e["entered"]], "SACK/RACK recovery episodes"
    assert sum(c["retransmissions"] for c in closes) == len(retransmits)


def client_neighbour_mac(lan: LanPair, family: int, address: str) -> str:
    out = lan.exec_c("ip", f"-{family}", "neigh", "show", address, "dev", lan.veth_c)
    return out.split("lladdr ")[1].split()[0] if "lladdr " in out else out.strip()


def ready_mac(ready_line: str) -> str:
    return ready_line.split("mac=")[1].split()[0].replace("-", ":")


def fetch_at_first_try(lan: LanPair, mac: str) -> None:
    """One small GET per family, 3 s at most: no neighbour entry has to fail and be resolved again."""
    for family, address in ((4, SERVER4), (6, SERVER6)):
        started = time.monotonic()
        out = lan.exec_c("curl", "-s", "--max-time", "3", "-o", "/dev/null", "-w", "%{http_code}",
                         url(family, "/" + file_name(4)), check=False)
        assert out == "200", (f"IPv{family} fetch failed after {time.monotonic() - started:.1f} s: the client "
                              f"sends to {client_neighbour_mac(lan, family, address)}, leanweb is {mac}")
        assert client_neighbour_mac(lan, family, address) == mac


def test_leanweb_restarted_with_a_new_mac_is_reachable_at_once(tmp_path, docroot):
    """leanweb announces its MAC once its TAP device passes frames (crates/leanweb/src/
    link_state.rs). The second leanweb here attaches to its TAP device before the device is
    up (the window the kernel's link watch leaves for a few milliseconds after any attach,
    held open for 0.3 s): the client, whose neighbour entries still hold the first leanweb's
    MAC (REACHABLE after its fetches), reaches the second at the first try. Announced at
    once, into a port that passed no frames yet, the announcement was lost and the client kept
    sending to the old MAC until its entry failed (8-45 s)."""
    with LanPair() as lan:
        with lean_server(lan, docroot, tmp_path / "lean0.jsonl") as first:
            first_mac = ready_mac(first.ready_line)
            fetch_at_first_try(lan, first_mac)
        second = lean_server(lan, docroot, tmp_path / "lean1.jsonl")
        s = ("ip", "-n", lan.ns_s)
        sh(*s, "tuntap", "add", "dev", second.tap, "mode", "tap")
        sh(*s, "link", "set", second.tap, "master", lan.bridge)
        console = tmp_path / "lean1.console.log"
        with console.open("w") as out:
            proc = subprocess.Popen(["ip", "netns", "exec", lan.ns_s, *second.argv], stdout=out,
                                    stderr=subprocess.STDOUT, text=True)
        try:
            time.sleep(0.3)  # attached: carrier on, the device still down, the bridge port disabled
            sh(*s, "link", "set", second.tap, "up")
            deadline = time.monotonic() + 10
            while "leanweb ready" not in console.read_text() and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.02)
            ready = [line for line in console.read_text().splitlines() if line.startswith("leanweb ready")]
            assert ready, console.read_text()
            second_mac = ready_mac(ready[0])
            assert second_mac != first_mac
            fetch_at_first_try(lan, second_mac)
        finally:
            proc.terminate()
            proc.wait(timeout=5)


def test_leanweb_mistakes_are_one_line_with_distinct_exit_codes(tmp_path):
    binary = require_leanweb()
    ns = f"t{uuid.uuid4().hex[:4]}-lwx"
    sh("ip", "netns", "add", ns)
    try:
        base = ["ip", "netns", "exec", ns, str(binary), "--tap", "lw0", "--addr4", f"{SERVER4}/24",
                "--addr6", f"{SERVER6}/64"]
        root = ["--root", str(tmp_path)]
        cases = [(root + ["--sampling", "most"], 2, "--sampling"),
                 (root + ["--weight", "W10"], 2, "--weight"),
                 (root + ["--rto-beta", "1.5"], 2, "beta"),
                 (root + ["--profile", "fast"], 2, "--profile"),
                 (root + ["--recovery", "sack"], 2, "SACK"),
                 (["--root", str(tmp_path / "missing")], 2, "--root"),
                 (root, 3, "no device")]  # never creates the TAP device itself
        for extra, rc, needle in cases:
            proc = subprocess.run(base + extra, capture_output=True, text=True, timeout=10)
            assert proc.returncode == rc, (extra, proc.returncode, proc.stderr)
            lines = proc.stderr.strip().splitlines()
            assert len(lines) == 1 and needle in lines[0], (extra, proc.stderr)
        assert "lw0" not in sh("ip", "-n", ns, "-o", "link", "show")
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
