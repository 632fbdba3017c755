"""Benchmark: leanweb's `modern` profile (SACK recovery, RACK-TLP, timestamps, CUBIC; Reno
in docs/notes/leantcp-loss-recovery.md's numbers, taken before CUBIC became modern's) against
nginx on kernel TCP (CUBIC) and leanweb's `bare` profile, 320 KiB over a path that drops
5 % of the packets toward the client.

Topology: bench_leanweb.py's client -- router -- server namespaces (names `b<4 hex>-*`,
removed at the end also on error, Ctrl-C or SIGTERM; offloads off on every veth, the bridge
and the TAP). The loss is an iptables/ip6tables `statistic --mode random --probability 0.05`
DROP rule in the router namespace's FORWARD chain for TCP leaving towards the client (this
kernel has no netem), so data segments, SYN-ACKs and FINs from either server are dropped
alike; the client's ACKs are not. nginx's namespace routes carry `congctl cubic`.

Each fetch is a fresh connection (curl, `Connection: close`); the figure is curl's
time_total (connect + GET -> last byte). Fetches alternate between the servers in rounds so
that drifting machine load hits all of them alike. Per server and family: median, min, max;
then the ratios of the medians. Goal: modern <= 2 x nginx.

Run as root after `cargo build --release -p leanweb`:
    .venv/bin/python python/benchmarks/bench_lean_loss.py [--fetches 15] [--bare-fetches 7] [--loss 0.05]
(`make bench-lean-loss` does both). It also prints a loss-free reference (modern and nginx
before the loss rule is added): on this 2-core machine leanweb's own per-frame cost (each TAP
write runs the kernel's forwarding path in its thread) sets a floor the ratio under loss
cannot go below.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_leanweb import (  # the sibling benchmark's topology and nginx runner
    KERNEL4,
    KERNEL6,
    LEAN4,
    LEAN6,
    LEAN_MAC,
    NGINX_PORT,
    ROUTER_S4,
    ROUTER_S6,
    BenchNet,
    NginxServer,
    url,
    wait_http,
)

from congestlab.errors import ToolError
from congestlab.servers.files import write_files
from congestlab.servers.lean import LeanServer

SIZE_KIB = 320
KINDS = ("modern", "nginx", "bare")


def add_loss(net: BenchNet, probability: float) -> None:
    """Random loss on the router's egress towards the client (r1), IPv4 and IPv6."""
    for tool in ("iptables", "ip6tables"):
        net.ns(net.router, tool, "-A", "FORWARD", "-o", "r1", "-p", "tcp", "-m", "statistic", "--mode", "random",
               "--probability", str(probability), "-j", "DROP")


def dropped_packets(net: BenchNet) -> dict[str, int]:
    out = {}
    for tool in ("iptables", "ip6tables"):
        text = net.ns(net.router, tool, "-L", "FORWARD", "-v", "-n", "-x")
        rows = [line.split() for line in text.splitlines() if "DROP" in line]
        out[tool] = sum(int(r[0]) for r in rows)
    return out


def fetch(net: BenchNet, target: str, size_bytes: int, max_time_s: int) -> float:
    """One fresh-connection fetch; time_total in ms."""
    argv = ["curl", "-sS", "--max-time", str(max_time_s), "-H", "Connection: close", "-o", "/dev/null",
            "-w", "%{http_code} %{size_download} %{time_total}", target]
    out = net.ns(net.client, *argv, timeout_s=max_time_s + 10)
    code, size, total = out.split()
    if code != "200" or int(size) != size_bytes:
        raise ToolError(argv, 0, f"bad fetch: {out}")
    return float(total) * 1000


class Server:
    """One of the three servers, started and stopped by this benchmark."""

    def __init__(self, kind: str, net: BenchNet, work: Path, docroot: Path, knobs: dict[str, str] | None = None):
        self.kind, self.net, self.work, self.docroot = kind, net, work, docroot
        self.knobs = knobs or {}
        self.running: LeanServer | NginxServer | None = None
        self.starts = 0

    def start(self) -> tuple[str, str, int]:
        self.net.server_tx_checksum(self.kind == "nginx")
        if self.kind == "nginx":
            server = NginxServer(self.net.server, self.work / "nginx", self.docroot,
                                 [f"{KERNEL4}:{NGINX_PORT}", f"[{KERNEL6}]:{NGINX_PORT}"])
            self.running = server
            server.start()
            return KERNEL4, KERNEL6, NGINX_PORT
        self.starts += 1  # one log per start: leanweb truncates its log file
        server = LeanServer(netns=self.net.server, tap="lw0", bridge="br0", addr4_cidr=f"{LEAN4}/24",
                            addr6_cidr=f"{LEAN6}/64", gateway4=ROUTER_S4, gateway6=ROUTER_S6,
                            root_dir=self.docroot, log_path=self.work / f"lean-{self.kind}-{self.starts}.jsonl",
                            knobs={"mac": LEAN_MAC, "profile": self.kind, **self.knobs})
        self.running = server
        server.start()
        self.net.tap_no_offloads("lw0")
        return LEAN4, LEAN6, 80

    def stop(self) -> None:
        server, self.running = self.running, None
        if server is not None:
            server.stop()


