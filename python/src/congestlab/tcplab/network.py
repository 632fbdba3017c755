"""The study's two hosts as namespaces A (client) and B (server), joined through router R
which carries the shaping (the 100 Mbit/s "cable": HTB + FIFO, per point a tbf below it) and
the delay/loss (netem where the kernel has it, else linkem).

Built on congestlab.linkem.line.Line (commands as data, run by the testbed executor).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from congestlab.errors import SpecError, TestbedError
from congestlab.linkem import LinkemElement
from congestlab.linkem.line import Line
from congestlab.paths import rust_binary
from congestlab.tcplab.sweeps import CABLE_RATE_MBIT, Network
from congestlab.testbed.executor import Executor
from congestlab.testbed.plan import shaper_steps

CABLE_QUEUE_PACKETS = 1000  # Linux's default txqueuelen, as on the study's NICs
TBF_BURST = "5kb"  # the study's `tbf ... latency 50ms burst 5kb`
TBF_LATENCY = "50ms"
LINKEM_QUEUE_A_TO_B = 10
LINKEM_QUEUE_B_TO_A = 11
LINKEM_SEED = 7
EMULATORS = ("auto", "netem", "linkem")


@dataclass
class LabNetwork:
    prefix: str
    emulator: str = "auto"
    cc: str = "cubic"  # the study's Linux 2.6.35 default
    log_dir: str | None = None
    line: Line = field(init=False)
    netem_available: bool | None = field(default=None, init=False)
    netem_probe_error: str = field(default="", init=False)
    emulator_used: str = field(default="", init=False)

    def __post_init__(self) -> None:
        if self.emulator not in EMULATORS:
            raise SpecError("tcp-lab emulator", f"must be one of {', '.join(EMULATORS)}, got {self.emulator!r}")
        self.line = Line(prefix=self.prefix, subnet_a="10.203.1", subnet_b="10.203.2", cc=self.cc)

    # --- lifecycle -----------------------------------------------------------------
    def __enter__(self) -> "LabNetwork":
        self.line.__enter__()
        try:
            Executor().run(self.cable_steps())
            self._choose_emulator()
        except BaseException:
            self.line.teardown()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.line.teardown()

    def cable_steps(self):
        """The 100 Mbit/s cable both ways on R's egress (the bottleneck sits on a router: a
        limit on the sender's own interface builds no queue)."""
        rate_bps = CABLE_RATE_MBIT * 1_000_000
        return (shaper_steps(self.line.ns_r, self.line.r_to_b, rate_bps, CABLE_QUEUE_PACKETS)
                + shaper_steps(self.line.ns_r, self.line.r_to_a, rate_bps, CABLE_QUEUE_PACKETS))

    def _choose_emulator(self) -> None:
        """A real attempt: add a netem qdisc on R's loopback, remove it again."""
        probe = subprocess.run(["ip", "netns", "exec", self.line.ns_r, "tc", "qdisc", "add", "dev", "lo", "root",
                                "netem", "delay", "1ms"], capture_output=True, text=True, timeout=10)
        self.netem_available = probe.returncode == 0
        self.netem_probe_error = (probe.stderr or "").strip()
        if self.netem_available:
            self._tc("qdisc", "del", "dev", "lo", "root")
        if self.emulator == "netem" and not self.netem_available:
            raise TestbedError(f"netem requested but this kernel has none: {self.netem_probe_error}")
        if self.emulator == "auto":
            self.emulator_used = "netem" if self.netem_available else "linkem"
        else:
            self.emulator_used = self.emulator
        if self.emulator_used == "linkem":
            rust_binary("linkem")  # one clear line now if it is not built

    def describe(self) -> dict:
        line = self.line
        return {
            "prefix": self.prefix,
            "namespaces": {"client_A": line.ns_a, "router_R": line.ns_r, "server_B": line.ns_b},
            "addresses": {"client_A": line.addr_a, "server_B": line.addr_b},
            "cable": {"rate_mbit": CABLE_RATE_MBIT, "queue_packets": CABLE_QUEUE_PACKETS,
                      "where": f"HTB+pfifo on {line.ns_r} egress {line.r_to_b} (A->B) and {line.r_to_a} (B->A)"},
            "per_point_rate": f"tbf rate R burst {TBF_BURST} latency {TBF_LATENCY} as the cable's leaf (A->B)",
            "delay_loss_direction": "A->B only, as the study's netem on the client's egress and loss at the server",
            "congestion_control": f"{self.cc} (per route, congctl)",
            "netem_available": self.netem_available,
            "netem_probe_error": self.netem_probe_error,
            "emulator": self.emulator_used,
            "setup_commands": [str(s) for s in line.build_steps() + self.cable_steps()],
        }

    # --- per point ------------------------------------------------------------------
    @contextmanager
    def configured(self, a_to_b: Network, b_to_a_delay_ms: float = 0.0, label: str = "point") -> Iterator[dict]:
        """Apply a point's rate/delay/jitter/loss; undo on exit. Yields what was applied."""
        applied: dict = {"emulator": self.emulator_used if (a_to_b.emulated or b_to_a_delay_ms) else None}
        with ExitStack() as stack:
            if self.emulator_used == "netem":
                self._netem_leaf(self.line.r_to_b, a_to_b)
                stack.callback(self._fifo_leaf, self.line.r_to_b)
                if b_to_a_delay_ms:
                    self._netem_leaf(self.line.r_to_a, Network(delay_ms=b_to_a_delay_ms))
                    stack.callback(self._fifo_leaf, self.line.r_to_a)
            else:
                if a_to_b.tbf_rate_kbit:
                    self._tbf_leaf(self.line.r_to_b, a_to_b.tbf_rate_kbit)
                    stack.callback(self._fifo_leaf, self.line.r_to_b)
                elements = []
                if a_to_b.emulated:
                    elements.append(self._linkem(LINKEM_QUEUE_A_TO_B, self.line.r_to_a, self.line.r_to_b, a_to_b,
                                                 label))
                if b_to_a_delay_ms:
                    elements.append(self._linkem(LINKEM_QUEUE_B_TO_A, self.line.r_to_b, self.line.r_to_a,
                                                 Network(delay_ms=b_to_a_delay_ms), label))
                for element in elements:
                    stack.enter_context(element)
                applied["linkem"] = elements
            yield applied

    def _linkem(self, queue: int, in_iface: str, out_iface: str, net: Network, label: str) -> LinkemElement:
        log_dir = Path(self.log_dir) / "linkem" / label if self.log_dir else None
        return LinkemElement(netns=self.line.ns_r, queue_num=queue, in_iface=in_iface, out_iface=out_iface,
                             delay_ms=net.delay_ms, jitter_ms=net.jitter_ms, loss=net.loss, seed=LINKEM_SEED,
                             families=("ipv4",), log_dir=log_dir)

    def _tc(self, *args: str) -> None:
        Executor(batch=False).run([_tc_step(self.line.ns_r, args)])

    def _set_leaf(self, dev: str, *kind_args: str) -> None:
        """Swap the cable class's leaf qdisc (tc cannot `replace` one kind by another)."""
        self._tc("qdisc", "del", "dev", dev, "parent", "1:10", "handle", "10:")
        self._tc("qdisc", "add", "dev", dev, "parent", "1:10", "handle", "10:", *kind_args)

    def _fifo_leaf(self, dev: str) -> None:
        self._set_leaf(dev, "pfifo", "limit", str(CABLE_QUEUE_PACKETS))

    def _tbf_leaf(self, dev: str, rate_kbit: int) -> None:
        self._set_leaf(dev, "tbf", "rate", f"{rate_kbit}kbit", "burst", TBF_BURST, "latency", TBF_LATENCY)

    def _netem_leaf(self, dev: str, net: Network) -> None:
        """netem under the cable's HTB class; a tbf under netem when the point sets a rate."""
        args = ["netem", "limit", str(CABLE_QUEUE_PACKETS), "delay", f"{net.delay_ms:g}ms"]
        if net.jitter_ms:
            args.append(f"{net.jitter_ms:g}ms")
        if net.loss:
            args += ["loss", f"{net.loss * 100:g}%"]
        self._set_leaf(dev, *args)
        if net.tbf_rate_kbit:
            self._tc("qdisc", "add", "dev", dev, "parent", "10:1", "handle", "20:", "tbf",
                     "rate", f"{net.tbf_rate_kbit}kbit", "burst", TBF_BURST, "latency", TBF_LATENCY)

    def qdisc_stats(self) -> dict:
        """`tc -s -j qdisc` of R's two egress devices (drops, backlog) for the manifest."""
        import json

        out = {}
        for dev in (self.line.r_to_b, self.line.r_to_a):
            proc = subprocess.run(["ip", "netns", "exec", self.line.ns_r, "tc", "-s", "-j", "qdisc", "show",
                                   "dev", dev], capture_output=True, text=True, timeout=10)
            try:
                out[dev] = [{k: q.get(k) for k in ("kind", "handle", "parent", "bytes", "packets", "drops",
                                                   "overlimits")} for q in json.loads(proc.stdout or "[]")]
            except ValueError:
                out[dev] = proc.stdout.strip()
        return out


def _tc_step(ns: str, args: tuple[str, ...]):
    from congestlab.testbed.plan import Step

    return Step("point", ("tc", "-n", ns, *args))
