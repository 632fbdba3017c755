"""Benchmark: the streaming Rust analyzer (crates/traceanalyze) against the dpkt reference
and tshark, on a capture this script makes.

Capture (namespaces made here, names `ta<6 hex>-srv` / `ta<6 hex>-cli`, removed at the end,
also on an error or Ctrl-C; traffic only on their veth pair):

    client ns  10.77.0.2  --- veth (TSO/GSO/GRO off) ---  10.77.0.1  server ns
               iperf3 -c -R (the server sends)                        iperf3 -s, tcpdump -s 128

`iperf3 -R -n BYTES -b 1000M` makes one bulk transfer at the server port 5201; tcpdump in the server
namespace captures it with a 128-byte snaplen, as congestlab's capture does
(python/src/congestlab/capture/tcpdump.py). The capture must hold at least 1 million frames.

Timed, one after another on the same file:
  - traceanalyze (the binary, summary + RTT samples written to files), under /usr/bin/time
    for its peak RSS; and `measure_pcap` end to end (binary + Python reading the samples);
  - the dpkt reference, `measure_pcap(..., backend="dpkt")`, in a child Python (peak RSS too);
  - tshark extracting the retransmission flags and ACK RTTs (`-T fields`), to /dev/null.
Printed: frames/s of each, the ratios traceanalyze/tshark (goal >= 10) and traceanalyze/dpkt
(goal >= 30), peak RSS (goal <= 100 MB), and whether the two backends agree on the capture.

The segment trace's cost: traceanalyze with and without `--trace` of every connection,
interleaved (`--series-rounds` each), the medians' frames/s ratio (goal >= 0.8).

Then a 10x capture for traceanalyze alone: the same file 10 times, each copy shifted in time
after the one before (editcap -t), concatenated (mergecap -a) — the same 4-tuples reused
after their close, as a server sees new connections from recycled ports.

Run as root after `cargo build --release -p traceanalyze`:
    .venv/bin/python python/benchmarks/bench_analyzer.py [--bytes 2000M] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from congestlab.errors import ToolError
from congestlab.paths import REPO_ROOT, rust_binary

SERVER_IP, CLIENT_IP = "10.77.0.1", "10.77.0.2"
PORT = 5201
SNAPLEN_BYTES = 128
RATE = "1000M"
MIN_FRAMES = 1_000_000
COPIES = 10
TSHARK_FIELDS = ["frame.time_epoch", "tcp.stream", "tcp.analysis.retransmission", "tcp.analysis.fast_retransmission",
                 "tcp.analysis.spurious_retransmission", "tcp.analysis.ack_rtt"]


def sh(*argv: str, timeout_s: float = 60, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s)
    if check and proc.returncode != 0:
        raise ToolError(list(argv), proc.returncode, proc.stderr)
    return proc


class VethPair:
    """Two namespaces joined by one veth pair; everything removed on exit."""

    def __init__(self) -> None:
        p = f"ta{uuid.uuid4().hex[:6]}"
        self.server, self.client = f"{p}-srv", f"{p}-cli"
        self.server_if, self.client_if = f"{p}s", f"{p}c"
        self.pids: list[int] = []

    def __enter__(self) -> VethPair:
        try:
            sh("ip", "netns", "add", self.server)
            sh("ip", "netns", "add", self.client)
            sh("ip", "link", "add", self.server_if, "netns", self.server, "type", "veth",
               "peer", "name", self.client_if, "netns", self.client)
            for ns, ifc, addr in ((self.server, self.server_if, SERVER_IP), (self.client, self.client_if, CLIENT_IP)):
                self.run(ns, "ip", "addr", "add", f"{addr}/24", "dev", ifc)
                self.run(ns, "ip", "link", "set", ifc, "up")
                self.run(ns, "ip", "link", "set", "lo", "up")
                self.run(ns, "ethtool", "-K", ifc, "tso", "off", "gso", "off", "gro", "off")
        except BaseException:
            self.teardown()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.teardown()

    def run(self, ns: str, *argv: str, **kw) -> subprocess.CompletedProcess:
        return sh("ip", "netns", "exec", ns, *argv, **kw)

    def spawn(self, ns: str, *argv: str, **kw) -> subprocess.Popen:
        proc = subprocess.Popen(["ip", "netns", "exec", ns, *argv], **kw)
        self.pids.append(proc.pid)
        return proc

    def teardown(self) -> None:
        for ns in (self.server, self.client):
            out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout
            for pid in [int(p) for p in out.split()] + self.pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        for ns in (self.server, self.client):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def make_capture(pcap: Path, nbytes: str) -> dict:
    with VethPair() as net:
        server = net.spawn(net.server, "iperf3", "-s", "-1", "-B", SERVER_IP, "-p", str(PORT),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        dump = net.spawn(net.server, "tcpdump", "-i", net.server_if, "-s", str(SNAPLEN_BYTES), "-n", "-U",
                         "--immediate-mode", "-Z", "root", "-B", "65536", "-w", str(pcap), "tcp", "port", str(PORT),
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        line = dump.stderr.readline()
        if "listening on" not in line:
            raise ToolError(["tcpdump"], dump.poll(), line)
        time.sleep(0.5)  # iperf3 -s binds
        started = time.monotonic()
        # paced at 1 Gbit/s: faster, tcpdump starts dropping (and may miss the FINs)
        client = net.run(net.client, "iperf3", "-c", SERVER_IP, "-p", str(PORT), "-R", "-n", nbytes, "-b", RATE, "-J",
                         timeout_s=600)
        transfer_s = time.monotonic() - started
        time.sleep(0.3)
        dump.send_signal(signal.SIGINT)
        _, err = dump.communicate(timeout=30)
        server.wait(timeout=10)
    report = json.loads(client.stdout)["end"]
    captured = re.search(r"(\d+) packets captured", err)
    dropped = re.search(r"(\d+) packets dropped by kernel", err)
    return {"transfer_s": transfer_s, "sender_mbps": report["sum_sent"]["bits_per_second"] / 1e6,
            "sender_retransmits": report["sum_sent"].get("retransmits"),
            "captured": int(captured.group(1)) if captured else None,
            "dropped_by_kernel": int(dropped.group(1)) if dropped else None}


class Timing:
    def __init__(self, wall_s: float, cpu_s: float, rss_mb: float) -> None:
        self.wall_s, self.cpu_s, self.rss_mb = wall_s, cpu_s, rss_mb


def timed(argv: list[str], stdout=subprocess.DEVNULL) -> tuple[Timing, subprocess.CompletedProcess]:
    """Wall time, CPU time (user + system) and peak RSS of one child under /usr/bin/time -v.
    CPU time is the steadier number on a machine shared with other work."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as tf:
        started = time.monotonic()
        proc = subprocess.run(["/usr/bin/time", "-v", "-o", tf.name, *argv], stdout=stdout,
                              stderr=subprocess.PIPE, text=True)
        wall = time.monotonic() - started
        if proc.returncode != 0:
            raise ToolError(argv, proc.returncode, proc.stderr[-2000:])
        report = tf.read()
    rss_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", report).group(1))
    cpu_s = sum(float(re.search(rf"{what} time \(seconds\): ([\d.]+)", report).group(1)) for what in ("User", "System"))
    return Timing(wall, max(cpu_s, 0.01), rss_kb / 1024), proc  # /usr/bin/time counts in 10 ms


