"""Questions about a topology's network, answered in one place: the shortest paths between
two nodes and the link attachments they cross (which way), whether and how a link is shaped,
the bottleneck of the way from one node to another, and the least round trip its links' delays
allow.

A path crosses only routers: hosts do not forward. A link is a node's attachment to a switch;
its rate shapes both directions of that attachment (spec/models.py LinkSpec), so a packet is
held to it whether it leaves the node onto the switch (egress) or arrives from it (ingress).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Literal

from congestlab.spec.models import LinkSpec, TopologySpec

ETH_FRAME_BYTES = 1514
# HTB's burst is sent at line speed; a small burst keeps the 100 Mbit/s link honest for
# short transfers (a 15 KB burst lets them briefly exceed the rate).
HTB_BURST_BYTES = 4 * ETH_FRAME_BYTES

# seen from the link's node: egress = leaving the node onto the switch, ingress = arriving from it
Direction = Literal["egress", "ingress"]


@dataclass(frozen=True)
class Bottleneck:
    """The narrowest shaper on a way: its rate and the bytes it lets through at line speed."""

    rate_bps: float
    burst_bytes: int


@dataclass(frozen=True)
class Crossing:
    """A packet crossing `node`'s link number `link_index` (to `switch`), in `direction`."""

    node: str
    link_index: int
    link: LinkSpec
    switch: str
    direction: Direction


# a path from one node to another: every attachment it crosses, in order (two per switch)
Path = tuple[Crossing, ...]


def shaped_rate_bps(topology: TopologySpec, link: LinkSpec) -> int | None:
    """The HTB rate the testbed gives the link; None = left at veth speed (no rate, or a rate
    at or above `topology.unshaped_at_or_above_bps`, which drops its queue and token bucket too)."""
    if link.rate_bps and link.rate_bps < topology.unshaped_at_or_above_bps:
        return link.rate_bps
    return None


def link_bottleneck(topology: TopologySpec, link: LinkSpec) -> Bottleneck | None:
    """How the link holds a packet crossing it either way: the HTB rate, or the token bucket's
    when it is below that rate (its burst on top of HTB's). None when the link is unshaped."""
    rate = shaped_rate_bps(topology, link)
    if rate is None:
        return None
    if link.tbf_rate_bps and link.tbf_rate_bps < rate:
        return Bottleneck(float(link.tbf_rate_bps), HTB_BURST_BYTES + link.tbf_burst_bytes)
    return Bottleneck(float(rate), HTB_BURST_BYTES)


def shortest_paths(topology: TopologySpec, a: str, b: str) -> list[Path]:
    """Every shortest path (fewest switches) from node `a` to node `b`, passing only routers;
    [] when there is none, [()] when a is b. KeyError names an unknown node."""
    topology.node(a), topology.node(b)
    kinds = {n.name: n.kind for n in topology.nodes}
    on_switch: dict[str, list[tuple[str, int, LinkSpec]]] = {}
    for node in topology.nodes:
        for index, link in enumerate(node.links):
            on_switch.setdefault(link.switch, []).append((node.name, index, link))
    # breadth-first over nodes; arrivals[n] = every (sending crossing, receiving crossing)
    # that reaches n on a shortest path
    hops = {a: 0}
    arrivals: dict[str, list[tuple[Crossing, Crossing]]] = {a: []}
    queue = deque([a])
    while queue:
        here = queue.popleft()
        if here != a and kinds[here] != "router":
            continue
        for index, link in enumerate(topology.node(here).links):
            leave = Crossing(here, index, link, link.switch, "egress")
            for there, there_index, there_link in on_switch[link.switch]:
                if there == here:
                    continue
                if there not in hops:
                    hops[there] = hops[here] + 1
                    arrivals[there] = []
                    queue.append(there)
                if hops[there] == hops[here] + 1:
                    arrivals[there].append((leave, Crossing(there, there_index, there_link, link.switch, "ingress")))
    if b not in hops:
        return []

    def to(node: str) -> list[Path]:
        if node == a:
            return [()]
        return [path + (leave, arrive) for leave, arrive in arrivals[node] for path in to(leave.node)]

    return to(b)


def path_bottleneck(topology: TopologySpec, a: str, b: str) -> Bottleneck | None:
    """The narrowest shaper on the way from `a` to `b`: with several shortest paths, that of the
    most lenient (the lower rate is the narrower; at one rate, the smaller burst). None when a
    shortest path is unshaped or there is no path. KeyError names an unknown node."""
    narrowest = []
    for path in shortest_paths(topology, a, b):
        shaped = [neck for neck in (link_bottleneck(topology, c.link) for c in path) if neck is not None]
        if not shaped:
            return None
        narrowest.append(min(shaped, key=_strictness))
    return max(narrowest, key=_strictness) if narrowest else None


def _strictness(neck: Bottleneck) -> tuple[float, int]:
    return (neck.rate_bps, neck.burst_bytes)


def impair_delay_floor_ms(crossing: Crossing) -> float:
    """The least delay the link's emulation gives a packet crossing it this way: `delay_ms`
    less `jitter_ms` (netem and linkem draw from [delay - jitter, delay + jitter]), 0 when
    the link does not impair that direction."""
    link = crossing.link
    if link.impair_direction not in ("both", crossing.direction):
        return 0.0
    return max(link.delay_ms - link.jitter_ms, 0.0)


def round_trip_floor_ms(topology: TopologySpec, client: str, server: str) -> float:
    """The least round trip the links' delays give a packet from `server` to `client` and the
    answer back, as a capture at `server` sees it: over the shortest paths (the one with the
    least), every crossing's least delay both ways, except the answer's arrival at `server`
    (linkem holds a host's arriving packets after the capture saw them: docs/linkem.md).
    0 when nothing on the way is delayed or there is no path. KeyError names an unknown node."""
    floors = []
    for path in shortest_paths(topology, client, server):
        total = 0.0
        for c in path:
            back = Crossing(c.node, c.link_index, c.link, c.switch,
                            "ingress" if c.direction == "egress" else "egress")
            total += impair_delay_floor_ms(back)  # the server's data, on its way to the client
            if not (c.node == server and c.direction == "ingress"):
                total += impair_delay_floor_ms(c)  # the client's answer
        floors.append(total)
    return min(floors) if floors else 0.0
