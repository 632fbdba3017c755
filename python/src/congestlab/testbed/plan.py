"""The testbed as data: every command that builds the emulated LAN, in order.

`congestlab run SPEC --dry-run` prints this plan; the executor runs it. Commands target
our namespaces only (`ip -n NS`, `tc -n NS`, `ip netns exec NS`); the veth pairs are
created directly inside their namespaces, so the root namespace is never touched.
"""

from __future__ import annotations

import ipaddress
import shlex
from dataclasses import dataclass

from congestlab.spec.network import HTB_BURST_BYTES
from congestlab.testbed.layout import Interface, Layout, NodeLayout, Route

USER_STACK_BRIDGE = "br0"
USER_STACK_TAP = "tap0"


@dataclass(frozen=True)
class Step:
    phase: str
    argv: tuple[str, ...]

    def __str__(self) -> str:
        return shlex.join(self.argv)

    @property
    def batch_key(self) -> tuple[str, str] | None:
        """(tool, namespace) when the step may join an `ip -batch`/`tc -batch` run."""
        a = self.argv
        if len(a) > 3 and a[0] in ("ip", "tc") and a[1] == "-n":
            return (a[0], a[2])
        return None


def _ip(ns: str, *args: str, phase: str) -> Step:
    return Step(phase, ("ip", "-n", ns, *args))


def _tc(ns: str, *args: str, phase: str) -> Step:
    return Step(phase, ("tc", "-n", ns, *args))


# Where br_netfilter is loaded, every frame a bridge forwards passes iptables' hooks: about a
# tenth of leanweb's per-frame time where it was measured (docs/notes/leantcp-sending-speed.md),
# as its frames cross its node's own bridge. Nothing filters in a user-stack node's
# namespace, so the hooks are switched off there (per-namespace keys since Linux 5.3).
BRIDGE_NETFILTER_OFF = ("[ ! -e /proc/sys/net/bridge ] || sysctl -qw net.bridge.bridge-nf-call-iptables=0 "
                        "net.bridge.bridge-nf-call-ip6tables=0 net.bridge.bridge-nf-call-arptables=0")


def _in_ns(ns: str, script: str, phase: str) -> Step:
    return Step(phase, ("ip", "netns", "exec", ns, "sh", "-ec", script))


def shaper_steps(ns: str, dev: str, rate_bps: int, queue_packets: int, phase: str = "qdiscs",
                 iface: Interface | None = None, verb: str = "add") -> list[Step]:
    """HTB at `rate_bps` with a packet FIFO of `queue_packets` as its only queue (or the
    interface's token bucket in its place). verb "change" re-rates a built shaper in place."""
    rate = f"{rate_bps}bit"
    burst = str(HTB_BURST_BYTES)
    steps = []
    if verb == "add":
        steps.append(_tc(ns, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "10", phase=phase))
    steps.append(_tc(ns, "class", verb, "dev", dev, "parent", "1:", "classid", "1:10", "htb",
                     "rate", rate, "ceil", rate, "burst", burst, "cburst", burst, phase=phase))
    if verb != "add":
        # `tc qdisc replace ... handle 10:` cannot swap a pfifo for a tbf (the kernel refuses
        # another kind under the same handle: "Invalid qdisc name"): delete, then add
        steps.append(_tc(ns, "qdisc", "del", "dev", dev, "parent", "1:10", "handle", "10:", phase=phase))
    return steps + [leaf_step(ns, dev, queue_packets, iface, "add", phase)]


def leaf_step(ns: str, dev: str, queue_packets: int, iface: Interface | None, verb: str, phase: str) -> Step:
    """The queue under the HTB class: a packet FIFO, or a token bucket below the link rate."""
    if iface is not None and iface.tbf_rate_bps:
        return _tc(ns, "qdisc", verb, "dev", dev, "parent", "1:10", "handle", "10:", "tbf",
                   "rate", f"{iface.tbf_rate_bps}bit", "burst", str(iface.tbf_burst_bytes),
                   "latency", f"{iface.tbf_latency_ms:g}ms", phase=phase)
    return _tc(ns, "qdisc", verb, "dev", dev, "parent", "1:10", "handle", "10:", "pfifo",
               "limit", str(queue_packets), phase=phase)


