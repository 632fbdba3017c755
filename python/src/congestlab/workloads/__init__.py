"""One runner per workload kind (spec/workloads.py declares them): the registry."""

from __future__ import annotations

import importlib
import subprocess

from congestlab.errors import SpecError
from congestlab.paths import rust_binary
from congestlab.traffic.chromium import chromium_version
from congestlab.traffic.mgen import mgen_version
from congestlab.workloads.base import Background
from congestlab.workloads.iperf import iperf_versions

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


def tool_versions(specs: list) -> dict[str, str]:
    """Versions of the tools the given workloads drive (for the manifest)."""
    kinds = {spec.kind for spec in specs}
    versions = {}
    if any(spec.kind == "get" and spec.client_kind == "chromium" for spec in specs):
        versions["chromium"] = chromium_version()
    if "mgen" in kinds:
        versions["mgen"] = mgen_version()
    if kinds & {"http_load", "anma"}:
        out = subprocess.run([str(rust_binary("dualbench")), "--version"], capture_output=True, text=True, timeout=10)
        versions["dualbench"] = out.stdout.strip()
    if "iperf" in kinds:
        versions |= iperf_versions()
    if "ping" in kinds:
        out = subprocess.run(["ping", "-V"], capture_output=True, text=True, timeout=10)
        versions["ping"] = (out.stdout + out.stderr).strip().splitlines()[0] if out.returncode == 0 else "?"
    return versions
