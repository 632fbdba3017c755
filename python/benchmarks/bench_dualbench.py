"""dualbench vs wrk against the same nginx on loopback (a 4 KB file), and dualbench's
connection-establishment times vs the kernel's own handshake RTT (`ss -ti`).

    sudo .venv/bin/python python/benchmarks/bench_dualbench.py [--seconds 5] [--connections 100] [--threads 2]

nginx runs with its own config, prefix, pid file and port, started and stopped by PID.
Both clients use keep-alive (wrk always does), the same connections and threads.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from congestlab.paths import rust_binary

FILE = "4KiB.bin"


def free_port() -> int:
    with socket.socket(socket.AF_INET6) as s:
        s.bind(("::1", 0))
        return s.getsockname()[1]


def nginx_conf(prefix: Path, docroot: Path, port: int, workers: int) -> str:
    return f"""worker_processes {workers};
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 8192; }}
http {{
    access_log off;
    sendfile on;
    keepalive_requests 10000000;
    keepalive_timeout 60s;
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        listen [::1]:{port} backlog=4096;
        root {docroot};
    }}
}}
"""


def start_nginx(prefix: Path, docroot: Path, port: int, workers: int) -> subprocess.Popen:
    conf = prefix / "nginx.conf"
    conf.write_text(nginx_conf(prefix, docroot, port, workers))
    proc = subprocess.Popen(["nginx", "-p", str(prefix), "-c", str(conf), "-e", str(prefix / "error.log"),
                             "-g", "daemon off;"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"nginx exited: {proc.stderr.read().decode(errors='replace')}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("nginx did not start listening")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)  # nginx master: fast shutdown, ends its workers
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_wrk(url: str, connections: int, threads: int, seconds: int) -> tuple[float, float]:
    """(req/s, client CPU seconds)"""
    cpu0 = children_cpu_s()
    out = subprocess.run(["wrk", "-t", str(threads), "-c", str(connections), "-d", f"{seconds}s", url],
                         capture_output=True, text=True, timeout=seconds + 30, check=True).stdout
    match = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if not match:
        raise RuntimeError(f"no Requests/sec in wrk output:\n{out}")
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)|Socket errors: (.*)", out)
    if errors:
        print(f"  wrk reported: {errors.group(0)}")
    return float(match.group(1)), children_cpu_s() - cpu0


def run_dualbench_load(binary: Path, url: str, connections: int, threads: int, seconds: int, keepalive: bool,
                       work: Path) -> tuple[dict, float]:
    """(the 'all' family of the report, client CPU seconds)"""
    cpu0 = children_cpu_s()
    out = work / f"load-{keepalive}.json"
    argv = [str(binary), "load", "--url", url, "--parallel", str(connections), "--threads", str(threads),
            "--seconds", str(seconds), "--quiet", "--json", str(out)] + (["--keepalive"] if keepalive else [])
    subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 60, check=True)
    return json.loads(out.read_text())["families"]["all"], children_cpu_s() - cpu0


def dualbench_connect_us(binary: Path, port: int, work: Path, requests: int = 2000) -> dict[str, dict]:
    """Sequential (concurrency 1) fetches: the handshake alone, no queueing."""
    out = {}
    for fam, addr in (("v4", "127.0.0.1"), ("v6", "::1")):
        addresses = work / f"addr-{fam}.txt"
        addresses.write_text(addr + "\n")
        js = work / f"anma-{fam}.json"
        subprocess.run([str(binary), "anma", "--addresses", str(addresses), "--port", str(port), "--path", f"/{FILE}",
                        "--requests", str(requests), "--concurrency", "1", "--threads", "1", "--json", str(js)],
                       capture_output=True, text=True, timeout=120, check=True)
        out[fam] = json.loads(js.read_text())["families"][fam]["connect_us"]
    return out


def kernel_handshake_rtt_us(port: int, n: int = 50) -> dict[str, tuple[float, float]]:
    """(median kernel rtt from `ss -ti`, median connect() time) of n idle fresh connections:
    on a client socket the kernel's first RTT sample is the SYN -> SYN/ACK exchange."""
    out = {}
    for fam, af, addr in (("v4", socket.AF_INET, "127.0.0.1"), ("v6", socket.AF_INET6, "::1")):
        socks, connect_us = [], []
        try:
            for _ in range(n):
                s = socket.socket(af, socket.SOCK_STREAM)
                t0 = time.perf_counter_ns()
                s.connect((addr, port))
                connect_us.append((time.perf_counter_ns() - t0) / 1e3)
                socks.append(s)
            dst = f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"
            ss = subprocess.run(["ss", "-tinH", "state", "established", "dst", dst], capture_output=True,
                                text=True, timeout=10).stdout
            rtts = [float(m) * 1000 for m in re.findall(r"\brtt:([\d.]+)/", ss)]
        finally:
            for s in socks:
                s.close()
        out[fam] = (statistics.median(rtts) if rtts else float("nan"), statistics.median(connect_us))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=5, help="interleaved wrk/dualbench pairs (the machine is shared)")
    ap.add_argument("--connections", type=int, default=100)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--nginx-workers", type=int, default=1)
    args = ap.parse_args()
    for tool in ("nginx", "wrk", "ss"):
        if not shutil.which(tool):
            print(f"bench_dualbench: {tool} not installed", file=sys.stderr)
            return 4
    binary = rust_binary("dualbench")
    work = Path(tempfile.mkdtemp(prefix="bench-dualbench-"))
    try:
        docroot = work / "www"
        docroot.mkdir()
        (docroot / FILE).write_bytes(os.urandom(4096))
        for p in (work, docroot, docroot / FILE):
            p.chmod(0o755)  # nginx workers run as nobody
        port = free_port()
        nginx = start_nginx(work, docroot, port, args.nginx_workers)
        try:
            url = f"http://127.0.0.1:{port}/{FILE}"
            print(f"nginx {args.nginx_workers} worker(s) on 127.0.0.1:{port}, 4 KB file; "
                  f"{args.connections} connections, {args.threads} threads, {args.seconds} s each")
            ratios, cpu = [], []
            for i in range(args.rounds):
                wrk_rps, wrk_cpu = run_wrk(url, args.connections, args.threads, args.seconds)
                db, db_cpu = run_dualbench_load(binary, url, args.connections, args.threads, args.seconds, True, work)
                db_rps = db["normal_per_s"]
                bad = db["requests"] - db["normal"]
                ratios.append(db_rps / wrk_rps)
                wrk_us = wrk_cpu / (wrk_rps * args.seconds) * 1e6
                db_us = db_cpu / max(db["requests"], 1) * 1e6
                cpu.append((wrk_us, db_us))
                print(f"  round {i + 1}: wrk {wrk_rps:9.0f} req/s | dualbench load --keepalive {db_rps:9.0f} req/s "
                      f"({bad} not NORMAL) | ratio {db_rps / wrk_rps:.3f} | client CPU per request: wrk "
                      f"{wrk_us:.1f} µs, dualbench {db_us:.1f} µs")
            print(f"  median ratio dualbench/wrk over {args.rounds} rounds: {statistics.median(ratios):.3f} "
                  f"(min {min(ratios):.3f}, max {max(ratios):.3f}); median client CPU per request: wrk "
                  f"{statistics.median(c[0] for c in cpu):.1f} µs, dualbench {statistics.median(c[1] for c in cpu):.1f} µs")
            fresh, _ = run_dualbench_load(binary, url, args.connections, args.threads, args.seconds, False, work)
            print(f"  dualbench load, new connection per fetch (http_load style): {fresh['normal_per_s']:.0f} req/s, "
                  f"connect p50 {fresh['connect_us']['p50']:.1f} µs")
            est = dualbench_connect_us(binary, port, work)
            kernel = kernel_handshake_rtt_us(port)
            print("connection establishment on loopback (sequential connects):")
            for fam in ("v4", "v6"):
                e = est[fam]
                k_rtt, py_connect = kernel[fam]
                print(f"  {fam}: dualbench connect avg {e['avg']:.1f} p50 {e['p50']:.1f} p99 {e['p99']:.1f} µs | "
                      f"kernel handshake rtt (ss -ti) median {k_rtt:.1f} µs | python connect() median {py_connect:.1f} µs")
        finally:
            stop(nginx)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