def analyzer(pcap: Path, out: Path, trace_ports: list[int] | None = None) -> tuple[Timing, dict]:
    """With `trace_ports`, also the segment trace of those client ports' connections."""
    argv = [str(rust_binary("traceanalyze")), str(pcap), "--server-port", str(PORT),
            "--summary", str(out / "summary.ndjson"), "--rtt-samples", str(out / "rtt.csv")]
    if trace_ports:
        argv += ["--trace", str(out / "trace.csv"), "--client-ports", ",".join(map(str, trace_ports))]
    timing, _ = timed(argv)
    records = [json.loads(line) for line in (out / "summary.ndjson").read_text().splitlines()]
    return timing, next(r for r in records if r["record"] == "stats")


DPKT_CHILD = """
import json, sys, time
from pathlib import Path
from congestlab.analysis.trace import measure_pcap
m = measure_pcap(Path(sys.argv[1]), int(sys.argv[2]), backend=sys.argv[3])
print(json.dumps({"frames": m.read_stats.frames, "conns": [
    [c.key, c.retransmissions, c.metrics and [c.metrics.delay_ms, c.metrics.bytes_nrt, c.metrics.bytes_captured,
     c.metrics.payload_bytes, len(c.metrics.rtt_samples_ms), sum(c.metrics.rtt_samples_ms)]]
    for c in m.connections]}))
"""


def python_backend(pcap: Path, backend: str) -> tuple[Timing, dict]:
    timing, proc = timed([sys.executable, "-c", DPKT_CHILD, str(pcap), str(PORT), backend], stdout=subprocess.PIPE)
    return timing, json.loads(proc.stdout)