def build_plan(layout: Layout, kernel_cc: dict[str, str] | None = None) -> list[Step]:
    """All setup commands. `kernel_cc` maps host names to the kernel name of their
    congestion control, applied per route (see `congestion_control_steps`)."""
    kernel_cc = kernel_cc or {}
    steps: list[Step] = []
    for ns in layout.namespaces():
        steps.append(Step("namespaces", ("ip", "netns", "add", ns)))

    for node in layout.nodes.values():
        # no DAD: a tentative link-local address keeps a router from resolving neighbours
        # for a second or two after the link comes up
        steps.append(_in_ns(node.namespace, "sysctl -qw net.ipv6.conf.all.accept_dad=0 "
                            "net.ipv6.conf.default.accept_dad=0", "namespaces"))
    for switch, ns in layout.switch_namespaces.items():
        steps.append(_in_ns(ns, "sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1",
                            "switches"))
        steps.append(_ip(ns, "link", "add", "br0", "type", "bridge", "forward_delay", "0",
                         "mcast_snooping", "0", phase="switches"))
        steps.append(_ip(ns, "link", "set", "br0", "up", phase="switches"))

    for node in layout.nodes.values():
        for iface in node.interfaces:
            sw_ns = layout.switch_namespaces[iface.switch]
            steps.append(Step("links", ("ip", "link", "add", "name", iface.dev, "netns", node.namespace,
                                        "type", "veth", "peer", "name", iface.port, "netns", sw_ns)))
            steps.append(_ip(sw_ns, "link", "set", iface.port, "master", "br0", "up", phase="links"))

    for node in layout.nodes.values():
        ns = node.namespace
        steps.append(_ip(ns, "link", "set", "lo", "up", phase="addresses"))
        if node.stack == "user":
            # the user-space stack's TAP joins this bridge when its server starts
            steps.append(_ip(ns, "link", "add", USER_STACK_BRIDGE, "type", "bridge", "forward_delay", "0",
                             "mcast_snooping", "0", phase="addresses"))
            for iface in node.interfaces:
                steps.append(_ip(ns, "link", "set", iface.dev, "master", USER_STACK_BRIDGE, "up", phase="addresses"))
            steps.append(_ip(ns, "link", "set", USER_STACK_BRIDGE, "up", phase="addresses"))
            steps.append(_in_ns(ns, BRIDGE_NETFILTER_OFF, "addresses"))
            continue
        for iface in node.interfaces:
            steps.append(_ip(ns, "addr", "add", f"{iface.addr4}/{iface.prefix4}", "dev", iface.dev, phase="addresses"))
            steps.append(_ip(ns, "-6", "addr", "add", f"{iface.addr6}/{iface.prefix6}", "dev", iface.dev,
                             "nodad", phase="addresses"))
            steps.append(_ip(ns, "link", "set", iface.dev, "up", phase="addresses"))

    for node in layout.nodes.values():
        steps.append(_in_ns(node.namespace, _tuning_script(node.kind, node.tcp_timestamps, [i.dev for i in node.interfaces],
                                                          user_stack=node.stack == "user"), "tuning"))
        if node.sysctls:
            steps.append(sysctl_step(node))
    for switch, ns in layout.switch_namespaces.items():
        ports = [i.port for n in layout.nodes.values() for i in n.interfaces if i.switch == switch]
        steps.append(_in_ns(ns, _offload_script(ports), "tuning"))

    for node in layout.nodes.values():
        for iface in node.interfaces:
            if iface.rate_bps:
                steps += link_shaper_steps(layout, iface, "add")

    for node in layout.nodes.values():
        if node.stack == "user":
            continue  # the user-space stack routes by itself (its --gateway4/--gateway6)
        kernel = kernel_cc.get(node.name) if node.kind == "host" else None
        for route in node.routes:
            steps.append(_route_step(node.namespace, route, "add", kernel))
        if kernel:
            steps += _connected_route_steps(node, kernel)
    return steps


def link_shaper_steps(layout: Layout, iface: Interface, verb: str) -> list[Step]:
    """Both directions of a shaped link: the node's egress and the switch port's egress."""
    return (shaper_steps(layout.nodes[iface.node].namespace, iface.dev, iface.rate_bps, iface.queue_packets,
                         iface=iface, verb=verb)
            + shaper_steps(layout.switch_namespaces[iface.switch], iface.port, iface.rate_bps, iface.queue_packets,
                           iface=iface, verb=verb))


