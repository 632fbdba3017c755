"""Benchmark: leanweb (own TCP/IP stack on a TAP device) against Apache and nginx.

Topology (namespaces made here, all names prefixed `b<4 hex>-`, removed at the end also on
error or Ctrl-C):

    client ns  vc0 10.9.1.2 / fd19::2
        |  (veth)
    router ns  r1 10.9.1.254 / fd19::fe   r0 10.9.0.254 / fd09::fe
        |  (veth)
    server ns  bridge br0 = { vs0, lw0 (leanweb's TAP) };  br0 10.9.0.3 / fd09::3 (kernel: Apache, nginx)
               leanweb answers 10.9.0.1 / fd09::1 itself

Offloads (TSO/GSO/GRO) are off on every veth, the bridge and the TAP, so all three servers
put MSS-sized frames on the wire. The kernel servers use CUBIC (per-route `congctl`).

(a) unshaped path: wrk (keep-alive, bounded by -d) in the client namespace against each
    server in turn, 4 KiB and 320 KiB files, IPv4 and IPv6: requests/s and payload Mbit/s
    (= requests/s x file size x 8; response headers not counted).
(b) 100 Mbit/s HTB bottleneck with a 1000-packet FIFO on the router's egress towards the
    client, no other traffic: 320 KiB fetched on a fresh connection each time (curl,
    `Connection: close`); delay = curl time_total (connect + GET -> last byte at the
    client, a proxy for GET -> last ACK at the server: it misses the half RTT of the final
    ACK, ~50 µs here) and also GET -> last byte (time_total - time_pretransfer).
    Median over the fetches, leanweb / Apache ratio printed.

Run as root after `cargo build --release -p leanweb`:
    .venv/bin/python python/benchmarks/bench_leanweb.py [--seconds 4] [--fetches 40]
(`make bench-leanweb` does both.)
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from congestlab.errors import ToolError
from congestlab.servers.apache import ApacheServer
from congestlab.servers.files import file_name, write_files
from congestlab.servers.lean import LeanServer
from congestlab.testbed.plan import BRIDGE_NETFILTER_OFF

LEAN4, KERNEL4, ROUTER_S4, ROUTER_C4, CLIENT4 = "10.9.0.1", "10.9.0.3", "10.9.0.254", "10.9.1.254", "10.9.1.2"
LEAN6, KERNEL6, ROUTER_S6, ROUTER_C6, CLIENT6 = "fd09::1", "fd09::3", "fd09::fe", "fd19::fe", "fd19::2"
LEAN_MAC = "02:00:00:00:09:01"
APACHE_PORT, NGINX_PORT = 80, 8080
SIZES_KIB = (4, 320)
BOTTLENECK_RATE = "100mbit"
BOTTLENECK_FIFO_PACKETS = 1000


def sh(*argv: str, timeout_s: float = 30, check: bool = True) -> str:
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s)
    if check and proc.returncode != 0:
        raise ToolError(list(argv), proc.returncode, proc.stderr)
    return proc.stdout


class BenchNet:
    """client ns -- router ns -- server ns (bridge), dual stack; torn down on exit."""

    def __init__(self) -> None:
        p = f"b{uuid.uuid4().hex[:4]}"
        self.prefix = p
        self.client, self.router, self.server = f"{p}-cli", f"{p}-rtr", f"{p}-srv"

    def __enter__(self) -> BenchNet:
        try:
            self._build()
        except BaseException:
            self.teardown()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.teardown()

    def ns(self, ns: str, *argv: str, timeout_s: float = 30, check: bool = True) -> str:
        return sh("ip", "netns", "exec", ns, *argv, timeout_s=timeout_s, check=check)

    def _veth(self, a_ns: str, a: str, b_ns: str, b: str) -> None:
        tmp_a, tmp_b = f"{self.prefix}{a}", f"{self.prefix}{b}"
        sh("ip", "link", "add", tmp_a, "type", "veth", "peer", "name", tmp_b)
        sh("ip", "link", "set", tmp_a, "netns", a_ns, "name", a)
        sh("ip", "link", "set", tmp_b, "netns", b_ns, "name", b)

    def _no_offloads(self, ns: str, dev: str) -> None:
        self.ns(ns, "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off")

    def _build(self) -> None:
        c, r, s = self.client, self.router, self.server
        for ns in (c, r, s):
            sh("ip", "netns", "add", ns)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        self._veth(c, "vc0", r, "r1")
        self._veth(s, "vs0", r, "r0")
        sh("ip", "-n", s, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", s, "link", "set", "vs0", "master", "br0")
        addrs = [(c, "vc0", CLIENT4, 24, CLIENT6), (r, "r1", ROUTER_C4, 24, ROUTER_C6),
                 (r, "r0", ROUTER_S4, 24, ROUTER_S6), (s, "br0", KERNEL4, 24, KERNEL6)]
        for ns, dev, a4, len4, a6 in addrs:
            sh("ip", "-n", ns, "addr", "add", f"{a4}/{len4}", "dev", dev)
            sh("ip", "-n", ns, "addr", "add", f"{a6}/64", "dev", dev, "nodad")
        for ns, dev in ((c, "vc0"), (r, "r1"), (r, "r0"), (s, "vs0"), (s, "br0")):
            self._no_offloads(ns, dev)
            sh("ip", "-n", ns, "link", "set", dev, "up")
        self.ns(r, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1")
        self.ns(s, "sh", "-ec", BRIDGE_NETFILTER_OFF)  # as the testbed does for a user-stack node
        # Kernel senders in the server ns use CUBIC, as the studies' Linux did.
        sh("ip", "-n", s, "route", "add", "default", "via", ROUTER_S4, "congctl", "cubic")
        sh("ip", "-n", s, "-6", "route", "add", "default", "via", ROUTER_S6, "congctl", "cubic")
        sh("ip", "-n", c, "route", "add", "default", "via", ROUTER_C4)
        sh("ip", "-n", c, "-6", "route", "add", "default", "via", ROUTER_C6)

    def tap_no_offloads(self, tap: str) -> None:
        self._no_offloads(self.server, tap)

    def server_tx_checksum(self, on: bool) -> None:
        """tx-checksumming of the server's veth: off while leanweb serves, as the testbed sets
        a user-stack node's veth (its GSO super-frames are then cut with full checksums, valid
        in a capture: testbed/plan.py), on for the kernel servers (as a kernel node's veth)."""
        self.ns(self.server, "ethtool", "-K", "vs0", "tx", "on" if on else "off")

    def add_bottleneck(self) -> None:
        """HTB 100 Mbit/s + 1000-packet FIFO on the router's egress towards the client."""
        r = ["ip", "netns", "exec", self.router, "tc"]
        sh(*r, "qdisc", "add", "dev", "r1", "root", "handle", "1:", "htb", "default", "1")
        sh(*r, "class", "add", "dev", "r1", "parent", "1:", "classid", "1:1", "htb",
           "rate", BOTTLENECK_RATE, "ceil", BOTTLENECK_RATE)
        sh(*r, "qdisc", "add", "dev", "r1", "parent", "1:1", "handle", "10:", "pfifo",
           "limit", str(BOTTLENECK_FIFO_PACKETS))

    def bottleneck_drops(self) -> int:
        out = sh("ip", "netns", "exec", self.router, "tc", "-s", "qdisc", "show", "dev", "r1")
        match = re.search(r"pfifo 10:.*?dropped (\d+)", out, re.S)
        return int(match.group(1)) if match else -1

    def teardown(self) -> None:
        for ns in (self.client, self.router, self.server):
            pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


class NginxServer:
    """nginx with its own prefix, config, pid and logs; master in the foreground (our PID)."""

    def __init__(self, netns: str, workdir: Path, docroot: Path, listen: list[str]):
        self.netns, self.workdir, self.docroot, self.listen = netns, workdir, docroot, listen
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        w = self.workdir
        w.mkdir(parents=True, exist_ok=True)
        temp_paths = "\n".join(f"  {kind}_temp_path {w}/{kind};" for kind in
                               ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        listens = "\n".join(f"    listen {addr};" for addr in self.listen)
        (w / "nginx.conf").write_text(f"""worker_processes auto;
pid {w}/nginx.pid;
error_log {w}/error.log warn;
events {{ worker_connections 1024; }}
http {{
  access_log {w}/access.log;
  sendfile on;
  tcp_nopush on;
  keepalive_timeout 5;
  keepalive_requests 1000000;
  default_type application/octet-stream;
{temp_paths}
  server {{
{listens}
    root {self.docroot};
  }}
}}
""")
        argv = ["ip", "netns", "exec", self.netns, "nginx", "-e", f"{w}/error.log", "-p", str(w),
                "-c", str(w / "nginx.conf"), "-g", "daemon off;"]
        with open(w / "stderr.log", "wb") as err:
            self.proc = subprocess.Popen(argv, stdout=err, stderr=err, start_new_session=True)
        deadline = time.monotonic() + 10
        while not (w / "nginx.pid").exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise ToolError(argv, self.proc.poll(), (w / "stderr.log").read_text(errors="replace"))
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)


def url(host: str, port: int, size_kib: int) -> str:
    h = f"[{host}]" if ":" in host else host
    return f"http://{h}:{port}/{file_name(size_kib)}"


def wrk(net: BenchNet, target: str, seconds: int, connections: int) -> dict:
    out = net.ns(net.client, "wrk", "-t", "1", "-c", str(connections), "-d", f"{seconds}s", "--timeout", "5s",
                 target, timeout_s=seconds + 30)
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    errors = re.search(r"Socket errors: (.*)", out)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {"rps": rps, "errors": errors.group(1) if errors else "", "non2xx": int(non2xx.group(1)) if non2xx else 0}


def curl_times(net: BenchNet, target: str, fetches: int, size_bytes: int) -> list[tuple[float, float]]:
    """(time_total, GET -> last byte) in ms for `fetches` fresh connections."""
    argv = ["curl", "-sS", "--max-time", "30", "-H", "Connection: close",
            "-w", "%{http_code} %{size_download} %{time_pretransfer} %{time_total}\\n"]
    for _ in range(fetches):
        argv += ["-o", "/dev/null", target]
    out = net.ns(net.client, *argv, timeout_s=30 + fetches * 5)
    times = []
    for line in out.splitlines():
        code, size, pre, total = line.split()
        if code != "200" or int(size) != size_bytes:
            raise ToolError(argv, 0, f"bad fetch: {line}")
        times.append((float(total) * 1000, (float(total) - float(pre)) * 1000))
    if len(times) != fetches:
        raise ToolError(argv, 0, f"{len(times)} of {fetches} fetches reported")
    return times


def wait_http(net: BenchNet, target: str) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        code = net.ns(net.client, "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "2",
                      target, check=False)
        if code == "200":
            return
        time.sleep(0.1)
    raise ToolError(["curl", target], None, "server not answering within 10 s")


class Servers:
    """Starts one server at a time by kind; always stops what it started."""

    def __init__(self, net: BenchNet, work: Path, docroot: Path):
        self.net, self.work, self.docroot = net, work, docroot
        self.running: object | None = None

    def start(self, kind: str) -> tuple[str, str, int]:
        """Starts `kind`; returns (v4 host, v6 host, port)."""
        self.stop()
        self.net.server_tx_checksum(kind != "leanweb")
        if kind == "leanweb":
            server = LeanServer(netns=self.net.server, tap="lw0", bridge="br0", addr4_cidr=f"{LEAN4}/24",
                                addr6_cidr=f"{LEAN6}/64", gateway4=ROUTER_S4, gateway6=ROUTER_S6,
                                root_dir=self.docroot, log_path=self.work / "lean" / "lean.jsonl",
                                # one MAC across restarts: the router's neighbour entry stays valid
                                knobs={"mac": LEAN_MAC})
            server.start()
            self.running = server
            self.net.tap_no_offloads("lw0")
            hosts = (LEAN4, LEAN6, 80)
        elif kind == "apache":
            server = ApacheServer(self.net.server, self.work / "apache", self.docroot, self.work / "apache" / "logs",
                                  [(KERNEL4, APACHE_PORT), (KERNEL6, APACHE_PORT)])
            self.running = server
            server.start()
            server.wait_started()
            hosts = (KERNEL4, KERNEL6, APACHE_PORT)
        elif kind == "nginx":
            server = NginxServer(self.net.server, self.work / "nginx", self.docroot,
                                 [f"{KERNEL4}:{NGINX_PORT}", f"[{KERNEL6}]:{NGINX_PORT}"])
            self.running = server
            server.start()
            hosts = (KERNEL4, KERNEL6, NGINX_PORT)
        else:
            raise ValueError(kind)
        for host in hosts[:2]:
            wait_http(self.net, url(host, hosts[2], SIZES_KIB[0]))
        return hosts

    def stop(self) -> None:
        server, self.running = self.running, None
        if server is not None:
            server.stop()


def throughput(net: BenchNet, servers: Servers, seconds: int, connections: int) -> None:
    print(f"\n(a) unshaped path, wrk -t1 -c{connections} -d{seconds}s, keep-alive; Mbit/s = req/s x file x 8")
    print(f"{'server':8} {'family':6} {'file':>8} {'req/s':>10} {'Mbit/s':>9}  errors")
    for kind in ("leanweb", "apache", "nginx"):
        v4, v6, port = servers.start(kind)
        for family, host in (("IPv4", v4), ("IPv6", v6)):
            for size in SIZES_KIB:
                result = wrk(net, url(host, port, size), seconds, connections)
                mbps = result["rps"] * size * 1024 * 8 / 1e6
                non2xx = f"non-2xx {result['non2xx']}" if result["non2xx"] else ""
                notes = " ".join(x for x in (result["errors"], non2xx) if x) or "-"
                print(f"{kind:8} {family:6} {size:>5}KiB {result['rps']:>10.1f} {mbps:>9.1f}  {notes}", flush=True)
        servers.stop()


def bottleneck_delay(net: BenchNet, servers: Servers, fetches: int, rounds: int) -> None:
    net.add_bottleneck()
    size = 320
    print(f"\n(b) {size} KiB through {BOTTLENECK_RATE} HTB + {BOTTLENECK_FIFO_PACKETS}-packet FIFO, no other traffic;"
          f" {fetches} fresh connections per server and family, in {rounds} alternating rounds")
    samples: dict[tuple[str, str], list[tuple[float, float]]] = {}
    per_round = max(1, fetches // rounds)
    for _ in range(rounds):
        for kind in ("leanweb", "apache"):
            v4, v6, port = servers.start(kind)
            for family, host in (("IPv4", v4), ("IPv6", v6)):
                samples.setdefault((kind, family), []).extend(
                    curl_times(net, url(host, port, size), per_round, size * 1024))
            servers.stop()
    print(f"{'server':8} {'family':6} {'median time_total ms':>21} {'median GET->last byte ms':>25}"
          f" {'min':>7} {'max':>7}")
    medians = {}
    for (kind, family), times in samples.items():
        totals = [t for t, _ in times]
        medians[(kind, family)] = (statistics.median(totals), statistics.median(g for _, g in times))
        print(f"{kind:8} {family:6} {medians[(kind, family)][0]:>21.2f} {medians[(kind, family)][1]:>25.2f}"
              f" {min(totals):>7.2f} {max(totals):>7.2f}")
    for family, header_bytes in (("IPv4", 40), ("IPv6", 60)):
        lean, apache = medians[("leanweb", family)], medians[("apache", family)]
        # Serialisation floor of the body alone at the bottleneck: MSS-sized frames (no TCP
        # timestamps, as leanweb sends them) of 1500 - headers bytes, 14-byte Ethernet header counted.
        mss = 1500 - header_bytes
        frames = -(-size * 1024 // mss)
        floor_ms = frames * 1514 * 8 / 100e6 * 1000
        print(f"{family}: leanweb/Apache delay ratio {lean[0] / apache[0]:.3f} (time_total), "
              f"{lean[1] / apache[1]:.3f} (GET -> last byte); target <= 1 "
              f"({'met' if lean[0] <= apache[0] else 'not met'}); body serialisation floor {floor_ms:.2f} ms; "
              f"studies: 99/48 = 2.06")
    print(f"bottleneck FIFO drops: {net.bottleneck_drops()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=4, help="wrk duration per case (a)")
    parser.add_argument("--connections", type=int, default=8, help="wrk connections (a)")
    parser.add_argument("--fetches", type=int, default=40, help="fetches per server and family (b)")
    parser.add_argument("--rounds", type=int, default=4, help="alternating rounds the fetches are split into (b)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench_leanweb: needs root (network namespaces)")
    for tool in ("wrk", "curl", "apache2", "nginx", "ethtool", "tc"):
        if not shutil.which(tool) and not Path(f"/usr/sbin/{tool}").exists():
            sys.exit(f"bench_leanweb: {tool} not found")
    # SIGTERM takes the same cleanup path as Ctrl-C.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    work = Path(tempfile.mkdtemp(prefix="bench-leanweb-"))
    try:
        work.chmod(0o755)  # Apache's workers (www-data) read the docroot below it
        docroot = work / "www"
        write_files(docroot, list(SIZES_KIB))
        with BenchNet() as net:
            servers = Servers(net, work, docroot)
            try:
                print(f"namespaces {net.client}, {net.router}, {net.server}; kernel cc of Apache/nginx: cubic; "
                      f"leanweb: no cc, go-back-N, RTO W1/all, min 1 s")
                throughput(net, servers, args.seconds, args.connections)
                bottleneck_delay(net, servers, args.fetches, args.rounds)
            finally:
                servers.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
