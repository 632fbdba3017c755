"""Build the server under test for a testbed node from its spec."""

from __future__ import annotations

from pathlib import Path

from congestlab.errors import SpecError
from congestlab.servers.apache import ApacheServer
from congestlab.servers.caddy import CaddyServer
from congestlab.testbed.cgroups import ServerCgroup
from congestlab.servers.command import CommandServer
from congestlab.servers.h2o import H2oServer
from congestlab.servers.lighttpd import LighttpdServer
from congestlab.servers.lean import LeanServer, node_mac
from congestlab.servers.nginx import NginxServer
from congestlab.servers.ngtcp2 import Ngtcp2Server
from congestlab.servers.tls import RunCertificates
from congestlab.spec.servers import ServerSpec
from congestlab.testbed.plan import USER_STACK_BRIDGE, USER_STACK_TAP, Step, tap_steps


# the built-in kinds on kernel TCP: each renders its own configuration (servers/<kind>.py)
KERNEL_SERVERS = {"apache": ApacheServer, "nginx": NginxServer, "caddy": CaddyServer,
                  "lighttpd": LighttpdServer, "h2o": H2oServer}


def make_server(spec: ServerSpec, testbed, run_dir: Path, docroot: Path, instance: str = "",
                tls: RunCertificates | None = None, cgroup: ServerCgroup | None = None):
    """Returns an object with start(), wait_started(), stop(), version(), cpu_ns() and argv.
    Each instance (a server restarted with other settings) gets its own config and log dir;
    `tls`: the run's certificates (a server with tls = true); `cgroup`: the instance's."""
    ns = testbed.ns(spec.node)
    addrs = [testbed.address(spec.node, fam) for fam in ("v4", "v6")]
    stem = spec.name + (f"-{instance}" if instance else "")
    workdir = run_dir / "servers" / stem
    workdir.mkdir(parents=True, exist_ok=True)
    log_dir = run_dir / "logs" / "servers" / stem
    listen = [(a, spec.port) for a in addrs]
    served = {"tls": tls if spec.tls else None, "http": tuple(spec.http), "cgroup": cgroup}
    if spec.kind == "command":
        return CommandServer(spec, ns, workdir, docroot, log_dir, listen, **served)
    if spec.kind == "ngtcp2":
        return Ngtcp2Server(ns, workdir, docroot, log_dir, listen, quic_cc=spec.quic_cc,
                            initial_rtt_ms=spec.quic_initial_rtt_ms, **served)
    if spec.kind in KERNEL_SERVERS:
        return KERNEL_SERVERS[spec.kind](ns, workdir, docroot, log_dir, listen, **served)
    if spec.kind == "lean":
        node = testbed.layout.nodes[spec.node]
        iface = node.interfaces[0]
        gateways = {r.family: r.via for r in node.routes if r.dest == "default"}
        knobs = dict(spec.knobs)
        if spec.port != 80:
            knobs["port"] = spec.port
        # one MAC for all of the node's restarts (the router's neighbour entry stays valid)
        return LeanServer(ns, USER_STACK_TAP, USER_STACK_BRIDGE, f"{iface.addr4}/{iface.prefix4}",
                          f"{iface.addr6}/{iface.prefix6}", gateways.get("v4"), gateways.get("v6"), docroot,
                          log_dir / "leanweb.jsonl", knobs, executor=testbed.executor,
                          mac=None if "mac" in knobs else node_mac(iface.addr4), cgroup=cgroup)
    raise SpecError(f"servers[{spec.name}].kind", f"server kind {spec.kind!r} is not available yet")


def network_steps(spec: ServerSpec, testbed) -> list[Step]:
    """The commands a server runs on the testbed's network when it starts and stops (the
    lean server's TAP device; none for a kernel server), for `--dry-run`."""
    if spec.kind != "lean":
        return []
    ns = testbed.ns(spec.node)
    return (tap_steps(ns, USER_STACK_TAP, USER_STACK_BRIDGE, "add")
            + tap_steps(ns, USER_STACK_TAP, USER_STACK_BRIDGE, "del"))
