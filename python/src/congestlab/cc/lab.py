"""A small dumbbell in network namespaces for checking congestion controls with iperf3.

sender ──veth── router ──veth── receiver. The router's egress toward the receiver carries
the bottleneck: HTB at `rate_mbit` with a packet FIFO of `fifo_packets` (a rate limit on
the sender's own interface would not build a queue). Optionally the router delays the
receiver's ACKs by `ack_delay_ms` through a TUN delay line (this kernel has no netem), so
the path has a base RTT and a bandwidth-delay product larger than one packet.
Every name carries `prefix`; `down()` removes all of it, also after a failure.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass, field

from congestlab.errors import TestbedError, ToolError
from congestlab.testbed.executor import run_argv
from congestlab.testbed.namespaces import delete_namespace

SENDER_ADDR = "10.1.0.1"
ROUTER_SENDER_SIDE = "10.1.0.2"
ROUTER_RECEIVER_SIDE = "10.2.0.2"
RECEIVER_ADDR = "10.2.0.1"
DELAY_TABLE = "100"


def run(argv: list[str], timeout_s: float = 30) -> str:
    """Run one command; raise ToolError on a non-zero exit or a timeout."""
    return run_argv(argv, timeout_s=timeout_s).stdout


@dataclass
class Dumbbell:
    prefix: str
    rate_mbit: int = 100
    fifo_packets: int = 100
    ack_delay_ms: float = 0.0
    lifetime_s: float = 120.0  # bound on the delay line process
    _procs: list[subprocess.Popen] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not (1 <= len(self.prefix) <= 6 and self.prefix.isalnum()):
            raise TestbedError(f"prefix {self.prefix!r}: 1-6 letters or digits")
        p = self.prefix
        self.sender, self.router, self.receiver = f"{p}-s", f"{p}-r", f"{p}-c"
        self.if_sr, self.if_rs, self.if_rc, self.if_cr = f"{p}sr", f"{p}rs", f"{p}rc", f"{p}cr"
        self.if_delay = f"{p}dl"

    # -- lifecycle -----------------------------------------------------------------
    def __enter__(self) -> Dumbbell:
        try:
            self.up()
        except BaseException:
            self.down()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    def ns(self, ns: str, argv: list[str], timeout_s: float = 30) -> str:
        return run(["ip", "netns", "exec", ns, *argv], timeout_s)

    def up(self) -> None:
        for ns in (self.sender, self.router, self.receiver):
            run(["ip", "netns", "add", ns])
            run(["ip", "-n", ns, "link", "set", "lo", "up"])
        links = [(self.if_sr, self.sender, self.if_rs, self.router), (self.if_rc, self.router, self.if_cr, self.receiver)]
        for a, ns_a, b, ns_b in links:
            run(["ip", "link", "add", a, "netns", ns_a, "type", "veth", "peer", "name", b, "netns", ns_b])
        addrs = [
            (self.sender, self.if_sr, SENDER_ADDR), (self.router, self.if_rs, ROUTER_SENDER_SIDE),
            (self.router, self.if_rc, ROUTER_RECEIVER_SIDE), (self.receiver, self.if_cr, RECEIVER_ADDR),
        ]
        for ns, dev, addr in addrs:
            run(["ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", dev])
            run(["ip", "-n", ns, "link", "set", dev, "up"])
            # 1514-byte frames in the FIFO (not 64 KB chunks); receive work on one CPU
            # (spread over two it reorders ACKs, which TCP takes for loss).
            self.ns(ns, ["ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off"])
            self.ns(ns, ["sh", "-c", f"echo 1 > /sys/class/net/{dev}/queues/rx-0/rps_cpus"])
        self.ns(self.router, ["sysctl", "-qw", "net.ipv4.ip_forward=1"])
        run(["ip", "-n", self.sender, "route", "add", "default", "via", ROUTER_SENDER_SIDE])
        run(["ip", "-n", self.receiver, "route", "add", "default", "via", ROUTER_RECEIVER_SIDE])
        tc = ["tc", "-n", self.router]
        run([*tc, "qdisc", "add", "dev", self.if_rc, "root", "handle", "1:", "htb", "default", "10"])
        run([*tc, "class", "add", "dev", self.if_rc, "parent", "1:", "classid", "1:10", "htb",
             "rate", f"{self.rate_mbit}mbit", "quantum", "1514"])
        run([*tc, "qdisc", "add", "dev", self.if_rc, "parent", "1:10", "handle", "10:", "pfifo",
             "limit", str(self.fifo_packets)])
        if self.ack_delay_ms > 0:
            self._start_delay_line()

    def _start_delay_line(self) -> None:
        argv = ["ip", "netns", "exec", self.router, sys.executable, "-m", "congestlab.cc.delayline",
                self.if_delay, str(self.ack_delay_ms), str(self.lifetime_s)]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self._procs.append(proc)
        line = proc.stdout.readline() if proc.stdout else ""
        if line.strip() != "ready":
            raise TestbedError(f"delay line did not start: {proc.stderr.read() if proc.stderr else ''}")
        for knob in ("all", "default", self.if_delay, self.if_rc):
            self.ns(self.router, ["sysctl", "-qw", f"net.ipv4.conf.{knob}.rp_filter=0"])
        run(["ip", "-n", self.router, "link", "set", self.if_delay, "up"])
        run(["ip", "-n", self.router, "route", "add", "default", "dev", self.if_delay, "table", DELAY_TABLE])
        run(["ip", "-n", self.router, "rule", "add", "iif", self.if_rc, "lookup", DELAY_TABLE, "pref", "100"])

    def down(self) -> None:
        for proc in self._procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)
        self._procs.clear()
        for ns in (self.sender, self.router, self.receiver):
            delete_namespace(ns)

    # -- traffic -------------------------------------------------------------------
    def iperf_flows(self, cc_names: list[str], seconds: float, on_tick=None, tick_s: float = 0.2) -> list[dict]:
        """Run one iperf3 flow per congestion control at once ("" = the route's/namespace's); per-flow results.

        Each result: cc, port, local_port, received_bps (receiver side), retransmits, ss_cc (the
        algorithm `ss -ti` showed for the port's busiest connection during the run, or None).
        """
        ports = [5201 + i for i in range(len(cc_names))]
        servers = [self._popen(self.receiver, ["iperf3", "-s", "-1", "-B", RECEIVER_ADDR, "-p", str(p)]) for p in ports]
        try:
            self._wait_listening(ports)
            clients = [
                self._popen(self.sender, ["iperf3", "-c", RECEIVER_ADDR, "-p", str(p), *(["-C", cc] if cc else []),
                                          "-t", str(seconds), "-J", "--connect-timeout", "3000"])
                for cc, p in zip(cc_names, ports)
            ]
            ss_seen: dict[int, tuple[int, str, int]] = {}  # busiest connection per port over the run
            deadline = time.monotonic() + seconds + 20
            while any(c.poll() is None for c in clients):
                if time.monotonic() > deadline:
                    raise TestbedError(f"iperf3 clients did not finish within {seconds + 20:.0f} s")
                for port, seen in self.ss_algorithms().items():
                    if port not in ss_seen or seen[0] >= ss_seen[port][0]:
                        ss_seen[port] = seen
                if on_tick:
                    on_tick()
                time.sleep(tick_s)
            results = []
            for cc, port, client in zip(cc_names, ports, clients):
                out, err = client.communicate(timeout=10)
                if client.returncode != 0:
                    raise ToolError(list(client.args), client.returncode, err or out[-500:])
                report = json.loads(out)
                end = report["end"]
                results.append({
                    "cc": cc,
                    "port": port,
                    "received_bps": float(end["sum_received"]["bits_per_second"]),
                    "retransmits": int(end["sum_sent"].get("retransmits", 0)),
                    "ss_cc": ss_seen[port][1] if port in ss_seen else None,
                    "local_port": int(report["start"]["connected"][0]["local_port"]),
                })
            return results
        finally:
            for s in servers:
                if s.poll() is None:
                    s.kill()
                s.wait(timeout=10)

    def ss_algorithms(self) -> dict[int, tuple[int, str, int]]:
        """Remote port -> (bytes_acked, congestion control, local port) of the busiest connection, from `ss -tin`."""
        out = self.ns(self.sender, ["ss", "-tinH", "state", "established", "dst", RECEIVER_ADDR])
        best: dict[int, tuple[int, str, int]] = {}
        conn: tuple[int, int] | None = None  # (remote port, local port) of the line above
        for line in out.splitlines():
            fields = line.split()
            if len(fields) >= 4 and fields[-1].startswith(RECEIVER_ADDR + ":"):
                conn = (int(fields[-1].rsplit(":", 1)[1]), int(fields[-2].rsplit(":", 1)[1]))
                continue
            if conn is not None and fields:
                acked = next((int(f.split(":")[1]) for f in fields if f.startswith("bytes_acked:")), 0)
                if conn[0] not in best or acked > best[conn[0]][0]:
                    best[conn[0]] = (acked, fields[0], conn[1])
                conn = None
        return best

    def route_congctl(self, kernel_cc: str) -> None:
        """Select a congestion control for the sender's route to the receiver (`ip route ... congctl`)."""
        run(["ip", "-n", self.sender, "route", "replace", "10.2.0.0/24", "via", ROUTER_SENDER_SIDE,
             "congctl", kernel_cc])

    def _popen(self, ns: str, argv: list[str]) -> subprocess.Popen:
        proc = subprocess.Popen(["ip", "netns", "exec", ns, *argv], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        self._procs.append(proc)
        return proc

    def _wait_listening(self, ports: list[int]) -> None:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            out = self.ns(self.receiver, ["ss", "-tlnH"])
            if all(f":{p} " in out for p in ports):
                return
            time.sleep(0.05)
        raise TestbedError(f"iperf3 servers did not listen on {ports} within 5 s")
