"""The emulated test LAN: namespaces, veth, bridges, routes, qdiscs; torn down always."""

from __future__ import annotations

import secrets
import signal
import subprocess
import time
from pathlib import Path
from typing import IO

from congestlab.errors import CongestlabError, TestbedError
from congestlab.spec.models import TopologySpec
from congestlab.testbed import emulation
from congestlab.testbed.executor import Executor, run_argv
from congestlab.testbed.layout import Layout, build_layout
from congestlab.testbed.plan import Step
from congestlab.testbed.namespaces import delete_namespace, forget_owner, kill_pids, record_owner, stop_processes
from congestlab.testbed.plan import (
    build_plan,
    congestion_control_steps,
    leaf_step,
    link_shaper_steps,
    sysctl_step,
    teardown_order,
)


def new_prefix() -> str:
    return "cl" + secrets.token_hex(3)


class Testbed:
    """Context manager: builds the plan on enter, tears everything down on exit."""

    __test__ = False

    def __init__(self, topology: TopologySpec, prefix: str | None = None, kernel_cc: dict[str, str] | None = None,
                 run_dir: str = ""):
        self.prefix = prefix or new_prefix()
        self.layout: Layout = build_layout(topology, self.prefix)
        self.plan = build_plan(self.layout, kernel_cc)
        self.kernel_cc = dict(kernel_cc or {})
        self.link_emulator_requested = topology.link_emulator
        self.impairments = emulation.impairments(self.layout)
        self.emulation: dict = {}  # what realises the impairments, for the manifest
        self._linkem: list = []
        self.executor = Executor()
        self.run_dir = run_dir
        self.processes: list[subprocess.Popen] = []
        self.setup_s = 0.0
        self.teardown_s = 0.0
        self._created: list[str] = []

    def __enter__(self) -> "Testbed":
        try:
            self.build()
        except BaseException:
            self.teardown()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.teardown()

    def build(self) -> None:
        start = time.monotonic()
        record_owner(self.prefix, self.run_dir)
        self._created = self.layout.namespaces()  # teardown tolerates ones never made
        self.executor.run(self.plan)
        if self.impairments:
            self._impair_links()
        self.setup_s = time.monotonic() - start

    def _impair_links(self) -> None:
        netem_ok, netem_error = emulation.netem_probe(self.layout.namespaces()[0])
        chosen = emulation.choose_emulator(self.link_emulator_requested, netem_ok, netem_error)
        history = {k: self.emulation[k] for k in ("linkem_counters_before_changes",) if k in self.emulation}
        self.emulation = history | {"requested": self.link_emulator_requested, "emulator": chosen,
                          "netem_available": netem_ok, "netem_probe_error": netem_error,
                          "links": [imp.label for imp in self.impairments]}
        if chosen == "netem":
            steps = emulation.netem_steps(self.layout, self.impairments)
            self.executor.run(steps)
            self.emulation["commands"] = [" ".join(s.argv) for s in steps]
            return
        bridged = emulation.user_stack_impairments(self.layout)
        if bridged:
            raise TestbedError(f"node {bridged[0].name}: linkem cannot impair a user-space stack's link "
                               "(its kernel only bridges); impair the router's end of that link")
        log_dir = Path(self.run_dir) / "logs" / "linkem" if self.run_dir else None
        for element in emulation.linkem_elements(self.impairments, log_dir):
            self._linkem.append(element)
            element.start()
        self.emulation["linkem"] = [{"link": imp.label, "argv": e.linkem_argv(), "chain": e.chain}
                                    for imp, e in zip(self.impairments, self._linkem)]

    def _stop_emulation(self) -> dict[str, dict]:
        """Stop every linkem element (their counters) or take netem off, before a change."""
        final = {}
        for imp, element in zip(self.impairments, self._linkem):
            final[imp.label] = element.stop()
        self._linkem.clear()
        if self.emulation.get("emulator") == "netem":
            steps = []
            for imp in self.impairments:
                iface = imp.iface
                ns, dev = ((imp.namespace, imp.dev) if imp.direction == "egress"
                           else (self.layout.switch_namespaces[iface.switch], iface.port))
                steps.append(leaf_step(ns, dev, iface.queue_packets, iface, "replace", "impairments")
                             if iface.rate_bps else Step("impairments", ("tc", "-n", ns, "qdisc", "del", "dev", dev,
                                                                        "root")))
            self.executor.run(steps)
        return final

    def reconfigure(self, topology: TopologySpec, kernel_cc: dict[str, str] | None = None) -> list[str]:
        """Move the built testbed to `topology`, which may differ only in link rates,
        queues, token buckets, delay/jitter/loss, sysctls, timestamps and congestion
        controls (what a sweep axis changes). Returns what changed, one line each."""
        new = build_layout(topology, self.prefix)
        kernel_cc = dict(kernel_cc or {})
        _same_structure(self.layout, new)
        steps, changes = [], []
        for name, node in new.nodes.items():
            old = self.layout.nodes[name]
            for was, now in zip(old.interfaces, node.interfaces):
                if (was.rate_bps, was.queue_packets, was.tbf_rate_bps, was.tbf_burst_bytes, was.tbf_latency_ms) != (
                        now.rate_bps, now.queue_packets, now.tbf_rate_bps, now.tbf_burst_bytes, now.tbf_latency_ms):
                    steps += link_shaper_steps(new, now, "change")
                    changes.append(f"{name}/{now.dev}: rate {now.rate_bps}, queue {now.queue_packets}, "
                                   f"tbf {now.tbf_rate_bps}")
            if old.sysctls != node.sysctls or old.tcp_timestamps != node.tcp_timestamps:
                dropped = set(old.sysctls) - set(node.sysctls)
                if dropped:
                    raise TestbedError(f"node {name}: sysctl {sorted(dropped)[0]} is set at one point and not at the "
                                       "next; give it a value in the spec itself so every point sets it")
                node.sysctls["net.ipv4.tcp_timestamps"] = "1" if node.tcp_timestamps else "0"
                steps.append(sysctl_step(node))
                del node.sysctls["net.ipv4.tcp_timestamps"]
                changes.append(f"{name}: sysctls {node.sysctls}, timestamps {node.tcp_timestamps}")
            if node.kind == "host" and node.stack == "kernel" and kernel_cc.get(name) != self.kernel_cc.get(name):
                if kernel_cc.get(name):
                    steps += congestion_control_steps(new, name, kernel_cc[name])
                    changes.append(f"{name}: congestion control {kernel_cc[name]}")
        impaired_before = [(i.label, i.iface.delay_ms, i.iface.jitter_ms, i.iface.loss) for i in self.impairments]
        new_impairments = emulation.impairments(new)
        impaired_after = [(i.label, i.iface.delay_ms, i.iface.jitter_ms, i.iface.loss) for i in new_impairments]
        emulation_changed = impaired_before != impaired_after
        if emulation_changed and self.impairments:
            self.emulation.setdefault("linkem_counters_before_changes", []).append(self._stop_emulation())
        self.executor.run(steps)
        self.layout = new
        self.kernel_cc = kernel_cc
        if emulation_changed:
            self.impairments = new_impairments
            if new_impairments:
                self._impair_links()
            changes.append("impairments: " + (", ".join(f"{label} delay {d:g} ms jitter {j:g} ms loss {p:g}"
                                                        for label, d, j, p in impaired_after) or "none"))
        return changes

    def linkem_stats(self) -> dict[str, dict]:
        """Current counters of every linkem element (packets delayed, dropped, ...)."""
        return {imp.label: element.stats() for imp, element in zip(self.impairments, self._linkem)}

    def teardown(self) -> None:
        """Stop our processes, kill what else lives in our namespaces, delete them.
        Signals are held off meanwhile so a second Ctrl-C cannot leave half a testbed."""
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
            start = time.monotonic()
            final = {}
            for imp, element in zip(self.impairments, self._linkem):
                try:
                    final[imp.label] = element.stop()
                except CongestlabError:
                    pass  # its namespace goes next, with every process and rule in it
            if self._linkem:
                self.emulation["linkem_final_counters"] = final
            self._linkem.clear()
            stop_processes(self.processes)
            created = set(self._created)
            for ns in teardown_order(self.layout):
                if ns in created:
                    delete_namespace(ns)
            self._created = []
            forget_owner(self.prefix)
            self.teardown_s = time.monotonic() - start
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)

    # --- running things inside the testbed -------------------------------------------
    def ns(self, node: str) -> str:
        return self.layout.ns(node)

    def address(self, node: str, family: str) -> str:
        return self.layout.nodes[node].address(family)

    def run(self, node: str, argv: list[str], timeout_s: float = 30.0, check: bool = True,
            input_text: str | None = None) -> subprocess.CompletedProcess:
        return run_argv(["ip", "netns", "exec", self.ns(node), *argv], timeout_s=timeout_s, check=check,
                        input_text=input_text)

    def start(self, node: str, argv: list[str], stdout: IO | int | None = subprocess.DEVNULL,
              stderr: IO | int | None = subprocess.DEVNULL, env: dict[str, str] | None = None,
              stdin: IO | int | None = None) -> subprocess.Popen:
        """Start a process in `node`'s namespace; it is killed by PID at teardown."""
        full = ["ip", "netns", "exec", self.ns(node), *argv]
        try:
            proc = subprocess.Popen(full, stdin=stdin, stdout=stdout, stderr=stderr, env=env, start_new_session=True)
        except FileNotFoundError:
            raise TestbedError(f"cannot start {argv[0]}: ip not found") from None
        self.processes.append(proc)
        return proc

    def stop(self, proc: subprocess.Popen, grace_s: float = 3.0) -> int | None:
        if proc.poll() is None:
            kill_pids([proc.pid], grace_s=grace_s)
        try:
            return proc.wait(timeout=grace_s)
        finally:
            if proc in self.processes:
                self.processes.remove(proc)

    def show(self, argv: list[str]) -> str:
        """A read-only query of the testbed's state (e.g. `tc -n NS -s qdisc show dev D`)."""
        return self.executor.query(argv)

    def ping(self, src: str, dst: str, family: str, count: int = 1, timeout_s: float = 3.0) -> None:
        addr = self.address(dst, family)
        argv = ["ping", "-4" if family == "v4" else "-6", "-c", str(count), "-W", str(int(timeout_s)), "-q", addr]
        proc = self.run(src, argv, timeout_s=timeout_s * count + 2, check=False)
        if proc.returncode != 0:
            raise TestbedError(f"no route from {src} to {dst} over {family} ({addr})")

    def describe(self) -> dict:
        return {
            "prefix": self.prefix,
            "link_emulation": self.emulation,
            "namespaces": self.layout.namespaces(),
            "nodes": {
                name: {
                    "namespace": n.namespace,
                    "kind": n.kind,
                    "interfaces": [
                        {"dev": i.dev, "switch": i.switch, "addr4": i.addr4, "addr6": i.addr6,
                         "rate_bps": i.rate_bps, "queue_packets": i.queue_packets if i.rate_bps else None}
                        for i in n.interfaces
                    ],
                    "routes": [f"{r.family} {r.dest} via {r.via} dev {r.dev}" for r in n.routes],
                }
                for name, n in self.layout.nodes.items()
            },
        }


def _same_structure(old: Layout, new: Layout) -> None:
    def shape(layout: Layout):
        return {name: (n.kind, n.stack, [(i.dev, i.switch, i.addr4, i.addr6, i.rate_bps is None)
                                         for i in n.interfaces], n.routes)
                for name, n in layout.nodes.items()}

    if shape(old) != shape(new):
        raise TestbedError("a point changes the testbed's structure (nodes, links, addresses, or shaping on/off); "
                           "sweep axes may change link rates, queues, delay, loss, sysctls and cc only")


__all__ = ["Testbed", "new_prefix"]
