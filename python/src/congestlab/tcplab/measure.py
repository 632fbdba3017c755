"""One point of a sweep: iperf 2 servers in B, clients in A, server-side reports parsed.

The study read the bandwidth the *server* reported; so do we. Every process is started
in its namespace, tracked, and killed by PID (also on errors and Ctrl-C).
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from congestlab.errors import TestbedError, ToolError
from congestlab.tcplab import iperf2
from congestlab.tcplab.network import LabNetwork
from congestlab.tcplab.sweeps import Point
from congestlab.testbed.namespaces import kill_pids, stop_processes

UDP_RATE_BPS = 1_000_000  # iperf 2's default, written out so the record is explicit
LISTEN_TIMEOUT_S = 5.0
REPORT_TIMEOUT_S = 10.0


@dataclass
class PointResult:
    tcp: list[iperf2.StreamReport]
    udp: list[iperf2.StreamReport]
    argv: dict[str, list[str]]


class Processes:
    """Popen objects started here; `kill_all` kills the live ones by PID."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []

    def start(self, ns: str, argv: list[str], stdout_path: Path, stderr_path: Path) -> subprocess.Popen:
        # line-buffered: iperf's CSV lines reach the file as they are printed
        full = ["ip", "netns", "exec", ns, "stdbuf", "-oL", *argv]
        with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
            try:
                proc = subprocess.Popen(full, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                        start_new_session=True)
            except FileNotFoundError:
                raise ToolError(full, None) from None
        self.procs.append(proc)
        return proc

    def stop(self, proc: subprocess.Popen, grace_s: float = 2.0) -> None:
        if proc.poll() is None:
            kill_pids([proc.pid], grace_s=grace_s)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
        if proc in self.procs:
            self.procs.remove(proc)

    def kill_all(self) -> None:
        stop_processes(self.procs)


def wait_listening(net: LabNetwork, udp: bool, server: subprocess.Popen, stderr_path: Path) -> None:
    flag = "-Hlun" if udp else "-Hltn"
    deadline = time.monotonic() + LISTEN_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise ToolError(server.args, server.returncode, stderr_path.read_text(errors="replace"))
        out = subprocess.run(["ip", "netns", "exec", net.line.ns_b, "ss", flag, f"sport = :{iperf2.PORT}"],
                             capture_output=True, text=True, timeout=5).stdout
        if out.strip():
            return
        time.sleep(0.05)
    raise TestbedError(f"iperf {'UDP' if udp else 'TCP'} server in {net.line.ns_b} not listening "
                       f"on {iperf2.PORT} within {LISTEN_TIMEOUT_S:g} s")


def wait_reports(path: Path, expected: int, what: str, final: bool = False) -> list[iperf2.StreamReport]:
    """`final`: only whole-run lines (starting at 0 and longer than 1.5 s) count, for a server
    that also prints 1 s interval lines."""
    deadline = time.monotonic() + REPORT_TIMEOUT_S
    while True:
        reports, _ = iperf2.parse_csv(path.read_text(errors="replace"))
        if final:
            reports = [r for r in reports if r.start_s == 0 and r.seconds > 1.5]
        if len(reports) >= expected:
            return reports[:expected]
        if time.monotonic() > deadline:
            raise TestbedError(f"{what}: server reported {len(reports)} of {expected} sessions "
                               f"within {REPORT_TIMEOUT_S:g} s (see {path})")
        time.sleep(0.05)


def run_point(net: LabNetwork, point: Point, duration_s: float, log_stem: Path, procs: Processes) -> PointResult:
    """Servers up, clients run for `duration_s`, server reports read, servers stopped."""
    ns_a, ns_b, server_addr = net.line.ns_a, net.line.ns_b, net.line.addr_b
    argv: dict[str, list[str]] = {}
    servers = []
    try:
        argv["tcp_server"] = iperf2.server_argv(window_bytes=point.server_window_bytes,
                                                length_bytes=point.server_length_bytes)
        tcp_out = log_stem.with_name(log_stem.name + "-tcp-server.csv")
        tcp_err = log_stem.with_name(log_stem.name + "-tcp-server.err")
        tcp_server = procs.start(ns_b, argv["tcp_server"], tcp_out, tcp_err)
        servers.append(tcp_server)
        wait_listening(net, False, tcp_server, tcp_err)
        if point.udp_sessions:
            argv["udp_server"] = iperf2.server_argv(udp=True)
            udp_out = log_stem.with_name(log_stem.name + "-udp-server.csv")
            udp_err = log_stem.with_name(log_stem.name + "-udp-server.err")
            udp_server = procs.start(ns_b, argv["udp_server"], udp_out, udp_err)
            servers.append(udp_server)
            wait_listening(net, True, udp_server, udp_err)

        clients = []
        argv["tcp_client"] = iperf2.client_argv(server_addr, duration_s=duration_s, parallel=point.tcp_sessions,
                                                window_bytes=point.client_window_bytes,
                                                length_bytes=point.client_length_bytes)
        clients.append(("tcp", procs.start(ns_a, argv["tcp_client"], log_stem.with_name(log_stem.name + "-tcp-client.csv"),
                                           log_stem.with_name(log_stem.name + "-tcp-client.err"))))
        if point.udp_sessions:
            argv["udp_client"] = iperf2.client_argv(server_addr, duration_s=duration_s, udp=True,
                                                    parallel=point.udp_sessions, udp_rate_bps=UDP_RATE_BPS)
            clients.append(("udp", procs.start(ns_a, argv["udp_client"],
                                               log_stem.with_name(log_stem.name + "-udp-client.csv"),
                                               log_stem.with_name(log_stem.name + "-udp-client.err"))))
        for kind, client in clients:
            try:
                rc = client.wait(timeout=duration_s + 30)
            except subprocess.TimeoutExpired:
                raise TestbedError(f"iperf {kind} client did not finish within {duration_s + 30:g} s") from None
            if rc != 0:
                err = log_stem.with_name(log_stem.name + f"-{kind}-client.err").read_text(errors="replace")
                raise ToolError(argv[f"{kind}_client"], rc, err)
            procs.procs.remove(client)
        tcp = wait_reports(tcp_out, point.tcp_sessions, f"{log_stem.name} TCP")
        udp = wait_reports(udp_out, point.udp_sessions, f"{log_stem.name} UDP") if point.udp_sessions else []
        return PointResult(tcp=tcp, udp=udp, argv=argv)
    finally:
        for server in servers:
            procs.stop(server)