def sysctl_step(node: NodeLayout) -> Step:
    """The spec's per-namespace sysctls (e.g. tcp_rmem, tcp_window_scaling) of one node."""
    assignments = " ".join(shlex.quote(f"{k}={v}") for k, v in sorted(node.sysctls.items()))
    return _in_ns(node.namespace, f"sysctl -qw {assignments}", "tuning")


def _offload_script(devs: list[str], tx_checksum: bool = True) -> str:
    # TSO/GSO/GRO off: a packet-count queue limit must apply to packets, not 64 KB chunks;
    # tx-udp-segmentation too: a QUIC server's UDP GSO batch would cross as one 64 KB datagram.
    # RPS on one CPU: veth receive work spread over both CPUs reorders packets.
    # tx-checksumming off (a user-stack node's veth): leanweb's GSO super-frames are cut into
    # segments where they leave for this veth; without it the segments keep a partial
    # checksum (CHECKSUM_PARTIAL), wrong in the capture taken here (crates/leanweb/src/gso.rs).
    tx = "" if tx_checksum else " tx off"
    lines = []
    for dev in devs:
        lines.append(f"ethtool -K {dev} tso off gso off gro off tx-udp-segmentation off{tx} >/dev/null")
        lines.append(f"echo 1 > /sys/class/net/{dev}/queues/rx-0/rps_cpus")
    return "; ".join(lines) if lines else "true"


def _tuning_script(kind: str, tcp_timestamps: bool, devs: list[str], user_stack: bool = False) -> str:
    sysctls = [f"net.ipv4.tcp_timestamps={1 if tcp_timestamps else 0}"]
    if kind == "router":
        sysctls += ["net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1"]
    return f"sysctl -qw {' '.join(sysctls)}; " + _offload_script(devs, tx_checksum=not user_stack)


def congestion_control_steps(layout: Layout, node_name: str, kernel_cc: str) -> list[Step]:
    """Select `kernel_cc` for every route of a host: a namespace's sysctl may refuse
    algorithms that are not in the global allowed list, `ip route ... congctl` does not."""
    node = layout.nodes[node_name]
    steps = [_route_step(node.namespace, route, "replace", kernel_cc) for route in node.routes]
    return steps + _connected_route_steps(node, kernel_cc)


def _route_step(ns: str, route: Route, verb: str, kernel_cc: str | None) -> Step:
    fam = "-4" if route.family == "v4" else "-6"
    extra = ("congctl", kernel_cc) if kernel_cc else ()
    return _ip(ns, fam, "route", verb, route.dest, "via", route.via, "dev", route.dev, *extra,
               phase="routes")


def _connected_route_steps(node: NodeLayout, kernel_cc: str) -> list[Step]:
    """The on-link routes the kernel made for our addresses, replaced with a congctl."""
    steps = []
    for iface in node.interfaces:
        net4 = ipaddress.ip_interface(f"{iface.addr4}/{iface.prefix4}").network
        net6 = ipaddress.ip_interface(f"{iface.addr6}/{iface.prefix6}").network
        steps.append(_ip(node.namespace, "-4", "route", "replace", str(net4), "dev", iface.dev, "proto", "kernel",
                         "scope", "link", "src", iface.addr4, "congctl", kernel_cc, phase="routes"))
        # the kernel's IPv6 prefix route has metric 256; replace that one, not add a second
        steps.append(_ip(node.namespace, "-6", "route", "replace", str(net6), "dev", iface.dev, "proto", "kernel",
                         "metric", "256", "congctl", kernel_cc, phase="routes"))
    return steps


def teardown_order(layout: Layout) -> list[str]:
    """Hosts and routers first, switches last: deleting a namespace removes its veths."""
    return [n.namespace for n in layout.nodes.values()] + list(layout.switch_namespaces.values())


def tap_steps(ns: str, tap: str, bridge: str, verb: str) -> list[Step]:
    """A user-space stack's TAP device on its node's bridge (`add`), or its removal (`del`):
    the lean server's own piece of the network, made when it starts (servers/lean.py)."""
    if verb == "add":
        return [_ip(ns, "tuntap", "add", "dev", tap, "mode", "tap", phase="user-stack"),
                _ip(ns, "link", "set", tap, "master", bridge, phase="user-stack"),
                _ip(ns, "link", "set", tap, "up", phase="user-stack")]
    return [_ip(ns, "link", "del", tap, phase="user-stack")]
