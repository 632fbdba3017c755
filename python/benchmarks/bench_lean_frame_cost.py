"""Benchmark: leanweb's cost per loss-free 320 KiB fetch against nginx's, and where it goes.

Topology: bench_leanweb.py's client -- router -- server namespaces (removed at the end, also on
error, Ctrl-C or SIGTERM). `--fetches` fresh-connection fetches (curl, Connection: close) from
`leanweb --profile modern`, then as many from nginx on kernel TCP, in one run; prints both
medians, their ratio, leanweb's CPU time per fetch (utime + stime from /proc/PID/stat: 10 ms
clock ticks, so +-10 ms / fetches) and the load average. With `--perf FILE`, `perf record -g`
samples leanweb during its fetches (read it with `perf report -i FILE --children --sort sym`).
Numbers: docs/notes/leantcp-sending-speed.md.

Run as root after `cargo build --release -p leanweb`:
    .venv/bin/python python/benchmarks/bench_lean_frame_cost.py [--fetches 40] [--perf FILE]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_lean_loss import SIZE_KIB, fetch
from bench_leanweb import (
    KERNEL4,
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

from congestlab.servers.files import write_files
from congestlab.servers.lean import LeanServer


def cpu_seconds(pid: int) -> float:
    """utime + stime of `pid` (fields 14 and 15 of /proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def minor_faults(pid: int) -> int:
    """minflt of `pid` (field 10 of /proc/PID/stat): pages first touched, e.g. after the
    allocator gave memory back to the kernel."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[7])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fetches", type=int, default=40)
    parser.add_argument("--perf", type=Path, help="perf record -g leanweb during its fetches into this file")
    parser.add_argument("--knob", action="append", default=[], metavar="NAME=VALUE",
                        help="a leanweb knob on top of --profile modern (servers/lean.py KNOB_FLAGS), e.g. gso=off")
    args = parser.parse_args()
    knobs = dict(knob.split("=", 1) for knob in args.knob)
    if args.fetches < 7:
        sys.exit("bench_lean_frame_cost: at least 7 fetches")
    if os.geteuid() != 0:
        sys.exit("bench_lean_frame_cost: needs root (network namespaces)")
    if args.perf and not shutil.which("perf"):
        sys.exit("bench_lean_frame_cost: perf not found")
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    work = Path(tempfile.mkdtemp(prefix="bench-lean-frame-"))
    size_bytes = SIZE_KIB * 1024
    try:
        work.chmod(0o755)
        docroot = work / "www"
        write_files(docroot, [4, SIZE_KIB])
        with BenchNet() as net:
            lean = LeanServer(netns=net.server, tap="lw0", bridge="br0", addr4_cidr=f"{LEAN4}/24",
                              addr6_cidr=f"{LEAN6}/64", gateway4=ROUTER_S4, gateway6=ROUTER_S6, root_dir=docroot,
                              log_path=work / "lean.jsonl", knobs={"mac": LEAN_MAC, "profile": "modern", **knobs})
            perf = None
            try:
                net.server_tx_checksum(False)
                lean.start()
                net.tap_no_offloads("lw0")
                wait_http(net, url(LEAN4, 80, 4))
                for _ in range(3):  # warm-up: neighbour caches, page cache
                    fetch(net, url(LEAN4, 80, SIZE_KIB), size_bytes, 30)
                pid = lean.pids[0]
                if args.perf:
                    perf = subprocess.Popen(["perf", "record", "-q", "-g", "-o", str(args.perf), "-p", str(pid)],
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                cpu_before, faults_before = cpu_seconds(pid), minor_faults(pid)
                lean_ms = [fetch(net, url(LEAN4, 80, SIZE_KIB), size_bytes, 30) for _ in range(args.fetches)]
                lean_cpu_ms = (cpu_seconds(pid) - cpu_before) / args.fetches * 1000
                faults = (minor_faults(pid) - faults_before) / args.fetches
            finally:
                if perf is not None:
                    perf.send_signal(signal.SIGINT)
                    perf.wait(timeout=60)
                lean.stop()
            nginx = NginxServer(net.server, work / "nginx", docroot, [f"{KERNEL4}:{NGINX_PORT}"])
            try:
                net.server_tx_checksum(True)
                nginx.start()
                wait_http(net, url(KERNEL4, NGINX_PORT, 4))
                nginx_ms = [fetch(net, url(KERNEL4, NGINX_PORT, SIZE_KIB), size_bytes, 30)
                            for _ in range(args.fetches)]
            finally:
                nginx.stop()
        m, n = statistics.median(lean_ms), statistics.median(nginx_ms)
        print(f"{SIZE_KIB} KiB loss-free, {args.fetches} fetches each (IPv4): modern median {m:.2f} ms "
              f"(min {min(lean_ms):.2f}), nginx median {n:.2f} ms (min {min(nginx_ms):.2f}), modern/nginx {m / n:.2f}; "
              f"leanweb CPU {lean_cpu_ms:.2f} ms per fetch, {faults:.0f} minor page faults per fetch"
              + (f" (knobs {knobs})" if knobs else ""))
        print(f"load average at the end (2 cores, shared): {os.getloadavg()}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
