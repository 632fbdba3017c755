"""One runner per workload kind (spec/workloads.py declares them): the registry."""

from __future__ import annotations

import importlib
import subprocess

from congestlab.errors import SpecError
from congestlab.paths import rust_binary
from congestlab.traffic.chromium import chromium_version
from congestlab.traffic.cffi_get import cffi_version
from congestlab.traffic.iperf import iperf_versions
from congestlab.traffic.mgen import mgen_version
from congestlab.traffic.ping import ping_version
from congestlab.workloads.base import Background

# kind -> (module, class) of its runner
RUNNERS = {
    "mgen": ("congestlab.workloads.mgen", "MgenRunner"),
    "http_load": ("congestlab.workloads.http_load", "HttpLoadRunner"),
    "get": ("congestlab.workloads.get", "GetRunner"),
    "anma": ("congestlab.workloads.anma", "AnmaRunner"),
    "iperf": ("congestlab.workloads.iperf", "IperfRunner"),
    "ping": ("congestlab.workloads.ping", "PingRunner"),
}


def runner_for(spec):
    if spec.kind not in RUNNERS:
        raise SpecError(f"workloads.{spec.name}.kind", f"kind {spec.kind!r} has no runner in this congestlab")
    module, name = RUNNERS[spec.kind]
    return getattr(importlib.import_module(module), name)


def is_background(spec) -> bool:
    """A background load (runs beside the measuring workloads) rather than a measuring one."""
    return issubclass(runner_for(spec), Background)


def _dualbench_version() -> dict[str, str]:
    out = subprocess.run([str(rust_binary("dualbench")), "--version"], capture_output=True, text=True, timeout=10)
    return {"dualbench": out.stdout.strip()}


# a program a runner drives (its `tools`) -> its versions, in the order the manifest lists them
TOOL_VERSIONS = {
    "chromium": lambda: {"chromium": chromium_version()},
    "curl-cffi": lambda: {"curl-cffi": cffi_version()},
    "mgen": lambda: {"mgen": mgen_version()},
    "dualbench": _dualbench_version,
    "iperf": iperf_versions,  # iperf 2 and iperf3
    "ping": lambda: {"ping": ping_version()},
}


def tool_versions(specs: list) -> dict[str, str]:
    """Versions of the tools the given workloads drive (for the manifest)."""
    wanted = set().union(*(runner_for(spec).tools(spec) for spec in specs))
    versions: dict[str, str] = {}
    for tool, versions_of in TOOL_VERSIONS.items():
        if tool in wanted:
            versions |= versions_of()
    return versions
