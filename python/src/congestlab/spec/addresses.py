"""The testbed's addresses, decided from the spec alone: each switch's subnets must be its
own, and each link's host part (`host_id`, or the next free one from 100) must be free and
fit its switch's IPv4 subnet. testbed/layout.py builds the interfaces from `host_ids`, so a
spec that loads gets exactly the addresses checked here. Problems are ValueErrors naming the
field (loader.py turns them into one SpecError line)."""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from congestlab.spec.models import TopologySpec

AUTO_HOST_ID_FROM = 100


def check_subnets(topology: "TopologySpec") -> None:
    """No two switches share an address: overlapping subnets would give a router the same
    subnet on two interfaces and make the routes ambiguous."""
    seen: list[tuple[str, str, ipaddress.IPv4Network | ipaddress.IPv6Network]] = []
    for switch in topology.switches:
        for field in ("subnet4", "subnet6"):
            net = ipaddress.ip_network(getattr(switch, field))
            for other, other_field, other_net in seen:
                if other_field == field and net.overlaps(other_net):
                    raise ValueError(f"topology.switches.{switch.name}.{field}: {net} overlaps switch {other}'s "
                                     f"{other_net}; each switch needs a subnet of its own")
            seen.append((switch.name, field, net))


def host_ids(topology: "TopologySpec") -> dict[tuple[str, str], int]:
    """(node, switch) -> the host part of that link's addresses, in node order: a given
    `host_id`, else the switch's next free one from 100."""
    subnets = {s.name: ipaddress.ip_network(s.subnet4) for s in topology.switches}
    used: dict[tuple[str, int], str] = {}
    auto_next = {s.name: AUTO_HOST_ID_FROM for s in topology.switches}
    out: dict[tuple[str, str], int] = {}
    for node in topology.nodes:
        for link in node.links:
            where = f"topology.nodes.{node.name}.links.{link.switch}.host_id"
            host_id = link.host_id
            if host_id is None:
                while (link.switch, auto_next[link.switch]) in used:
                    auto_next[link.switch] += 1
                host_id = auto_next[link.switch]
            net4 = subnets[link.switch]
            if host_id >= net4.num_addresses - 1:
                given = "" if link.host_id is not None else f" (not given: the next free one from {AUTO_HOST_ID_FROM})"
                raise ValueError(f"{where}: {host_id}{given} does not fit switch {link.switch}'s {net4}")
            if (link.switch, host_id) in used:
                raise ValueError(f"{where}: {host_id} gives {net4.network_address + host_id}, already node "
                                 f"{used[(link.switch, host_id)]}'s address on switch {link.switch}")
            used[(link.switch, host_id)] = node.name
            out[(node.name, link.switch)] = host_id
    return out
