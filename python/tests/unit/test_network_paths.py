"""The topology query (spec/network.py): shortest paths between two nodes as link crossings,
which way each crossing goes, how a link is shaped, the bottleneck of a path and the least round
trip its delays allow."""

from __future__ import annotations

import pytest

from congestlab.spec import TopologySpec, load_preset
from congestlab.spec.loader import parse_spec
from congestlab.spec.network import (HTB_BURST_BYTES, Bottleneck, link_bottleneck, path_bottleneck,
                                     round_trip_floor_ms, shaped_rate_bps, shortest_paths)


def _diamond(ra: dict, rb: dict) -> TopologySpec:
    """client on s0, server on s1, and two routers between them: two shortest paths."""
    return TopologySpec.model_validate({
        "switches": [{"name": "s0", "subnet4": "10.0.0.0/24", "subnet6": "fd00::/64"},
                     {"name": "s1", "subnet4": "10.0.1.0/24", "subnet6": "fd00:0:0:1::/64"}],
        "nodes": [{"name": "client", "links": [{"switch": "s0"}]},
                  {"name": "ra", "kind": "router", "links": [{"switch": "s0"}, {"switch": "s1", **ra}]},
                  {"name": "rb", "kind": "router", "links": [{"switch": "s0"}, {"switch": "s1", **rb}]},
                  {"name": "server", "links": [{"switch": "s1"}]}]})


def _steps(path) -> list[tuple[str, str, str]]:
    return [(c.node, c.switch, c.direction) for c in path]


def test_ipv6_client_to_server():
    topology = load_preset("ipv6").topology
    assert path_bottleneck(topology, "client", "server") == Bottleneck(100e6, HTB_BURST_BYTES)
    assert path_bottleneck(topology, "server", "client") == Bottleneck(100e6, HTB_BURST_BYTES)
    (path,) = shortest_paths(topology, "server", "client")
    assert _steps(path) == [("server", "s4", "egress"), ("r4", "s4", "ingress"), ("r4", "s3", "egress"),
                            ("r3", "s3", "ingress"), ("r3", "s2", "egress"), ("r2", "s2", "ingress"),
                            ("r2", "s1", "egress"), ("r1", "s1", "ingress"), ("r1", "s0", "egress"),
                            ("client", "s0", "ingress")]
    bottleneck = next(c for c in path if c.link.rate_bps)
    assert (bottleneck.node, bottleneck.link_index, bottleneck.link.queue_packets) == ("r1", 0, 1000)
    # the other way, the responses' ACKs arrive at r1 over the same link
    (back,) = shortest_paths(topology, "client", "server")
    assert _steps(back)[:2] == [("client", "s0", "egress"), ("r1", "s0", "ingress")]


def test_two_hosts_on_one_switch():
    topology = load_preset("ipv6").topology
    (path,) = shortest_paths(topology, "m4src", "server")
    assert _steps(path) == [("m4src", "s4", "egress"), ("server", "s4", "ingress")]
    assert path_bottleneck(topology, "m4src", "server") is None
    assert shortest_paths(topology, "server", "server") == [()]
    assert path_bottleneck(topology, "server", "server") is None


def test_cc_share_senders_cross_the_bottleneck_leaving_r():
    topology = load_preset("cc-share").topology
    for sender in ("s1", "s2"):
        (path,) = shortest_paths(topology, sender, "c")
        assert _steps(path) == [(sender, "sl", "egress"), ("r", "sl", "ingress"), ("r", "sr", "egress"),
                                ("c", "sr", "ingress")]
        assert path[2].link_index == 1 and path[2].link.impair_direction == "ingress"  # the ACKs' delay
        assert path_bottleneck(topology, sender, "c") == Bottleneck(100e6, HTB_BURST_BYTES)


def test_a_swept_rate_is_the_points_own():
    variant = parse_spec('extends = "ipv6"\nname = "v"\n[set]\n"nodes.r1.links.s0.rate_bps" = 20_000_000\n', "v.toml")
    assert path_bottleneck(variant.topology, "client", "server") == Bottleneck(20e6, HTB_BURST_BYTES)


def test_unshaped_at_or_above_the_threshold():
    at = _diamond({"rate_bps": 1_000_000_000}, {"rate_bps": 1_000_000_000})
    assert shaped_rate_bps(at, at.node("ra").links[1]) is None
    assert shaped_rate_bps(at, at.node("ra").links[0]) is None  # no rate at all
    assert link_bottleneck(at, at.node("ra").links[1]) is None
    assert path_bottleneck(at, "client", "server") is None
    below = _diamond({"rate_bps": 999_999_999}, {"rate_bps": 999_999_999})
    assert shaped_rate_bps(below, below.node("ra").links[1]) == 999_999_999
    assert path_bottleneck(below, "client", "server") == Bottleneck(999_999_999, HTB_BURST_BYTES)
    raised = below.model_copy(update={"unshaped_at_or_above_bps": 500_000_000})
    assert path_bottleneck(raised, "client", "server") is None


