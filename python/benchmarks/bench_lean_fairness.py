"""Benchmark: how leantcp's congestion controls share a 100 Mbit/s bottleneck.

Pairings, each two bulk flows started together through the same bottleneck, for
`--seconds` (30) and `--repetitions` (3):
  modern-modern      two leanweb `modern` (CUBIC) flows          goal: each 50 +- 5 %
  modern-cubic       leanweb `modern` vs kernel CUBIC (iperf3)    goal: lean 40-60 %
  compound-compound  leanweb `--cc compound` (else modern) vs kernel Compound (the BPF
                     struct_ops of bpf/ctcp.bpf.c, registered under a unique name and
                     removed at the end)                          goal: lean 40-60 %
  nocc-cubic         reference: leanweb modern with `--cc none` vs kernel CUBIC: bounded
                     only by its send buffer and the client's window
  nohystart-cubic    reference: leanweb modern without HyStart++ (`hystart = off`) vs kernel
                     CUBIC (whose HyStart is on): standard slow start fills the FIFO
  fixedbuf-cubic     reference: leanweb modern with its send buffer fixed at 256 KiB
                     (`send_buffer_max_bytes = 0`, no autotuning) vs kernel CUBIC: the
                     buffer caps the lean flow's bytes in flight, i.e. its rate once CUBIC
                     has filled the FIFO (RTT ~120 ms: 256 KiB / 120 ms = 17 Mbit/s)
  cubic-cubic        reference: two kernel CUBIC flows (iperf3 from two hosts): what Linux
                     gets against itself in the same time, the yardstick for the goals
  compoundl0-compound reference: compound-compound with the lean slow start crediting every
                     acknowledged segment (`abc_limit_segments = 0`, as the kernel's
                     tcp_slow_start) instead of RFC 3465's 2 per ACK
  compoundnogso-compound reference: compound-compound with leanweb's GSO super-frames off
                     (`gso = off`): one TAP write per segment, the lean flow's bursts as the
                     kernel hands them on without GSO segmentation at the veth
  kcompound-kcompound reference: the same with two kernel Compound (BPF) flows
  modern-alone       reference: one leanweb `modern` flow alone on the bottleneck: its
                     rate ceiling on this machine (a share goal it cannot reach alone
                     is out of its controller's hands)

Topology (congestlab.testbed, one Testbed for the whole run, names `cl<hex>-*`): the server
side switch `ss` holds two user-stack nodes (leanweb on a TAP each) and a kernel host; the
router's link to the client switch `sc` is the studies' bottleneck (HTB 100 Mbit/s, a
1000-packet FIFO). A lean flow is curl in the client fetching a 400 MiB file with
--max-time SECONDS; a kernel flow is iperf3 from the kernel host to an iperf3 server in the
client, -t SECONDS, -C the algorithm. The whole-run share is the receivers' byte counts (curl's
size_download, iperf3's sum_received.bytes): flow A / (A + B). Beside it, the client's
`ss -tinH` is sampled once a second (each flow's connection by its endpoint: the lean node's
port 80, the iperf3 server's port; fairness_share.py) for the per-second shares and the
steady-state share: A's share of the bytes received after a start-up of `--settle-s` (a
third of the run unless given), with Jain's fairness index over that window; the summary
checks the goal on both (the exit status on the whole-run share, as before). Everything is
torn down on exit, Ctrl-C and SIGTERM.

Run as root after `make build` (leanweb release binary, bpf/build/ctcp.bpf.o's sources):
    .venv/bin/python python/benchmarks/bench_lean_fairness.py [--seconds 30] [--repetitions 3]
        [--pairings modern-modern,modern-cubic,compound-compound,cubic-cubic,...] [--settle-s S]
        [--json OUT] [--trace DIR]
--json OUT also writes OUT's stem + .shares.png: A's share per second, a panel per pairing.
(`make bench-lean-fairness`). Numbers and load averages: docs/notes/leantcp-congestion-control.md,
docs/notes/leantcp-sending-speed.md (the references).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from congestlab.cc import registry
from congestlab.errors import CongestlabError
from congestlab.paths import REPO_ROOT
from congestlab.servers.files import file_name
from congestlab.servers.factory import make_server
from congestlab.spec.models import TopologySpec
from congestlab.spec.servers import ServerSpec
from congestlab.testbed import Testbed
import fairness_share
from fairness_trace import Tracer, sampler_argv
from lean_fairness_report import pct, plot_shares, print_summary

def bulk_file_kib(seconds: float) -> int:
    """A file a lean flow cannot finish within the run: 100 Mbit/s x seconds, 10 % spare, at
    least 400 MiB (whole MiB: write_bulk_file writes 1 MiB chunks)."""
    return max(400, int(seconds * 100e6 / 8 * 1.1 / (1 << 20)) + 1) * 1024
IPERF_PORT = 5201
SHARE_SAMPLE_S = 1.0  # the client's `ss -tinH` once a second: the per-second shares

TOPOLOGY = {
    "switches": [{"name": "sc", "subnet4": "10.61.0.0/24", "subnet6": "fd00:61::/64"},
                 {"name": "ss", "subnet4": "10.62.0.0/24", "subnet6": "fd00:62::/64"}],
    "nodes": [
        {"name": "r", "kind": "router",
         "links": [{"switch": "sc", "host_id": 1, "rate_bps": 100_000_000, "queue_packets": 1000},
                   {"switch": "ss", "host_id": 1}]},
        {"name": "c", "links": [{"switch": "sc", "host_id": 10}]},
        {"name": "k", "links": [{"switch": "ss", "host_id": 10}]},
        {"name": "k2", "links": [{"switch": "ss", "host_id": 13}]},
        {"name": "l1", "links": [{"switch": "ss", "host_id": 11}], "stack": "user"},
        {"name": "l2", "links": [{"switch": "ss", "host_id": 12}], "stack": "user"},
    ],
}


@dataclass(frozen=True)
class Flow:
    """A lean flow (leanweb on `node` with `knobs`) or a kernel flow (iperf3 with `cc`)."""

    label: str
    node: str
    knobs: dict | None = None
    cc: str | None = None


def pairings(compound_kernel_name: str | None) -> dict[str, tuple[Flow, Flow | None, tuple[float, float]]]:
    """name -> (flow A, flow B or None for A alone, the goal for A's share in %)."""
    modern = {"profile": "modern"}
    out = {
        "modern-modern": (Flow("lean modern", "l1", modern), Flow("lean modern", "l2", modern), (45.0, 55.0)),
        "modern-cubic": (Flow("lean modern", "l1", modern), Flow("kernel cubic", "k", cc="cubic"), (40.0, 60.0)),
    }
    # References, no goal: the lean stack without a congestion window, without HyStart++, with a
    # fixed send buffer, and alone tell its controller, its slow start, its bytes-in-flight cap and
    # its rate ceiling apart.
    out["nocc-cubic"] = (Flow("lean modern --cc none", "l1", {"profile": "modern", "cc": "none"}),
                         Flow("kernel cubic", "k", cc="cubic"), (0.0, 100.0))
    out["nohystart-cubic"] = (Flow("lean modern, no HyStart++", "l1", {**modern, "hystart": False}),
                              Flow("kernel cubic", "k", cc="cubic"), (0.0, 100.0))
    out["fixedbuf-cubic"] = (Flow("lean modern, 256 KiB fixed send buffer", "l1", {**modern, "send_buffer_max_bytes": 0}),
                             Flow("kernel cubic", "k", cc="cubic"), (0.0, 100.0))
    out["modern-alone"] = (Flow("lean modern", "l1", modern), None, (0.0, 100.0))
    # What Linux gets against itself in the same 30 s: the yardstick for the goals above.
    out["cubic-cubic"] = (Flow("kernel cubic", "k", cc="cubic"), Flow("kernel cubic", "k2", cc="cubic"), (0.0, 100.0))
    if compound_kernel_name:
        out["compound-compound"] = (Flow("lean compound", "l1", {"profile": "modern", "cc": "compound"}),
                                    Flow("kernel compound", "k", cc=compound_kernel_name), (40.0, 60.0))
        out["compoundl0-compound"] = (Flow("lean compound, slow start unlimited per ACK", "l1",
                                           {"profile": "modern", "cc": "compound", "abc_limit_segments": 0}),
                                      Flow("kernel compound", "k", cc=compound_kernel_name), (0.0, 100.0))
        out["compoundnogso-compound"] = (Flow("lean compound, one frame per TAP write", "l1",
                                              {"profile": "modern", "cc": "compound", "gso": False}),
                                         Flow("kernel compound", "k", cc=compound_kernel_name), (0.0, 100.0))
        out["kcompound-kcompound"] = (Flow("kernel compound", "k", cc=compound_kernel_name),
                                      Flow("kernel compound", "k2", cc=compound_kernel_name), (0.0, 100.0))
    return out


def write_bulk_file(docroot: Path, size_kib: int) -> None:
    """One MiB of random bytes repeated (files.write_files builds its file in one int,
    too large at this size); TCP does not care what the bytes are."""
    docroot.mkdir(parents=True, exist_ok=True)
    chunk = os.urandom(1024 * 1024)
    with open(docroot / file_name(size_kib), "wb") as out:
        for _ in range(size_kib // 1024):
            out.write(chunk)


def lean_server(tb: Testbed, node: str, docroot: Path, run_dir: Path, tag: str, knobs: dict):
    """leanweb on a user-stack node, built as a study's server is (servers/factory.py)."""
    # A fixed MAC per node: a restarted leanweb keeps the address the router's ARP cache holds.
    host_id = int(tb.address(node, "v4").split(".")[-1])
    spec = ServerSpec(name=node, kind="lean", node=node, knobs={"mac": f"02:00:00:00:00:{host_id:02x}", **knobs})
    return make_server(spec, tb, run_dir, docroot, tag)


class FlowRun:
    """One flow: `__init__` readies its receiver (iperf3's server), `start` launches the sender's
    side, so both flows of a pairing start within a few milliseconds; `received_bytes()` after
    it ended."""

    def __init__(self, tb: Testbed, flow: Flow, seconds: float, port: int):
        self.tb, self.flow, self.seconds, self.port = tb, flow, seconds, port
        self.server = None
        self.proc: subprocess.Popen | None = None
        self.started_at = 0.0
        if flow.cc is not None:
            self.server = tb.start("c", ["iperf3", "-s", "-1", "-J", "-p", str(port)], stdout=subprocess.PIPE)
            wait_listening(tb, port)

    def start(self) -> None:
        tb, flow, seconds = self.tb, self.flow, self.seconds
        if flow.cc is None:
            url = f"http://{tb.address(flow.node, 'v4')}/{file_name(bulk_file_kib(seconds))}"
            argv = ["curl", "-s", "-o", "/dev/null", "--max-time", str(seconds), "-w", "%{size_download}", url]
            self.proc = tb.start("c", argv, stdout=subprocess.PIPE)
        else:
            argv = ["iperf3", "-c", tb.address("c", "v4"), "-p", str(self.port), "-t", str(seconds), "-C", flow.cc, "-J"]
            self.proc = tb.start(flow.node, argv, stdout=subprocess.PIPE)
        self.started_at = time.time()

    def received_bytes(self, timeout_s: float) -> int:
        out, _ = self.proc.communicate(timeout=timeout_s)
        if self.flow.cc is None:
            # curl exits 28 when --max-time ends the transfer; the count is what arrived
            return int(out.decode().strip() or 0)
        server_out, _ = self.server.communicate(timeout=timeout_s)
        return int(json.loads(server_out)["end"]["sum_received"]["bytes"])


def wait_listening(tb: Testbed, port: int, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if f":{port} " in tb.run("c", ["ss", "-Hltn"], check=False).stdout:
            return
        time.sleep(0.05)
    raise CongestlabError(f"iperf3 server in the client did not listen on {port} within {timeout_s} s")


def bottleneck_dev(tb: Testbed) -> str:
    return next(i.dev for i in tb.layout.nodes["r"].interfaces if i.rate_bps)


def flow_endpoints(tb: Testbed, flows: list[Flow]) -> list[str]:
    """Each flow's endpoint in the client's `ss`: a lean flow's peer (the lean node, port 80),
    a kernel flow's local end (its iperf3 server's port)."""
    return [f"{tb.address(f.node, 'v4')}:80" if f.cc is None else f"{tb.address('c', 'v4')}:{IPERF_PORT + i}"
            for i, f in enumerate(flows)]


def share_columns(samples_path: Path, endpoints: list[str], t0_unix_s: float, seconds: float, settle_s: float) -> dict:
    """From the client's ss samples: the per-second shares and the steady-state window (from
    `settle_s` to the end of the run): A's share of its bytes and Jain's index."""
    samples = fairness_share.parse_samples(samples_path.read_text(), endpoints)
    # ends half a second early: curl's --max-time and iperf3's -t do not end on the same sample
    steady = fairness_share.window(samples, t0_unix_s, settle_s, seconds - 0.5)
    return {"settle_s": settle_s, "steady": steady,
            "steady_share_a_pct": steady["share_a_pct"] if steady else None,
            "steady_jain": steady["jain"] if steady else None,
            "per_second": fairness_share.per_interval(samples, t0_unix_s)}


def run_pair(tb: Testbed, a: Flow, b: Flow | None, seconds: float, docroot: Path, run_dir: Path, tag: str,
             trace_dir: Path | None = None, settle_s: float | None = None) -> dict:
    """Both flows at once (or A alone); the receivers' byte counts and A's share, over the
    whole run and after a start-up of `settle_s` (default: a third of the run; the client's
    `ss -tinH` sampled every SHARE_SAMPLE_S). leanweb's logs go to
    run_dir/logs/servers/<node>-<tag>/leanweb.jsonl. With `trace_dir`, the time
    series of both flows and the FIFO (fairness_trace.py) go there as <tag>.json / .png."""
    settle_s = seconds / 3 if settle_s is None else settle_s
    flows = [f for f in (a, b) if f is not None]
    servers = [lean_server(tb, f.node, docroot, run_dir, tag, f.knobs) for f in flows if f.cc is None]
    tracer = None
    if trace_dir is not None:
        kernel_flows = {f.node: IPERF_PORT + i for i, f in enumerate(flows) if f.cc is not None}
        tracer = Tracer(tb, trace_dir, tag, kernel_flows, "r", bottleneck_dev(tb))
    samples_path = run_dir / f"{tag}.client-ss.txt"
    sampler = None
    try:
        for server in servers:
            server.start()
        for server in servers:
            server.wait_started()
        for f in flows:
            if f.cc is None:
                tb.ping("c", f.node, "v4", count=1)
        if tracer:
            tracer.start()
        runs = [FlowRun(tb, f, seconds, IPERF_PORT + i) for i, f in enumerate(flows)]
        with samples_path.open("w") as out:
            sampler = tb.start("c", sampler_argv("ss -tinH", SHARE_SAMPLE_S), stdout=out)
        for r in runs:
            r.start()
        if tracer:
            for f, r in zip(flows, runs):
                tracer.flow_started(f.node, r.started_at)
        got = [r.received_bytes(timeout_s=seconds + 30) for r in runs]
    finally:
        if sampler:
            tb.stop(sampler, grace_s=1.0)
        if tracer:
            tracer.stop()
        for server in servers:
            server.stop()
    total = sum(got)
    share_a = 100.0 * got[0] / total if total else 0.0
    row = {"bytes": got, "mbps": [8 * g / seconds / 1e6 for g in got], "share_a_pct": share_a,
           "jain": fairness_share.jain_index([float(g) for g in got]),
           **share_columns(samples_path, flow_endpoints(tb, flows), min(r.started_at for r in runs), seconds, settle_s)}
    if tracer:
        lean_nodes = [f.node for f in flows if f.cc is None]
        row["trace"] = tracer.report({node: s.log_path for node, s in zip(lean_nodes, servers)})
    return row


def register_compound() -> str:
    """Compound TCP under a unique kernel name (removed by the caller); the object file is
    needed only to register it."""
    name = f"ct{secrets.token_hex(3)}"
    with tempfile.TemporaryDirectory(prefix="ctcp-") as out:
        subprocess.run(["make", "-C", str(REPO_ROOT / "bpf"), "--no-print-directory", "object", f"CTCP_ID={name}",
                        f"OUT_DIR={out}"], check=True, capture_output=True)
        return registry.install("compound", kernel_name=name, object_path=Path(out) / f"ctcp_{name}.bpf.o")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--repetitions", type=int, default=3)
    ap.add_argument("--pairings", default="modern-modern,modern-cubic,compound-compound,cubic-cubic,kcompound-kcompound,nocc-cubic,nohystart-cubic,fixedbuf-cubic,modern-alone")
    ap.add_argument("--json", type=Path, help="write every repetition's numbers here")
    ap.add_argument("--trace", type=Path, help="also record each pairing's time series here (fairness_trace.py)")
    ap.add_argument("--settle-s", type=float, help="the start-up left out of the steady-state share "
                    "(default: a third of --seconds)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("bench_lean_fairness: needs root (network namespaces)", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    wanted = [p for p in args.pairings.split(",") if p]
    compound = None
    results: dict[str, list[dict]] = {}
    print(f"load average before: {os.getloadavg()}")
    try:
        if any(p.endswith("-compound") for p in wanted):  # every pairing against kernel Compound
            compound = register_compound()
        table = pairings(compound)
        unknown = sorted(set(wanted) - set(table))
        if unknown:
            print(f"bench_lean_fairness: unknown pairing(s) {', '.join(unknown)}; known: {', '.join(table)}",
                  file=sys.stderr)
            return 2
        with tempfile.TemporaryDirectory(prefix="leanfair-") as tmp:
            docroot, run_dir = Path(tmp) / "www", Path(tmp)
            write_bulk_file(docroot, bulk_file_kib(args.seconds))
            with Testbed(TopologySpec.model_validate(TOPOLOGY)) as tb:
                print(f"testbed prefix {tb.prefix}", flush=True)
                for rep in range(args.repetitions):  # pairings alternate so machine drift hits all
                    for name in wanted:
                        a, b, _ = table[name]
                        row = run_pair(tb, a, b, args.seconds, docroot, run_dir, f"{name.replace('-', '')}{rep}",
                                       args.trace, args.settle_s)
                        row["loadavg"] = os.getloadavg()
                        results.setdefault(name, []).append(row)
                        other = f"{b.label} {row['mbps'][1]:.1f} Mbit/s" if b else "alone"
                        print(f"{name} rep {rep + 1}: {a.label} {row['mbps'][0]:.1f} Mbit/s, {other}, share of A "
                              f"{row['share_a_pct']:.1f} % whole run, {pct(row['steady_share_a_pct'])} % after "
                              f"{row['settle_s']:g} s (load {row['loadavg'][0]:.1f})", flush=True)
    finally:
        if compound:
            registry.remove(compound)
    print(f"\nload average after: {os.getloadavg()}")
    failed = print_summary(results, table)
    if args.json:
        args.json.write_text(json.dumps({"seconds": args.seconds, "results": results}, indent=1))
        plot_shares(results, args.json.with_suffix(".shares.png"), args.seconds)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