def agree(a: dict, b: dict) -> list[str]:
    """Counts exactly, times (delay, RTT mean) within 1 µs."""
    problems = []
    if a["frames"] != b["frames"] or len(a["conns"]) != len(b["conns"]):
        return [f"frames {a['frames']} vs {b['frames']}, connections {len(a['conns'])} vs {len(b['conns'])}"]
    for x, y in zip(a["conns"], b["conns"]):
        if x[:2] != y[:2] or (x[2] is None) != (y[2] is None):
            problems.append(f"{x[:2]} vs {y[:2]}")
        elif x[2] is not None:
            (dx, *cx, nx, sx), (dy, *cy, ny, sy) = x[2], y[2]
            if cx != cy or nx != ny or abs(dx - dy) > 1e-3 or (nx and abs(sx / nx - sy / ny) > 1e-3):
                problems.append(f"{x[0]}: {x[2]} vs {y[2]}")
    return problems


def series_cost(pcap: Path, out: Path, rounds: int) -> None:
    """traceanalyze without the segment trace, with the trace of the capture's smallest
    connection (iperf3's control connection: a short request on the port of a bulk transfer,
    as a run traces its measured GETs beside the load) and with the trace of every connection
    (the worst case: a line per frame), interleaved, `rounds` times each; the medians'
    frames/s ratios to "off" (goal: >= 0.8)."""
    conns = [json.loads(line) for line in (out / "summary.ndjson").read_text().splitlines() if '"connection"' in line]
    smallest = min(conns, key=lambda c: c["segments_from_client"] + c["segments_from_server"])
    arms = {"off": None, "GET-sized connection": [smallest["client_port"]],
            "every connection": sorted({c["client_port"] for c in conns})}
    runs: dict[str, list] = {name: [] for name in arms}
    sizes: dict[str, float] = {}
    load = os.getloadavg()[0]
    for _ in range(rounds):
        for name, ports in arms.items():
            runs[name].append(analyzer(pcap, out, ports)[0])
            if ports:
                sizes[name] = (out / "trace.csv").stat().st_size / 1e6
                os.unlink(out / "trace.csv")
    frames = json.loads((out / "summary.ndjson").read_text().splitlines()[-1])["frames"]

    def median(xs):
        return sorted(xs)[len(xs) // 2]
    print(f"\nsegment trace (--trace), {rounds} interleaved runs per arm, load average {load:.1f} before, "
          f"{os.getloadavg()[0]:.1f} after")
    off_wall, off_cpu = median([t.wall_s for t in runs["off"]]), median([t.cpu_s for t in runs["off"]])
    for name, ports in arms.items():
        wall, cpu = median([t.wall_s for t in runs[name]]), median([t.cpu_s for t in runs[name]])
        what = f"trace {name} (client ports {ports}, {sizes.get(name, 0):.1f} MB)" if ports else "trace off"
        print(f"  {what}: {frames / wall:,.0f} frames/s wall, {frames / cpu:,.0f} frames/CPU s; "
              f"on/off {off_wall / wall:.3f} wall, {off_cpu / cpu:.3f} CPU")


def tshark(pcap: Path) -> Timing:
    argv = ["tshark", "-r", str(pcap), "-n", "-T", "fields", *sum((["-e", f] for f in TSHARK_FIELDS), [])]
    timing, _ = timed(argv)
    return timing


def repeat_capture(pcap: Path, out: Path, copies: int, span_s: float) -> Path:
    parts = []
    for i in range(copies):
        part = out / f"part{i}.pcap"
        sh("editcap", "-t", f"{i * (span_s + 1.0):.6f}", str(pcap), str(part), timeout_s=600)
        parts.append(str(part))
    big = out / f"x{copies}.pcap"
    sh("mergecap", "-a", "-F", "pcap", "-w", str(big), *parts, timeout_s=900)
    for part in parts:
        os.unlink(part)
    return big


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bytes", default="2000M", help="iperf3 -n: bytes the server sends (default 2000M)")
    ap.add_argument("--keep", type=Path, help="keep the captures and outputs in this directory")
    ap.add_argument("--skip-10x", action="store_true", help="no 10x capture")
    ap.add_argument("--only-series", action="store_true", help="only the segment trace's cost (and the capture)")
    ap.add_argument("--series-rounds", type=int, default=5, help="interleaved runs per arm of the trace cost")
    ap.add_argument("--min-frames", type=int, default=MIN_FRAMES, help=argparse.SUPPRESS)  # smoke runs
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("bench_analyzer: needs root (network namespaces)", file=sys.stderr)
        return 2
    for tool in ("iperf3", "tcpdump", "tshark", "editcap", "mergecap", "ethtool"):
        if shutil.which(tool) is None:
            print(f"bench_analyzer: {tool} is missing (`make install` installs it)", file=sys.stderr)
            return 2
    if not Path("/usr/bin/time").exists():
        print("bench_analyzer: /usr/bin/time is missing (apt-get install time)", file=sys.stderr)
        return 2
    rust_binary("traceanalyze")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the finally blocks
    work = Path(tempfile.mkdtemp(prefix="bench-analyzer-", dir=args.keep))
    try:
        pcap = work / "iperf3.pcap"
        cap = make_capture(pcap, args.bytes)
        print(f"capture: iperf3 -R -n {args.bytes} -b {RATE} over veth, {cap['sender_mbps']:.0f} Mbit/s, "
              f"{cap['transfer_s']:.1f} s, sender retransmits {cap['sender_retransmits']}, "
              f"tcpdump captured {cap['captured']} (dropped by kernel {cap['dropped_by_kernel']}), "
              f"{pcap.stat().st_size / 1e6:.0f} MB")
        new, stats = analyzer(pcap, work)
        frames = stats["frames"]
        if frames < args.min_frames:
            print(f"bench_analyzer: only {frames} frames captured (< {args.min_frames}); raise --bytes",
                  file=sys.stderr)
            return 1
        series_cost(pcap, work, args.series_rounds)
        if args.only_series:
            return 0
        rust, rust_res = python_backend(pcap, "rust")
        dpkt, dpkt_res = python_backend(pcap, "dpkt")
        tsh = tshark(pcap)
        print(f"\n{frames} frames ({stats['tcp_segments']} TCP segments, {stats['connections']} connections, "
              f"skipped {stats['skipped']}, truncated {stats['truncated']})")
        print(f"load average before: {os.getloadavg()[0]:.1f} (2 cores; wall times stretch with it, CPU times less)")
        print(f"{'':34}{'wall s':>9}{'frames/s':>13}{'CPU s':>9}{'frames/CPU s':>14}{'peak RSS MB':>13}")
        rows = [("traceanalyze (binary)", new), ("measure_pcap rust (end to end)", rust),
                ("measure_pcap dpkt (reference)", dpkt), ("tshark -T fields", tsh)]
        for name, t in rows:
            print(f"{name:34}{t.wall_s:9.2f}{frames / t.wall_s:13,.0f}{t.cpu_s:9.2f}{frames / t.cpu_s:14,.0f}"
                  f"{t.rss_mb:13.1f}")
        print(f"\ntraceanalyze / tshark: {tsh.wall_s / new.wall_s:.1f}x wall, {tsh.cpu_s / new.cpu_s:.1f}x CPU (goal >= 10)")
        print(f"traceanalyze / dpkt:   {dpkt.wall_s / new.wall_s:.1f}x wall, {dpkt.cpu_s / new.cpu_s:.1f}x CPU (goal >= 30)")
        print(f"traceanalyze peak RSS: {new.rss_mb:.1f} MB (goal <= 100)")
        problems = agree(rust_res, dpkt_res)
        print(f"backends agree on the capture: {'yes' if not problems else 'NO: ' + '; '.join(problems[:5])}")
        if not args.skip_10x:
            first = json.loads((work / "summary.ndjson").read_text().splitlines()[1])["first_ts_s"]
            span_s = max(json.loads(line).get("last_ts_s", 0) for line in
                         (work / "summary.ndjson").read_text().splitlines()) - first
            os.unlink(work / "rtt.csv")
            big = repeat_capture(pcap, work, COPIES, span_s)
            big_t, big_stats = analyzer(big, work)
            print(f"\n{COPIES}x capture (editcap -t, mergecap -a): {big_stats['frames']} frames, "
                  f"{big_stats['connections']} connections, {big.stat().st_size / 1e9:.2f} GB: traceanalyze "
                  f"{big_t.wall_s:.2f} s wall ({big_stats['frames'] / big_t.wall_s:,.0f} frames/s), "
                  f"{big_t.cpu_s:.2f} s CPU, peak RSS {big_t.rss_mb:.1f} MB (goal <= 100)")
        return 0 if not problems else 1
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    os.chdir(REPO_ROOT)
    sys.exit(main())
