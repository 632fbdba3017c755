"""An A — R — B line of namespaces built by the testbed (testbed/), for tests that put
linkem elements or iperf flows on a router by hand."""

from __future__ import annotations

from congestlab.spec.models import TopologySpec
from congestlab.testbed import Testbed


def line_topology(rate_bps: int | None = None, queue_packets: int = 1000, **impair) -> TopologySpec:
    """r's link to b carries the optional shaper and impairments (delay_ms, loss, ...)."""
    sb = {"switch": "sb", "host_id": 1, "queue_packets": queue_packets} | impair
    if rate_bps:
        sb["rate_bps"] = rate_bps
    return TopologySpec.model_validate({
        "switches": [{"name": "sa", "subnet4": "10.201.1.0/24", "subnet6": "fd00:0:201:1::/64"},
                     {"name": "sb", "subnet4": "10.201.2.0/24", "subnet6": "fd00:0:201:2::/64"}],
        "nodes": [{"name": "r", "kind": "router", "links": [{"switch": "sa", "host_id": 1}, sb]},
                  {"name": "a", "links": [{"switch": "sa", "host_id": 2}]},
                  {"name": "b", "links": [{"switch": "sb", "host_id": 2}]}],
    })


class Line:
    """The names linkem's tests use, over a Testbed: R's eth0 faces A, eth1 faces B."""

    r_to_a = "eth0"
    r_to_b = "eth1"

    def __init__(self, tb: Testbed):
        self.tb = tb
        self.prefix = tb.prefix
        self.ns_a, self.ns_r, self.ns_b = tb.ns("a"), tb.ns("r"), tb.ns("b")
        self.addr_b = tb.address("b", "v4")

    def exec(self, ns: str, *argv: str, timeout_s: float = 30) -> str:
        node = {self.ns_a: "a", self.ns_r: "r", self.ns_b: "b"}[ns]
        return self.tb.run(node, list(argv), timeout_s=timeout_s).stdout
