"""Links a spec asks to shape that the testbed leaves at veth speed: a rate at or above
`topology.unshaped_at_or_above_bps` gets no shaper (spec/network.py, `shaped_rate_bps`), so
the link's queue and token bucket are not applied either. Not an error (the threshold is a
machine's limit, not the study's), but the run would not be what the spec says: `--dry-run`
prints these and the StudyRun records them as failed fidelity checks in the manifest."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from congestlab.spec.network import shaped_rate_bps

if TYPE_CHECKING:
    from congestlab.spec.sweep import Point


@dataclass(frozen=True)
class UnshapedLink:
    node: str
    switch: str
    rate_bps: int
    limit_bps: int
    message: str


def unshaped_links(points: list["Point"]) -> list[UnshapedLink]:
    """One entry per link and rate that some point leaves unshaped, naming the points when
    not all of them do."""
    found: dict[tuple, list[str]] = {}
    for point in points:
        topology = point.study.topology
        for node in topology.nodes:
            for link in node.links:
                if link.rate_bps is not None and shaped_rate_bps(topology, link) is None:
                    key = (node.name, link.switch, link.rate_bps, topology.unshaped_at_or_above_bps,
                           link.queue_packets, link.tbf_rate_bps)
                    found.setdefault(key, []).append(point.id)
    out = []
    for (node, switch, rate, limit, queue, tbf), ids in found.items():
        ignored = f"queue_packets = {queue}" + (f" and tbf_rate_bps = {tbf:g}" if tbf else "")
        some = "" if len(ids) == len(points) else (f" (points {', '.join(ids[:3])}"
                                                   f"{f' and {len(ids) - 3} more' if len(ids) > 3 else ''})")
        out.append(UnshapedLink(node, switch, rate, limit, (
            f"topology.nodes.{node}.links.{switch}.rate_bps = {rate:g} is at or above "
            f"topology.unshaped_at_or_above_bps = {limit:g}: the link runs unshaped at veth speed and its "
            f"{ignored} is not applied{some}")))
    return out
