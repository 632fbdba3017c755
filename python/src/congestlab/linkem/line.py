"""A small host A — router R — host B line of namespaces for linkem's own tests and labs.

Not the project's testbed (that is testbed/): just enough to put linkem on a router.
Addresses are private and live only inside the namespaces built here. Teardown kills
every PID in the namespaces, then deletes them, also when setup failed half-way.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass

from congestlab.errors import ToolError


def run(argv: list[str], timeout_s: float = 30) -> str:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    except FileNotFoundError:
        raise ToolError(argv, None) from None
    if proc.returncode != 0:
        raise ToolError(argv, proc.returncode, proc.stderr)
    return proc.stdout


@dataclass
class Line:
    """`prefix` must be short and unique (e.g. 't1a2b'); names stay within 15 characters."""

    prefix: str
    subnet_a: str = "10.201.1"
    subnet_b: str = "10.201.2"

    @property
    def ns_a(self) -> str:
        return f"{self.prefix}-a"

    @property
    def ns_r(self) -> str:
        return f"{self.prefix}-r"

    @property
    def ns_b(self) -> str:
        return f"{self.prefix}-b"

    @property
    def r_to_a(self) -> str:  # router interface facing A
        return f"{self.prefix}-ra"

    @property
    def r_to_b(self) -> str:  # router interface facing B (the bottleneck egress)
        return f"{self.prefix}-rb"

    @property
    def addr_a(self) -> str:
        return f"{self.subnet_a}.2"

    @property
    def addr_b(self) -> str:
        return f"{self.subnet_b}.2"

    def exec(self, ns: str, *argv: str, timeout_s: float = 30) -> str:
        return run(["ip", "netns", "exec", ns, *argv], timeout_s=timeout_s)

    def build(self) -> None:
        p = self.prefix
        for ns in (self.ns_a, self.ns_r, self.ns_b):
            run(["ip", "netns", "add", ns])
            run(["ip", "-n", ns, "link", "set", "lo", "up"])
        run(["ip", "link", "add", f"{p}-a0", "netns", self.ns_a, "type", "veth",
             "peer", "name", self.r_to_a, "netns", self.ns_r])
        run(["ip", "link", "add", f"{p}-b0", "netns", self.ns_b, "type", "veth",
             "peer", "name", self.r_to_b, "netns", self.ns_r])
        for ns, dev, addr, gw in ((self.ns_a, f"{p}-a0", self.addr_a, f"{self.subnet_a}.1"),
                                  (self.ns_b, f"{p}-b0", self.addr_b, f"{self.subnet_b}.1")):
            run(["ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", dev])
            self._tune(ns, dev)
            run(["ip", "-n", ns, "route", "add", "default", "via", gw])
        for dev, subnet in ((self.r_to_a, self.subnet_a), (self.r_to_b, self.subnet_b)):
            run(["ip", "-n", self.ns_r, "addr", "add", f"{subnet}.1/24", "dev", dev])
            self._tune(self.ns_r, dev)
        self.exec(self.ns_r, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        for ns in (self.ns_a, self.ns_b):
            # enough window for 100 Mbit/s x 40 ms (500 kB) with room to spare
            self.exec(ns, "sysctl", "-qw", "net.ipv4.tcp_rmem=4096 131072 16777216")
            self.exec(ns, "sysctl", "-qw", "net.ipv4.tcp_wmem=4096 65536 16777216")

    def _tune(self, ns: str, dev: str) -> None:
        run(["ip", "-n", ns, "link", "set", dev, "up"])
        # no 64 kB super-packets; receive work on one CPU so veth does not reorder
        self.exec(ns, "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off")
        self.exec(ns, "sh", "-c", f"echo 1 > /sys/class/net/{dev}/queues/rx-0/rps_cpus")

    def set_bottleneck(self, rate_mbit: int) -> None:
        """HTB at `rate_mbit` on the router's egress toward B."""
        dev = self.r_to_b
        run(["ip", "netns", "exec", self.ns_r, "tc", "qdisc", "replace", "dev", dev, "root",
             "handle", "1:", "htb", "default", "10"])
        run(["ip", "netns", "exec", self.ns_r, "tc", "class", "replace", "dev", dev, "parent", "1:",
             "classid", "1:10", "htb", "rate", f"{rate_mbit}mbit", "ceil", f"{rate_mbit}mbit"])

    def teardown(self) -> None:
        for ns in (self.ns_a, self.ns_r, self.ns_b):
            pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if pids:
                time.sleep(0.05)
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)

    def __enter__(self) -> "Line":
        try:
            self.build()
        except BaseException:
            self.teardown()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.teardown()
