"""Build the server under test for a testbed node from its spec."""

from __future__ import annotations

from pathlib import Path

from congestlab.errors import SpecError
from congestlab.servers.apache import ApacheServer
from congestlab.spec.models import ServerSpec


def make_server(spec: ServerSpec, testbed, run_dir: Path, docroot: Path):
    """Returns an object with start(), wait_started(), stop(), version(), argv, proc."""
    ns = testbed.ns(spec.node)
    addrs = [testbed.address(spec.node, fam) for fam in ("v4", "v6")]
    workdir = run_dir / "servers" / spec.name
    workdir.mkdir(parents=True, exist_ok=True)
    if spec.kind == "apache":
        return ApacheServer(ns, workdir, docroot, run_dir / "logs", [(a, spec.port) for a in addrs])
    raise SpecError(f"servers[{spec.name}].kind", f"server kind {spec.kind!r} is not available yet")
