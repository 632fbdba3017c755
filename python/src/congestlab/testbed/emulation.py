"""Link impairments (delay, jitter, loss) of a spec's links: netem where the kernel has it,
congestlab's NFQUEUE emulator linkem where it does not (or when the spec asks for it).

Both act at the node's end of the link. netem is an egress qdisc: the node's egress uses the
node's interface, its ingress the switch port's egress (under the HTB class when the link is
shaped, in place of the packet FIFO). linkem holds packets in user space from an iptables
NFQUEUE rule in the node's namespace: egress `-o dev` (OUTPUT on a host, FORWARD on a
router), ingress `-i dev` (INPUT on a host, FORWARD on a router). A packet meets at most one
linkem element per namespace: NFQUEUE's verdict ends its walk through the chain. A host's
ingress delay comes after the kernel stamps the packet's arrival: TCP and applications see
it, a ping reading kernel stamps does not (use `ping -U`).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from congestlab.errors import TestbedError
from congestlab.linkem.element import LinkemElement
from congestlab.testbed.layout import Interface, Layout, NodeLayout
from congestlab.testbed.plan import Step

FIRST_QUEUE_NUM = 100
UNSHAPED_NETEM_LIMIT_PACKETS = 1000


@dataclass(frozen=True)
class Impairment:
    """One direction of one impaired link end."""

    node: str
    namespace: str
    dev: str  # the node's interface
    direction: str  # "egress" (leaving the node) or "ingress" (arriving at it)
    router: bool
    iface: Interface

    @property
    def label(self) -> str:
        return f"{self.node}/{self.dev}/{self.direction}"


def impairments(layout: Layout) -> list[Impairment]:
    found = []
    for node in layout.nodes.values():
        for iface in node.interfaces:
            if not iface.impaired:
                continue
            directions = ("egress", "ingress") if iface.impair_direction == "both" else (iface.impair_direction,)
            found += [Impairment(node.name, node.namespace, iface.dev, d, node.kind == "router", iface)
                      for d in directions]
    return found


def netem_probe(namespace: str) -> tuple[bool, str]:
    """A real attempt: a netem qdisc on the namespace's loopback, removed at once."""
    add = subprocess.run(["tc", "-n", namespace, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"],
                         capture_output=True, text=True, timeout=10)
    if add.returncode != 0:
        return False, (add.stderr or add.stdout).strip()
    subprocess.run(["tc", "-n", namespace, "qdisc", "del", "dev", "lo", "root"], capture_output=True, timeout=10)
    return True, ""


def choose_emulator(requested: str, netem_ok: bool, netem_error: str) -> str:
    if requested == "netem" and not netem_ok:
        raise TestbedError(f"topology.link_emulator = \"netem\" but this kernel has no netem: {netem_error}")
    if requested == "linkem":
        return "linkem"
    return "netem" if netem_ok else "linkem"


def netem_args(iface: Interface, limit_packets: int) -> tuple[str, ...]:
    args = ["netem", "limit", str(limit_packets), "delay", f"{iface.delay_ms:g}ms"]
    if iface.jitter_ms:
        args.append(f"{iface.jitter_ms:g}ms")
    if iface.loss:
        args += ["loss", f"{iface.loss * 100:g}%"]
    return tuple(args)


def netem_steps(layout: Layout, found: list[Impairment]) -> list[Step]:
    """netem on the egress that carries each impaired direction (see the module text)."""
    steps = []
    for imp in found:
        iface = imp.iface
        ns, dev = ((imp.namespace, imp.dev) if imp.direction == "egress"
                   else (layout.switch_namespaces[iface.switch], iface.port))
        if iface.rate_bps:  # in place of the FIFO under the HTB class of the shaper
            argv = ("tc", "-n", ns, "qdisc", "replace", "dev", dev, "parent", "1:10", "handle", "10:",
                    *netem_args(iface, iface.queue_packets))
        else:
            argv = ("tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "handle", "1:",
                    *netem_args(iface, UNSHAPED_NETEM_LIMIT_PACKETS))
        steps.append(Step("impairments", argv))
    return steps


def linkem_elements(found: list[Impairment], log_dir: Path | None, seed: int = 1) -> list:
    """One linkem element per impaired direction, each on its own NFQUEUE number."""
    elements = []
    for index, imp in enumerate(found):
        egress = imp.direction == "egress"
        chain = "FORWARD" if imp.router else ("OUTPUT" if egress else "INPUT")
        elements.append(LinkemElement(
            netns=imp.namespace, queue_num=FIRST_QUEUE_NUM + index,
            delay_ms=imp.iface.delay_ms, jitter_ms=imp.iface.jitter_ms, loss=imp.iface.loss,
            out_iface=imp.dev if egress else None, in_iface=None if egress else imp.dev,
            chain=chain, seed=seed + index, log_dir=log_dir))
    return elements


def user_stack_impairments(layout: Layout) -> list[NodeLayout]:
    """Nodes whose kernel only bridges (a user-space stack): netfilter never sees their packets."""
    return [n for n in layout.nodes.values() if n.stack == "user" and any(i.impaired for i in n.interfaces)]
