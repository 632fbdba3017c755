"""Layout and plan: names, addresses, routes, and no command that touches the root namespace."""

from __future__ import annotations

import pytest

from congestlab.spec import load_preset
from congestlab.testbed.layout import build_layout
from congestlab.testbed.plan import BRIDGE_NETFILTER_OFF, build_plan

SPEC = load_preset("ipv6")


def test_every_name_carries_the_run_prefix():
    layout = build_layout(SPEC.topology, "cl0a1b2c")
    assert all(ns.startswith("cl0a1b2c-") for ns in layout.namespaces())
    assert len(layout.namespaces()) == 17  # r1-r4, client, server, bare, modern, 4 MGEN hosts, 5 switches
    with pytest.raises(ValueError):
        build_layout(SPEC.topology, "x")


def test_addresses_and_routes_follow_the_chain():
    layout = build_layout(SPEC.topology, "cl0a1b2c")
    client, server, r2 = layout.nodes["client"], layout.nodes["server"], layout.nodes["r2"]
    assert client.address("v4") == "10.0.0.10" and client.address("v6") == "fd00::a"
    assert server.address("v4") == "10.0.4.10" and server.address("v6") == "fd00:0:0:4::a"
    assert {(r.family, r.dest, r.via) for r in client.routes} == {("v4", "default", "10.0.0.1"),
                                                                  ("v6", "default", "fd00::1")}
    r2_routes = {(r.dest, r.via) for r in r2.routes}
    assert ("10.0.0.0/24", "10.0.1.1") in r2_routes and ("10.0.4.0/24", "10.0.2.2") in r2_routes
    assert ("fd00:0:0:4::/64", "fd00:0:0:2::2") in r2_routes
    shaped = [i for n in layout.nodes.values() for i in n.interfaces if i.rate_bps]
    assert [(i.node, i.rate_bps, i.queue_packets) for i in shaped] == [("r1", 100_000_000, 1000)]


def test_plan_never_targets_the_root_namespace():
    layout = build_layout(SPEC.topology, "cl0a1b2c")
    plan = build_plan(layout, {"server": "cubic", "client": "reno"})
    ours = set(layout.namespaces())
    for step in plan:
        a = step.argv
        if a[:3] == ("ip", "netns", "add"):
            assert a[3] in ours
        elif a[:3] == ("ip", "link", "add"):  # veth pair created straight into two namespaces
            netns = [a[i + 1] for i, x in enumerate(a) if x == "netns"]
            assert len(netns) == 2 and set(netns) <= ours, step
        elif a[:3] == ("ip", "netns", "exec"):
            assert a[3] in ours, step
        else:
            assert a[0] in ("ip", "tc") and a[1] == "-n" and a[2] in ours, step
    congctl = [s for s in plan if "congctl" in s.argv]
    assert {s.argv[2] for s in congctl} == {"cl0a1b2c-server", "cl0a1b2c-client"}
    assert any("reno" in s.argv for s in congctl if s.argv[2] == "cl0a1b2c-client")


def test_bridge_netfilter_is_off_in_user_stack_nodes_only():
    layout = build_layout(SPEC.topology, "cl0a1b2c")
    plan = build_plan(layout, {"server": "cubic", "client": "reno"})
    off = {s.argv[3] for s in plan if s.argv[:3] == ("ip", "netns", "exec") and BRIDGE_NETFILTER_OFF in s.argv}
    assert off == {layout.nodes[n].namespace for n, node in layout.nodes.items() if node.stack == "user"}
    assert off == {"cl0a1b2c-bare", "cl0a1b2c-modern"}


def test_tx_checksumming_is_off_on_user_stack_node_veths_only():
    # leanweb's GSO super-frames are segmented there; a partial checksum would show in the capture.
    layout = build_layout(SPEC.topology, "cl0a1b2c")
    plan = build_plan(layout, {"server": "cubic", "client": "reno"})
    tuning = {s.argv[3]: s.argv[-1] for s in plan if s.phase == "tuning" and s.argv[:3] == ("ip", "netns", "exec")}
    tx_off = {ns for ns, script in tuning.items() if " tx off" in script}
    assert tx_off == {"cl0a1b2c-bare", "cl0a1b2c-modern"}
    for node in layout.nodes.values():
        for iface in node.interfaces:
            assert (f"ethtool -K {iface.dev} tso off gso off gro off tx-udp-segmentation off tx off" in tuning[node.namespace]) == (node.stack == "user")
