"""Names and addresses of a testbed, derived from the topology spec and a run id.

Every namespace carries the run's prefix (`cl<6 hex>-`), so two runs never collide and
`congestlab clean` can recognise leftovers. Interfaces live only inside our namespaces.
"""

from __future__ import annotations

import ipaddress
import re
from collections import deque
from dataclasses import dataclass, field

from congestlab.errors import SpecError
from congestlab.spec.addresses import host_ids
from congestlab.spec.models import TopologySpec
from congestlab.spec.network import shaped_rate_bps

PREFIX_RE = re.compile(r"^cl[0-9a-f]{6}$")
NAMESPACE_RE = re.compile(r"^(cl[0-9a-f]{6})-")


@dataclass(frozen=True)
class Interface:
    node: str
    dev: str  # name inside the node's namespace
    switch: str
    port: str  # the switch-side veth end, inside the switch namespace
    addr4: str
    addr6: str
    prefix4: int
    prefix6: int
    rate_bps: int | None
    queue_packets: int
    # a token bucket under the HTB class in place of the FIFO (the lab report's tbf)
    tbf_rate_bps: int | None = None
    tbf_burst_bytes: int = 5120
    tbf_latency_ms: float = 50.0
    # link impairments (testbed/emulation.py realises them with netem or linkem)
    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    loss: float = 0.0
    impair_direction: str = "both"

    @property
    def impaired(self) -> bool:
        return self.delay_ms > 0 or self.jitter_ms > 0 or self.loss > 0


@dataclass(frozen=True)
class Route:
    family: str  # "v4" | "v6"
    dest: str  # "default" or a network
    via: str
    dev: str


@dataclass
class NodeLayout:
    name: str
    kind: str
    namespace: str
    cc: str
    tcp_timestamps: bool
    stack: str = "kernel"
    sysctls: dict[str, str] = field(default_factory=dict)
    interfaces: list[Interface] = field(default_factory=list)
    routes: list[Route] = field(default_factory=list)

    def address(self, family: str) -> str:
        iface = self.interfaces[0]
        return iface.addr4 if family == "v4" else iface.addr6


@dataclass
class Layout:
    prefix: str
    nodes: dict[str, NodeLayout]
    switch_namespaces: dict[str, str]

    def namespaces(self) -> list[str]:
        return [n.namespace for n in self.nodes.values()] + list(self.switch_namespaces.values())

    def ns(self, node: str) -> str:
        return self.nodes[node].namespace


def _sysctl_value(value) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def build_layout(topology: TopologySpec, prefix: str) -> Layout:
    if not PREFIX_RE.match(prefix):
        raise ValueError(f"run prefix {prefix!r} must look like cl1a2b3c")
    subnets = {s.name: (ipaddress.ip_network(s.subnet4), ipaddress.ip_network(s.subnet6)) for s in topology.switches}
    try:
        ids = host_ids(topology)  # (a loaded spec was checked already: spec/addresses.py)
    except ValueError as err:
        where, _, problem = str(err).partition(": ")
        raise SpecError(where, problem) from None
    nodes: dict[str, NodeLayout] = {}
    for node in topology.nodes:
        layout = NodeLayout(node.name, node.kind, f"{prefix}-{node.name}", node.cc, node.tcp_timestamps,
                            node.stack, {k: _sysctl_value(v) for k, v in node.sysctls.items()})
        for index, link in enumerate(node.links):
            host_id = ids[(node.name, link.switch)]
            net4, net6 = subnets[link.switch]
            shaped = shaped_rate_bps(topology, link)
            layout.interfaces.append(
                Interface(
                    node=node.name,
                    dev=f"eth{index}",
                    switch=link.switch,
                    port=f"p-{node.name}",
                    addr4=str(net4.network_address + host_id),
                    addr6=str(net6.network_address + host_id),
                    prefix4=net4.prefixlen,
                    prefix6=net6.prefixlen,
                    rate_bps=shaped,
                    queue_packets=link.queue_packets,
                    tbf_rate_bps=link.tbf_rate_bps if shaped else None,
                    tbf_burst_bytes=link.tbf_burst_bytes,
                    tbf_latency_ms=link.tbf_latency_ms,
                    delay_ms=link.delay_ms,
                    jitter_ms=link.jitter_ms,
                    loss=link.loss,
                    impair_direction=link.impair_direction,
                )
            )
        nodes[node.name] = layout
    _add_routes(nodes, topology, subnets)
    switch_ns = {s.name: f"{prefix}-sw-{s.name}" for s in topology.switches}
    return Layout(prefix, nodes, switch_ns)


def _add_routes(nodes: dict[str, NodeLayout], topology: TopologySpec, subnets: dict) -> None:
    """Static routes from a breadth-first search over switches, crossing only routers."""
    on_switch: dict[str, list[NodeLayout]] = {s.name: [] for s in topology.switches}
    for node in nodes.values():
        for iface in node.interfaces:
            on_switch[iface.switch].append(node)

    def iface_on(node: NodeLayout, switch: str) -> Interface:
        return next(i for i in node.interfaces if i.switch == switch)

    for node in nodes.values():
        own = {i.switch for i in node.interfaces}
        routers_here = [r for sw in own for r in on_switch[sw] if r.kind == "router" and r is not node]
        if node.kind == "host" and len(routers_here) == 1:
            router, sw = routers_here[0], node.interfaces[0].switch
            gw = iface_on(router, sw)
            node.routes.append(Route("v4", "default", gw.addr4, node.interfaces[0].dev))
            node.routes.append(Route("v6", "default", gw.addr6, node.interfaces[0].dev))
            continue
        # next hop per reachable switch: (gateway interface on our switch, our device)
        hop: dict[str, tuple[Interface, str]] = {}
        queue: deque[str] = deque(own)
        seen = set(own)
        while queue:
            sw = queue.popleft()
            for router in on_switch[sw]:
                if router.kind != "router" or router is node:
                    continue
                for other in router.interfaces:
                    if other.switch in seen:
                        continue
                    seen.add(other.switch)
                    if sw in own:
                        hop[other.switch] = (iface_on(router, sw), iface_on(node, sw).dev)
                    else:
                        hop[other.switch] = hop[sw]
                    queue.append(other.switch)
        for sw, (gw, dev) in hop.items():
            net4, net6 = subnets[sw]
            node.routes.append(Route("v4", str(net4), gw.addr4, dev))
            node.routes.append(Route("v6", str(net6), gw.addr6, dev))
