"""A small host A — router R — host B line of namespaces for linkem's tests and the tcp-lab study.

Not the project's spine testbed (that is testbed/, built from a spec's topology): just enough
to put linkem and a bottleneck qdisc on a router. Its commands are built as data
(`build_steps()`, testbed.plan.Step) and run by the testbed's executor, which raises on any
failure; teardown kills every PID in the namespaces, then deletes them (testbed.namespaces),
also when setup failed half-way. Addresses are private and live only inside these namespaces.
"""

from __future__ import annotations

import signal
import subprocess
from dataclasses import dataclass

from congestlab.testbed.executor import Executor, run_argv
from congestlab.testbed.namespaces import delete_namespace
from congestlab.testbed.plan import Step


def run(argv: list[str], timeout_s: float = 30) -> str:
    return run_argv(argv, timeout_s=timeout_s).stdout


@dataclass
class Line:
    """`prefix` must be short and unique (e.g. 't1a2b'); names stay within 15 characters.

    `cc`: congestion control of A and B, set per route (`congctl`), because a namespace's
    sysctl may not select one outside the machine's allowed list (see ARCHITECTURE.md).
    """

    prefix: str
    subnet_a: str = "10.201.1"
    subnet_b: str = "10.201.2"
    cc: str | None = None

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
    def namespaces(self) -> list[str]:
        return [self.ns_a, self.ns_r, self.ns_b]

    @property
    def dev_a(self) -> str:  # A's interface toward R
        return f"{self.prefix}-a0"

    @property
    def dev_b(self) -> str:  # B's interface toward R
        return f"{self.prefix}-b0"

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

    # --- the line as data -----------------------------------------------------------
    def build_steps(self) -> list[Step]:
        steps = [Step("namespaces", ("ip", "netns", "add", ns)) for ns in self.namespaces]
        steps += [Step("namespaces", ("ip", "-n", ns, "link", "set", "lo", "up")) for ns in self.namespaces]
        for host_ns, host_dev, r_dev in ((self.ns_a, self.dev_a, self.r_to_a), (self.ns_b, self.dev_b, self.r_to_b)):
            steps.append(Step("links", ("ip", "link", "add", host_dev, "netns", host_ns, "type", "veth",
                                        "peer", "name", r_dev, "netns", self.ns_r)))
        for ns, dev, addr, gw in ((self.ns_a, self.dev_a, self.addr_a, f"{self.subnet_a}.1"),
                                  (self.ns_b, self.dev_b, self.addr_b, f"{self.subnet_b}.1")):
            steps.append(Step("addresses", ("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", dev)))
            steps.append(Step("addresses", ("ip", "-n", ns, "link", "set", dev, "up")))
            steps.append(self._tune_step(ns, [dev]))
            congctl = ("congctl", self.cc) if self.cc else ()
            steps.append(Step("routes", ("ip", "-n", ns, "route", "add", "default", "via", gw, *congctl)))
        for dev, subnet in ((self.r_to_a, self.subnet_a), (self.r_to_b, self.subnet_b)):
            steps.append(Step("addresses", ("ip", "-n", self.ns_r, "addr", "add", f"{subnet}.1/24", "dev", dev)))
            steps.append(Step("addresses", ("ip", "-n", self.ns_r, "link", "set", dev, "up")))
        steps.append(self._tune_step(self.ns_r, [self.r_to_a, self.r_to_b]))
        steps.append(Step("sysctls", ("ip", "netns", "exec", self.ns_r, "sysctl", "-qw", "net.ipv4.ip_forward=1")))
        for ns in (self.ns_a, self.ns_b):
            # enough window for 100 Mbit/s x 40 ms (500 kB) with room to spare
            steps.append(Step("sysctls", ("ip", "netns", "exec", ns, "sysctl", "-qw",
                                          "net.ipv4.tcp_rmem=4096 131072 16777216",
                                          "net.ipv4.tcp_wmem=4096 65536 16777216")))
        return steps

    @staticmethod
    def _tune_step(ns: str, devs: list[str]) -> Step:
        # no 64 kB super-packets; receive work on one CPU so veth does not reorder
        script = "\n".join(f"ethtool -K {d} tso off gso off gro off >/dev/null\n"
                           f"echo 1 > /sys/class/net/{d}/queues/rx-0/rps_cpus" for d in devs)
        return Step("tuning", ("ip", "netns", "exec", ns, "sh", "-ec", script))

    def build(self) -> None:
        Executor().run(self.build_steps())

    def set_bottleneck(self, rate_mbit: int) -> None:
        """HTB at `rate_mbit` on the router's egress toward B."""
        dev = self.r_to_b
        run(["ip", "netns", "exec", self.ns_r, "tc", "qdisc", "replace", "dev", dev, "root",
             "handle", "1:", "htb", "default", "10"])
        run(["ip", "netns", "exec", self.ns_r, "tc", "class", "replace", "dev", dev, "parent", "1:",
             "classid", "1:10", "htb", "rate", f"{rate_mbit}mbit", "ceil", f"{rate_mbit}mbit"])

    def teardown(self) -> None:
        """Kill every process in our namespaces by PID, then delete them; signals held off
        meanwhile so a second Ctrl-C cannot leave half a line."""
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
            existing = set(subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split())
            for ns in self.namespaces:
                if ns in existing:
                    delete_namespace(ns)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)

    def __enter__(self) -> "Line":
        try:
            self.build()
        except BaseException:
            self.teardown()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.teardown()
