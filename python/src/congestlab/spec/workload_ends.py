"""What a workload's model tells spec/validate.py about the nodes it uses: the hosts and
servers it names (each must exist and fit) and the ends its traffic goes between (each pair
must be two nodes)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Named:
    """A host or server a workload names; spec/validate.py checks it exists and fits."""

    field: str  # where the workload names it, e.g. "requests[0].client"
    name: str
    server: bool = False  # a server's name, else a host's
    file_kib: int | None = None  # a file the server must serve


@dataclass(frozen=True)
class Crossing:
    """Two ends a workload's traffic goes between, which must be two nodes (spec/validate.py):
    traffic from a node to itself never crosses the network it measures."""

    field: str  # where the workload names the sending or asking end, e.g. "requests[0].client"
    client: str  # a host
    other: str  # the other end: a server's name, or a host's
    server: bool = False
