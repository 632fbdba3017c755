"""Build the server under test for a testbed node from its spec."""

from __future__ import annotations

from pathlib import Path

from congestlab.errors import SpecError
from congestlab.servers.apache import ApacheServer
from congestlab.spec.models import ServerSpec


def make_server(spec: ServerSpec, testbed, run_dir: Path, docroot: Path):
    """Returns an object with start(), wait_started(), stop(), version() and argv."""
    ns = testbed.ns(spec.node)
    addrs = [testbed.address(spec.node, fam) for fam in ("v4", "v6")]
    workdir = run_dir / "servers" / spec.name
    workdir.mkdir(parents=True, exist_ok=True)
    if spec.kind == "apache":
        return ApacheServer(ns, workdir, docroot, run_dir / "logs", [(a, spec.port) for a in addrs])
    if spec.kind == "lean":
        from congestlab.servers.lean import LeanServer
        from congestlab.testbed.plan import USER_STACK_BRIDGE

        node = testbed.layout.nodes[spec.node]
        iface = node.interfaces[0]
        gateways = {r.family: r.via for r in node.routes if r.dest == "default"}
        knobs = dict(spec.knobs)
        if spec.port != 80:
            knobs["port"] = spec.port
        return LeanServer(ns, "tap0", USER_STACK_BRIDGE, f"{iface.addr4}/{iface.prefix4}",
                          f"{iface.addr6}/{iface.prefix6}", gateways.get("v4"), gateways.get("v6"), docroot,
                          run_dir / "logs" / f"leanweb-{spec.name}.jsonl", knobs)
    raise SpecError(f"servers[{spec.name}].kind", f"server kind {spec.kind!r} is not available yet")
