"""iperf sessions from a sender to a receiver: iperf 2 as seed 003 drove it (server-side
`-y C` reports, -w/-l on either side, parallel TCP beside UDP sessions on one port), or
iperf3 with one server per flow and a per-flow congestion control (`-C`), for cc-share.

Every process starts in its node's namespace through the testbed (killed by PID at
teardown); clients are waited for with a timeout, servers are stopped after each run.
Rows: one `iperf` record per session, as the receiving side reported it (results.py).
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from congestlab.cc import registry
from congestlab.errors import TestbedError, ToolError
from congestlab.fidelity import Check
from congestlab.workloads.base import Measuring, Record

LISTEN_TIMEOUT_S = 5.0
REPORT_TIMEOUT_S = 10.0
CLIENT_MARGIN_S = 30.0  # a client may take this long beyond its duration (connect, final report)
SS_POLL_S = 0.2

# --- iperf 2 -----------------------------------------------------------------------------
# CSV fields (iperf 2.0/2.1 `-y C`, one line per stream and report):
#   TCP: time, src_addr, src_port, dst_addr, dst_port, id, interval, bytes, bits_per_second
#   UDP: the same nine, then jitter_ms, lost, total_datagrams, lost_pct, out_of_order
# `id` -1 marks a SUM line of a parallel client (we sum per-stream lines ourselves).
TCP_FIELDS = 9
UDP_FIELDS = 14


class IperfParseError(ValueError):
    """A line that looks like an iperf report but is not a valid one."""


@dataclass(frozen=True)
class StreamReport:
    src: str
    src_port: int
    dst: str
    dst_port: int
    stream_id: int
    start_s: float
    end_s: float
    bytes: int
    bits_per_second: float
    protocol: str  # "tcp" or "udp"
    jitter_ms: float | None = None
    lost: int | None = None
    total_datagrams: int | None = None
    lost_pct: float | None = None

    @property
    def seconds(self) -> float:
        return self.end_s - self.start_s

    @property
    def mbit_per_s(self) -> float:
        return self.bits_per_second / 1e6

    @property
    def is_sum(self) -> bool:
        return self.stream_id < 0


def parse_csv_line(line: str) -> StreamReport:
    fields = line.strip().split(",")
    if len(fields) not in (TCP_FIELDS, UDP_FIELDS):
        raise IperfParseError(f"expected {TCP_FIELDS} or {UDP_FIELDS} comma-separated fields, got {len(fields)}")
    try:
        start_s, end_s = (float(x) for x in fields[6].split("-", 1))
        report = StreamReport(
            src=fields[1], src_port=int(fields[2]), dst=fields[3], dst_port=int(fields[4]),
            stream_id=int(fields[5]), start_s=start_s, end_s=end_s, bytes=int(fields[7]),
            bits_per_second=float(fields[8]), protocol="tcp" if len(fields) == TCP_FIELDS else "udp",
        )
        if len(fields) == UDP_FIELDS:
            report = StreamReport(**{**report.__dict__, "jitter_ms": float(fields[9]), "lost": int(fields[10]),
                                     "total_datagrams": int(fields[11]), "lost_pct": float(fields[12])})
    except ValueError as err:
        raise IperfParseError(f"bad field value ({err})") from None
    if report.bytes < 0 or report.bits_per_second < 0 or end_s < start_s:
        raise IperfParseError("negative bytes, rate or interval")
    return report


def parse_csv(text: str) -> tuple[list[StreamReport], list[str]]:
    """Per-stream reports (SUM lines dropped) and the lines that were not reports.

    A line counts as a report attempt when it starts with a digit and holds commas; a
    malformed report raises IperfParseError naming the line number.
    """
    reports, other = [], []
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped:
            continue
        if not (stripped[0].isdigit() and "," in stripped):
            other.append(stripped)
            continue
        try:
            report = parse_csv_line(stripped)
        except IperfParseError as err:
            raise IperfParseError(f"line {number}: {err}: {stripped[:120]!r}") from None
        if not report.is_sum:
            reports.append(report)
    return reports, other


def whole_run(reports: list[StreamReport]) -> list[StreamReport]:
    """A server that also prints 1 s interval lines: only the whole-session lines (from 0, longer than 1.5 s)."""
    return [r for r in reports if r.start_s == 0 and r.seconds > 1.5]


def steady_mbps(reports: list[StreamReport], omit_s: float) -> float:
    """Rate of the 1 s interval reports that start at or after `omit_s` (slow start left
    out, like iperf3 -O), all streams together; whole-run lines are not interval reports."""
    steady = [r for r in reports if r.start_s >= omit_s and r.seconds <= 1.5]
    if not steady:
        raise IperfParseError(f"no interval reports after {omit_s:g} s")
    spans = {(r.start_s, r.end_s) for r in steady}
    return sum(r.bytes for r in steady) * 8 / sum(e - s for s, e in spans) / 1e6


def server2_argv(port: int, *, udp: bool = False, window_bytes: int | None = None,
                 length_bytes: int | None = None, interval_s: float | None = None, family: str = "v4") -> list[str]:
    argv = ["iperf", "-s", "-p", str(port), "-y", "C"]
    if family == "v6":
        argv.append("-V")
    if interval_s is not None:
        argv += ["-i", f"{interval_s:g}"]
    if udp:
        argv.append("-u")
    if window_bytes is not None:
        argv += ["-w", str(window_bytes)]
    if length_bytes is not None:
        argv += ["-l", str(length_bytes)]
    return argv


def client2_argv(server: str, port: int, *, duration_s: float, udp: bool = False, parallel: int = 1,
                 window_bytes: int | None = None, length_bytes: int | None = None,
                 udp_rate_bps: float | None = None, family: str = "v4") -> list[str]:
    if duration_s <= 0:
        raise ValueError("duration_s must be > 0")
    if parallel < 1:
        raise ValueError("parallel must be >= 1")
    argv = ["iperf", "-c", server, "-p", str(port), "-t", f"{duration_s:g}", "-y", "C"]
    if family == "v6":
        argv.append("-V")
    if udp:
        argv.append("-u")
        if udp_rate_bps is not None:
            argv += ["-b", str(int(udp_rate_bps))]
    if parallel > 1:
        argv += ["-P", str(parallel)]
    if window_bytes is not None:
        argv += ["-w", str(window_bytes)]
    if length_bytes is not None:
        argv += ["-l", str(length_bytes)]
    return argv


# --- iperf3 --------------------------------------------------------------------------------
def client3_argv(server: str, port: int, *, duration_s: float, cc: str | None = None, udp: bool = False,
                 udp_rate_bps: float | None = None, window_bytes: int | None = None,
                 length_bytes: int | None = None, omit_s: float = 0.0, family: str = "v4") -> list[str]:
    argv = ["iperf3", "-c", server, "-p", str(port), "-t", f"{duration_s:g}", "-J", "--connect-timeout", "3000",
            "-4" if family == "v4" else "-6"]
    if cc:
        argv += ["-C", cc]
    if udp:
        argv += ["-u", "-b", str(int(udp_rate_bps or 1_000_000))]
    if window_bytes is not None:
        argv += ["-w", str(window_bytes)]
    if length_bytes is not None:
        argv += ["-l", str(length_bytes)]
    if omit_s:
        argv += ["-O", f"{omit_s:g}"]
    return argv


@dataclass(frozen=True)
class Iperf3Result:
    bytes: int
    seconds: float
    received_bps: float
    retransmits: int | None
    local_port: int
    jitter_ms: float | None = None
    lost: int | None = None
    packets: int | None = None


def parse_iperf3_json(text: str) -> Iperf3Result:
    """The client's `-J` report: what the receiver got (TCP sum_received; UDP the server's sum)."""
    try:
        report = json.loads(text)
    except json.JSONDecodeError as err:
        raise IperfParseError(f"iperf3 -J output is not JSON: {err}") from None
    if "error" in report:
        raise IperfParseError(f"iperf3: {report['error']}")
    try:
        end = report["end"]
        local_port = int(report["start"]["connected"][0]["local_port"])
        if "sum_received" in end:  # TCP
            recv = end["sum_received"]
            return Iperf3Result(int(recv["bytes"]), float(recv["seconds"]), float(recv["bits_per_second"]),
                                int(end["sum_sent"].get("retransmits", 0)), local_port)
        total = end["sum"]  # UDP: the server's view of the datagrams
        return Iperf3Result(int(total["bytes"]), float(total["seconds"]), float(total["bits_per_second"]), None,
                            local_port, float(total.get("jitter_ms", 0.0)), int(total.get("lost_packets", 0)),
                            int(total.get("packets", 0)))
    except (KeyError, IndexError, TypeError, ValueError) as err:
        raise IperfParseError(f"iperf3 -J report lacks {err}") from None


# the info line of `ss -ti`: "ts sack cubic wscale:7,7 rto:204 ..." (flags, then the algorithm)
_SS_ALGORITHM = re.compile(r"(?:^|\s)(?!ts\s|sack\s|ecn\s|ecnseen\s|fastopen\s)([a-z_][a-z0-9_]*)\s+(?:wscale|rto):")


def ss_algorithm(line: str) -> str | None:
    """The congestion control named on one info line of `ss -ti` (also without window
    scaling, where ss prints no wscale: "ts sack cubic rto:204 ...")."""
    match = _SS_ALGORITHM.search(line)
    return match.group(1) if match else None


@dataclass(frozen=True)
class SsConnection:
    """One connection of `ss -tinH`: its two endpoints ("addr:port", v6 as "[addr]:port"),
    the `name:integer` counters of its info line (bytes_acked, bytes_received, ...) and that
    line itself (ss_algorithm reads it)."""

    local: str
    peer: str
    counters: dict[str, int]
    info: str


def parse_ss_connections(out: str) -> list[SsConnection]:
    """`ss -tinH` (with or without a state filter) -> its connections, in order. A connection
    is an address line (the last two fields the endpoints) followed by its info line, which
    ss indents; a connection without one (TIME-WAIT) is left out."""
    conns: list[SsConnection] = []
    endpoints: tuple[str, str] | None = None
    for line in out.splitlines():
        fields = line.split()
        if not fields:
            continue
        if not line[:1].isspace():
            endpoints = (fields[-2], fields[-1]) if len(fields) >= 4 else None
            continue
        if endpoints is not None:
            counters = {k: int(v) for k, v in (f.split(":", 1) for f in fields if f.count(":") == 1)
                        if v.isdigit()}
            conns.append(SsConnection(endpoints[0], endpoints[1], counters, line))
            endpoints = None
    return conns


def parse_ss_algorithms(out: str, peer_addr: str) -> dict[int, tuple[int, str]]:
    """`ss -tinH state established` -> {remote port: (bytes_acked, algorithm)} of the busiest
    connection to `peer_addr` per remote port (iperf3 also opens a control connection)."""
    best: dict[int, tuple[int, str]] = {}
    peer = peer_addr if ":" not in peer_addr else f"[{peer_addr}]"
    for conn in parse_ss_connections(out):
        if not conn.peer.startswith(peer + ":"):
            continue
        port = int(conn.peer.rsplit(":", 1)[1])
        acked = conn.counters.get("bytes_acked", 0)
        algorithm = ss_algorithm(conn.info) or "?"
        if port not in best or acked >= best[port][0]:
            best[port] = (acked, algorithm)
    return best


def iperf_versions() -> dict[str, str]:
    out = {}
    for name, argv in (("iperf", ["iperf", "-v"]), ("iperf3", ["iperf3", "--version"])):
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=5)
        except FileNotFoundError:
            out[name] = "not installed"
            continue
        text = (proc.stdout + proc.stderr).strip()
        out[name] = text.splitlines()[0] if text else "?"
    return out


# --- the runner ----------------------------------------------------------------------------
class IperfRunner(Measuring):
    @classmethod
    def host_pairs(cls, spec, study) -> set[tuple[str, str]]:
        return {(spec.client, spec.server)} | {(f.client, spec.server) for f in spec.flows if f.client}

    @classmethod
    def socket_ccs(cls, spec) -> set[str]:
        """iperf3 -C asks for these on its own sockets."""
        return {flow.cc for flow in spec.flows if flow.cc}

    def run(self, repetition: int) -> tuple[list[Record], list[Check]]:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        if self.spec.version == 2:
            return self._run2()
        return self._run3()

    @classmethod
    def time_bound_s(cls, spec, study) -> float:
        return spec.duration_s + CLIENT_MARGIN_S + REPORT_TIMEOUT_S + 2 * LISTEN_TIMEOUT_S

    # --- helpers --------------------------------------------------------------------
    def _start(self, node: str, argv: list[str], stem: str, line_buffered: bool = True) -> tuple[subprocess.Popen, Path, Path]:
        out, err = self.log_dir / f"{self.spec.name}-{stem}.out", self.log_dir / f"{self.spec.name}-{stem}.err"
        self.argvs.append(argv)
        full = ["stdbuf", "-oL", *argv] if line_buffered else argv  # iperf's CSV lines reach the file as printed
        with open(out, "wb") as fo, open(err, "wb") as fe:
            proc = self.ctx.tb.start(node, full, stdout=fo, stderr=fe)
        return proc, out, err

    def _wait_listening(self, node: str, ports: list[int], udp: bool, procs: list[tuple[subprocess.Popen, Path]]):
        flag = "-Hlun" if udp else "-Hltn"
        deadline = time.monotonic() + LISTEN_TIMEOUT_S
        while True:
            for proc, err in procs:
                if proc.poll() is not None:
                    raise ToolError(list(proc.args), proc.returncode, err.read_text(errors="replace"))
            out = self.ctx.tb.run(node, ["ss", flag]).stdout
            listening = {int(m) for m in re.findall(r"[\]:*](\d+)\s", out)}
            if set(ports) <= listening:
                return
            if time.monotonic() > deadline:
                raise TestbedError(f"workload {self.spec.name}: iperf {'UDP' if udp else 'TCP'} server on {node} "
                                   f"not listening on {ports} within {LISTEN_TIMEOUT_S:g} s")
            time.sleep(0.05)

    def _wait_client(self, proc: subprocess.Popen, err: Path, timeout_s: float) -> None:
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.ctx.tb.stop(proc)
            raise TestbedError(f"workload {self.spec.name}: iperf client did not finish within {timeout_s:g} s") from None
        self.ctx.tb.stop(proc)  # forget it (it has ended)
        if rc != 0:
            raise ToolError(list(proc.args), rc, err.read_text(errors="replace"))

    # --- iperf 2 ----------------------------------------------------------------------
    def _run2(self) -> tuple[list[Record], list[Check]]:
        spec, tb = self.spec, self.ctx.tb
        addr = self.ctx.address(spec.server, spec.family)
        port = spec.base_port
        interval = 1.0 if spec.expect_min_mbps is not None else None
        servers: list[tuple[str, subprocess.Popen, Path, Path]] = []
        try:
            if spec.tcp_sessions:
                proc, out, err = self._start(spec.server, server2_argv(
                    port, window_bytes=spec.server_window_bytes, length_bytes=spec.server_length_bytes,
                    interval_s=interval, family=spec.family), "tcp-server")
                servers.append(("tcp", proc, out, err))
                self._wait_listening(spec.server, [port], False, [(proc, err)])
            if spec.udp_sessions:
                proc, out, err = self._start(spec.server, server2_argv(port, udp=True, family=spec.family),
                                             "udp-server")
                servers.append(("udp", proc, out, err))
                self._wait_listening(spec.server, [port], True, [(proc, err)])
            clients = []
            if spec.tcp_sessions:
                clients.append(self._start(spec.client, client2_argv(
                    addr, port, duration_s=spec.duration_s, parallel=spec.tcp_sessions,
                    window_bytes=spec.client_window_bytes, length_bytes=spec.client_length_bytes,
                    family=spec.family), "tcp-client"))
            if spec.udp_sessions:
                clients.append(self._start(spec.client, client2_argv(
                    addr, port, duration_s=spec.duration_s, udp=True, parallel=spec.udp_sessions,
                    udp_rate_bps=spec.udp_rate_bps, family=spec.family), "udp-client"))
            for proc, _, err in clients:
                self._wait_client(proc, err, spec.duration_s + CLIENT_MARGIN_S)
            reports = {}
            for protocol, _, out, _ in servers:
                expected = spec.tcp_sessions if protocol == "tcp" else spec.udp_sessions
                final = protocol == "tcp" and interval is not None  # only the TCP server prints intervals
                reports[protocol] = self._wait_reports(out, expected, protocol, final=final)
        finally:
            for _, proc, _, _ in servers:
                tb.stop(proc)
        records: list[Record] = []
        session = 0
        for protocol in ("tcp", "udp"):
            for rep in reports.get(protocol, []):
                session += 1
                udp = protocol == "udp"
                records.append(("iperf", self._row(protocol, session, None, None, rep.bytes, rep.seconds,
                                                   rep.mbit_per_s, rep.jitter_ms if udp else None,
                                                   rep.lost if udp else None,
                                                   rep.total_datagrams if udp else None, None,
                                                   client_port=rep.src_port)))
        checks = []
        if spec.expect_min_mbps is not None:
            tcp_out = next(out for protocol, _, out, _ in servers if protocol == "tcp")
            all_reports, _ = parse_csv(tcp_out.read_text(errors="replace"))
            mbps = steady_mbps(all_reports, spec.omit_s)
            whole = sum(r.bytes for r in reports["tcp"]) * 8 / max(r.seconds for r in reports["tcp"]) / 1e6
            checks.append(self._rate_check(mbps, f"whole run incl. slow start {whole:.2f} Mbit/s"))
        return records, checks

    def _wait_reports(self, path: Path, expected: int, what: str, final: bool) -> list[StreamReport]:
        deadline = time.monotonic() + REPORT_TIMEOUT_S
        while True:
            reports, _ = parse_csv(path.read_text(errors="replace"))
            if final:
                reports = whole_run(reports)
            if len(reports) >= expected:
                return reports[:expected]
            if time.monotonic() > deadline:
                raise TestbedError(f"workload {self.spec.name}: iperf {what} server reported {len(reports)} of "
                                   f"{expected} sessions within {REPORT_TIMEOUT_S:g} s (see {path})")
            time.sleep(0.05)

    def _rate_check(self, mbps: float, detail: str) -> Check:
        spec = self.spec
        return Check(f"tcp_rate_at_least_{spec.expect_min_mbps:g}mbps", mbps >= spec.expect_min_mbps, round(mbps, 2),
                     f">= {spec.expect_min_mbps:g} Mbit/s",
                     f"{spec.client} -> {spec.server}, TCP: {mbps:.2f} Mbit/s at the receiver over "
                     f"{spec.duration_s - spec.omit_s:g} s after the first {spec.omit_s:g} s; {detail}")

    # --- iperf3 -----------------------------------------------------------------------
    def _run3(self) -> tuple[list[Record], list[Check]]:
        spec, tb = self.spec, self.ctx.tb
        addr = self.ctx.address(spec.server, spec.family)
        flows = spec.flow_list()
        ports = [spec.base_port + i for i in range(len(flows))]
        servers = []
        clients: list[tuple[subprocess.Popen, Path, Path]] = []
        try:
            for i, (flow, port) in enumerate(zip(flows, ports), 1):
                proc, _, err = self._start(spec.server, ["iperf3", "-s", "-1", "-p", str(port)], f"server{i}",
                                           line_buffered=False)
                servers.append((proc, err))
            self._wait_listening(spec.server, ports, False, servers)
            for i, (flow, port) in enumerate(zip(flows, ports), 1):
                argv = client3_argv(addr, port, duration_s=spec.duration_s, cc=_kernel_name(flow.cc),
                                    udp=flow.protocol == "udp", udp_rate_bps=spec.udp_rate_bps,
                                    window_bytes=spec.client_window_bytes, length_bytes=spec.client_length_bytes,
                                    omit_s=spec.omit_s, family=spec.family)
                clients.append(self._start(flow.client or spec.client, argv, f"client{i}", line_buffered=False))
            seen = self._poll_ss(flows, clients, addr)
            for proc, _, err in clients:
                self._wait_client(proc, err, CLIENT_MARGIN_S)
        finally:
            for proc, _, _ in clients:
                if proc.poll() is None:
                    tb.stop(proc)
            for proc, _ in servers:
                tb.stop(proc)
        records: list[Record] = []
        checks: list[Check] = []
        tcp_bps = 0.0
        for i, (flow, port, (_, out, _)) in enumerate(zip(flows, ports, clients), 1):
            result = parse_iperf3_json(out.read_text(errors="replace"))
            kernel = seen.get(port, (0, None))[1] if flow.protocol == "tcp" else None
            udp = flow.protocol == "udp"
            records.append(("iperf", self._row(flow.protocol, i, flow.cc, kernel, result.bytes, result.seconds,
                                               result.received_bps / 1e6, result.jitter_ms, result.lost,
                                               result.packets, result.retransmits, flow.client,
                                               client_port=result.local_port)))
            if not udp:
                tcp_bps += result.received_bps
            if flow.cc and not udp:
                want = _kernel_name(flow.cc)
                checks.append(Check(f"{spec.name}_flow{i}_cc", kernel == want, kernel, want,
                                    "" if kernel == want else f"flow {i}: ss -ti showed {kernel!r}, "
                                    f"iperf3 -C asked for {want!r}"))
        if spec.expect_min_mbps is not None:
            checks.append(self._rate_check(tcp_bps / 1e6, "iperf3 -O"))
        return records, checks

    def _poll_ss(self, flows, clients, addr: str) -> dict[int, tuple[int, str]]:
        """While the clients run: the algorithm of each flow's busiest connection, by remote port."""
        senders = sorted({flow.client or self.spec.client for flow in flows if flow.protocol == "tcp"})
        seen: dict[int, tuple[int, str]] = {}
        deadline = time.monotonic() + self.spec.duration_s + CLIENT_MARGIN_S
        while any(proc.poll() is None for proc, _, _ in clients) and time.monotonic() < deadline:
            for node in senders:
                out = self.ctx.tb.run(node, ["ss", "-tinH", "state", "established"], check=False).stdout
                for port, (acked, algorithm) in parse_ss_algorithms(out, addr).items():
                    if port not in seen or acked >= seen[port][0]:
                        seen[port] = (acked, algorithm)
            time.sleep(SS_POLL_S)
        return seen

    def _row(self, protocol: str, session: int, cc, cc_kernel, nbytes: int, seconds: float, mbps: float,
             jitter_ms, lost, datagrams, retransmits, client: str | None = None, client_port: int | None = None) -> dict:
        spec = self.spec
        return {"workload": spec.name, "version": spec.version, "client": client or spec.client,
                "client_port": client_port,
                "server": spec.server, "protocol": protocol, "session": session, "cc": cc, "cc_kernel": cc_kernel,
                "bytes": nbytes, "seconds": round(seconds, 6), "throughput_mbps": mbps, "udp_jitter_ms": jitter_ms,
                "udp_lost": lost, "udp_datagrams": datagrams, "retransmits": retransmits}


def _kernel_name(cc: str | None) -> str | None:
    """The kernel's name of a spec's cc; the runner installed Compound TCP before the point."""
    if cc == "compound":
        return registry.COMPOUND_KERNEL_NAME  # (read at use: tests build it under another name)
    return cc
