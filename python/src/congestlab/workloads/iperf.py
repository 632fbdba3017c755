"""iperf sessions from a sender to a receiver: iperf 2 as seed 003 drove it (server-side
`-y C` reports, -w/-l on either side, parallel TCP beside UDP sessions on one port), or
iperf3 with one server per flow and a per-flow congestion control (`-C`), for cc-share.
The command lines and reports are traffic/iperf.py's, `ss` output traffic/socket_stats.py's.

Every process starts in its node's namespace through the testbed (killed by PID at
teardown); clients are waited for with a timeout, servers are stopped after each run.
Rows: one `iperf` record per session, as the receiving side reported it (results.py).
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from congestlab.cc import registry
from congestlab.errors import TestbedError, ToolError
from congestlab.fidelity import Check
from congestlab.traffic.iperf import (
    StreamReport,
    client2_argv,
    client3_argv,
    parse_csv,
    parse_iperf3_json,
    server2_argv,
    server3_argv,
    steady_mbps,
    whole_run,
)
from congestlab.traffic.socket_stats import listening_ports, parse_ss_algorithms
from congestlab.workloads.base import Measuring, Record

LISTEN_TIMEOUT_S = 5.0
REPORT_TIMEOUT_S = 10.0
CLIENT_MARGIN_S = 30.0  # a client may take this long beyond its duration (connect, final report)
SS_POLL_S = 0.2


class IperfRunner(Measuring):
    @classmethod
    def host_pairs(cls, spec, study) -> set[tuple[str, str]]:
        return {(spec.client, spec.server)} | {(f.client, spec.server) for f in spec.flows if f.client}

    @classmethod
    def socket_ccs(cls, spec) -> set[str]:
        """iperf3 -C asks for these on its own sockets."""
        return {flow.cc for flow in spec.flows if flow.cc}

    @classmethod
    def tools(cls, spec) -> set[str]:
        return {"iperf"}

    def run(self, repetition: int) -> tuple[list[Record], list[Check]]:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        if self.spec.version == 2:
            return self._run_iperf2()
        return self._run_iperf3()

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
            if set(ports) <= listening_ports(out):
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
    def _run_iperf2(self) -> tuple[list[Record], list[Check]]:
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
    def _run_iperf3(self) -> tuple[list[Record], list[Check]]:
        spec, tb = self.spec, self.ctx.tb
        addr = self.ctx.address(spec.server, spec.family)
        flows = spec.flow_list()
        ports = [spec.base_port + i for i in range(len(flows))]
        servers = []
        clients: list[tuple[subprocess.Popen, Path, Path]] = []
        try:
            for i, (flow, port) in enumerate(zip(flows, ports), 1):
                proc, _, err = self._start(spec.server, server3_argv(port), f"server{i}",
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