def lean_log_totals(work: Path, kind: str) -> dict[str, int]:
    """Sums of leanweb's per-connection close records over every start of `kind` (warm-up included)."""
    totals = {"connections": 0, "timeouts": 0, "retransmissions": 0, "recoveries": 0, "tail_loss_probes": 0,
              "sack": 0, "timestamps": 0}
    lines = [line for path in sorted(work.glob(f"lean-{kind}-*.jsonl")) for line in path.read_text().splitlines()]
    for line in lines:
        event = json.loads(line)
        if event.get("event") != "close":
            continue
        totals["connections"] += 1
        for key in ("timeouts", "retransmissions", "recoveries", "tail_loss_probes"):
            totals[key] += int(event.get(key, 0))
        totals["sack"] += bool(event.get("sack"))
        totals["timestamps"] += bool(event.get("timestamps"))
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fetches", type=int, default=15, help="fetches per family for modern and nginx (>= 7)")
    parser.add_argument("--bare-fetches", type=int, default=7, help="fetches per family for bare (>= 7; ~5-10 s each)")
    parser.add_argument("--loss", type=float, default=0.05, help="drop probability toward the client")
    parser.add_argument("--rounds", type=int, default=0, help="alternating rounds (default: one per bare fetch)")
    parser.add_argument("--lossless-fetches", type=int, default=7,
                        help="reference fetches per family for modern and nginx before the loss is switched on (0: skip)")
    parser.add_argument("--modern-knob", action="append", default=[], metavar="NAME=VALUE",
                        help="a leanweb knob on top of --profile modern (servers/lean.py KNOB_FLAGS), e.g. gso=off")
    args = parser.parse_args()
    modern_knobs = dict(knob.split("=", 1) for knob in args.modern_knob)
    if min(args.fetches, args.bare_fetches) < 7:
        sys.exit("bench_lean_loss: at least 7 fetches per server and family")
    if os.geteuid() != 0:
        sys.exit("bench_lean_loss: needs root (network namespaces)")
    for tool in ("curl", "nginx", "ethtool", "iptables", "ip6tables"):
        if not shutil.which(tool) and not Path(f"/usr/sbin/{tool}").exists():
            sys.exit(f"bench_lean_loss: {tool} not found")
    # SIGTERM takes the same cleanup path as Ctrl-C.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    rounds = args.rounds or args.bare_fetches
    per_round = {kind: -(-(args.bare_fetches if kind == "bare" else args.fetches) // rounds) for kind in KINDS}
    work = Path(tempfile.mkdtemp(prefix="bench-lean-loss-"))
    size_bytes = SIZE_KIB * 1024
    samples: dict[tuple[str, str], list[float]] = {}
    try:
        work.chmod(0o755)
        docroot = work / "www"
        write_files(docroot, [4, SIZE_KIB])
        with BenchNet() as net:
            print(f"namespaces {net.client}, {net.router}, {net.server}; {SIZE_KIB} KiB, fresh connection per fetch; "
                  f"{args.loss:.0%} random loss toward the client (iptables statistic in {net.router}); "
                  f"nginx on kernel TCP with congctl cubic; leanweb --profile modern {modern_knobs or ''} and --profile bare", flush=True)
            servers = {kind: Server(kind, net, work, docroot, modern_knobs if kind == "modern" else None) for kind in KINDS}
            try:
                # Loss-free warm-up: neighbour caches, page cache, the servers answer at all; and the
                # loss-free reference (the floor each server has on this machine right now).
                lossless: dict[tuple[str, str], list[float]] = {}
                for kind, server in servers.items():
                    v4, v6, port = server.start()
                    for family, host in (("IPv4", v4), ("IPv6", v6)):
                        wait_http(net, url(host, port, 4))
                        if kind != "bare":
                            lossless[(kind, family)] = [fetch(net, url(host, port, SIZE_KIB), size_bytes, 30)
                                                        for _ in range(args.lossless_fetches)]
                    server.stop()
                add_loss(net, args.loss)
                for round_no in range(rounds):
                    for kind, server in servers.items():
                        v4, v6, port = server.start()
                        for family, host in (("IPv4", v4), ("IPv6", v6)):
                            want = args.bare_fetches if kind == "bare" else args.fetches
                            got = samples.setdefault((kind, family), [])
                            for _ in range(min(per_round[kind], want - len(got))):
                                got.append(fetch(net, url(host, port, SIZE_KIB), size_bytes, 120))
                        server.stop()
                    print(f"round {round_no + 1}/{rounds} done", flush=True)
                drops = dropped_packets(net)
            finally:
                for server in servers.values():
                    server.stop()
        print(f"\n{'server':8} {'family':6} {'n':>3} {'median ms':>10} {'min ms':>9} {'max ms':>9}")
        medians = {}
        for (kind, family), times in sorted(samples.items()):
            medians[(kind, family)] = statistics.median(times)
            print(f"{kind:8} {family:6} {len(times):>3} {medians[(kind, family)]:>10.2f} {min(times):>9.2f} "
                  f"{max(times):>9.2f}")
        if args.lossless_fetches:
            print(f"\nloss-free reference ({args.lossless_fetches} fetches each, before the loss rule):")
            for family in ("IPv4", "IPv6"):
                m, n = (statistics.median(lossless[(k, family)]) for k in ("modern", "nginx"))
                print(f"{family}: modern {m:.2f} ms, nginx {n:.2f} ms, modern/nginx {m / n:.2f}")
        print()
        for family in ("IPv4", "IPv6"):
            modern, nginx, bare = (medians[(k, family)] for k in ("modern", "nginx", "bare"))
            verdict = "met" if modern <= 2 * nginx else "NOT met"
            print(f"{family}: modern/nginx {modern / nginx:.2f} (goal <= 2: {verdict}); bare/nginx {bare / nginx:.1f}; "
                  f"bare/modern {bare / modern:.1f}")
        for kind in ("modern", "bare"):
            print(f"leanweb {kind} log totals: {lean_log_totals(work, kind)}")
        print(f"packets dropped toward the client: {drops}")
        with open("/proc/loadavg") as f:
            print(f"load average at the end (2 cores, shared): {f.read().split()[:3]}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