def test_a_token_bucket_below_the_rate():
    tbf = {"rate_bps": 100_000_000, "tbf_rate_bps": 10_000_000, "tbf_burst_bytes": 3000}
    topology = _diamond(tbf, tbf)
    assert path_bottleneck(topology, "client", "server") == Bottleneck(10e6, HTB_BURST_BYTES + 3000)
    # a bucket at or above the rate never holds a packet the HTB class lets through
    level = _diamond({"rate_bps": 10_000_000, "tbf_rate_bps": 10_000_000}, {"rate_bps": 10_000_000})
    assert path_bottleneck(level, "client", "server") == Bottleneck(10e6, HTB_BURST_BYTES)
    # a link left unshaped takes its token bucket with it
    unshaped = _diamond({**tbf, "rate_bps": 2_000_000_000}, {**tbf, "rate_bps": 2_000_000_000})
    assert path_bottleneck(unshaped, "client", "server") is None


def test_two_shortest_paths_the_most_lenient():
    topology = _diamond({"rate_bps": 20_000_000}, {"rate_bps": 50_000_000})
    paths = shortest_paths(topology, "client", "server")
    assert [[c.node for c in p] for p in paths] == [["client", "ra", "ra", "server"], ["client", "rb", "rb", "server"]]
    assert path_bottleneck(topology, "client", "server") == Bottleneck(50e6, HTB_BURST_BYTES)
    assert path_bottleneck(_diamond({"rate_bps": 20_000_000}, {}), "client", "server") is None
    # at one rate, the larger burst is the more lenient
    tbf = _diamond({"rate_bps": 20_000_000}, {"rate_bps": 50_000_000, "tbf_rate_bps": 20_000_000})
    assert path_bottleneck(tbf, "client", "server") == Bottleneck(20e6, HTB_BURST_BYTES + 5120)


def test_a_host_never_forwards():
    # hosts have one link (TopologySpec refuses more); a copy skips that check, so a host
    # beside the router would be a second way if hosts forwarded
    topology = _diamond({"rate_bps": 20_000_000}, {})
    hosted = topology.model_copy(update={"nodes": [n.model_copy(update={"kind": "host"}) if n.name == "rb" else n
                                                   for n in topology.nodes]})
    assert [[c.node for c in p] for p in shortest_paths(hosted, "client", "server")] == \
        [["client", "ra", "ra", "server"]]
    assert path_bottleneck(hosted, "client", "server") == Bottleneck(20e6, HTB_BURST_BYTES)
    # a host at either end of the way is fine: it sends and receives
    assert [c.node for c in shortest_paths(hosted, "rb", "client")[0]] == ["rb", "client"]
    # with no router between them, two switches are not connected
    cut = topology.model_copy(update={"nodes": [n.model_copy(update={"kind": "host"}) if n.kind == "router" else n
                                                for n in topology.nodes]})
    assert shortest_paths(cut, "client", "server") == []
    assert path_bottleneck(cut, "client", "server") is None


def test_an_unknown_node_is_named():
    topology = load_preset("ipv6").topology
    with pytest.raises(KeyError, match="nonexistent"):
        shortest_paths(topology, "client", "nonexistent")
    with pytest.raises(KeyError, match="nowhere"):
        path_bottleneck(topology, "nowhere", "server")


def test_round_trip_floor_counts_each_delay_the_way_it_acts():
    """Both ways over the path, each link's least delay (delay - jitter) where it impairs that
    way; the server's own arrivals left out (linkem holds them after the capture); over two
    shortest paths, the one with the least."""
    topology = _diamond({"delay_ms": 10.0, "jitter_ms": 2.0}, {"delay_ms": 20.0, "impair_direction": "egress"})
    # ra's link to s1: 8 ms each way; rb's: 20 ms on its egress only
    assert round_trip_floor_ms(topology, "client", "server") == 16.0
    topology = _diamond({"delay_ms": 10.0}, {"delay_ms": 10.0})
    assert round_trip_floor_ms(topology, "client", "server") == 20.0
    server_side = TopologySpec.model_validate({
        "switches": [{"name": "s0", "subnet4": "10.0.0.0/24", "subnet6": "fd00::/64"}],
        "nodes": [{"name": "client", "links": [{"switch": "s0", "delay_ms": 5.0}]},
                  {"name": "server", "links": [{"switch": "s0", "delay_ms": 7.0}]}]})
    # the client's link both ways (10 ms), the server's on its data's way out only (7 ms)
    assert round_trip_floor_ms(server_side, "client", "server") == 17.0
    assert round_trip_floor_ms(load_preset("ipv6").topology, "client", "server") == 0.0
