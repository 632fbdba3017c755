"""One runner per workload kind (spec/workloads.py declares them): the registry."""

from __future__ import annotations

import importlib

from congestlab.errors import SpecError

# kind -> (module, class); imported on use so a study loads only what it runs
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


def tool_versions(kinds: set[str]) -> dict[str, str]:
    """Versions of the tools the given workload kinds drive (for the manifest)."""
    versions = {}
    if "mgen" in kinds:
        from congestlab.traffic.mgen import mgen_version

        versions["mgen"] = mgen_version()
    if kinds & {"http_load", "anma"}:
        import subprocess

        from congestlab.paths import rust_binary

        out = subprocess.run([str(rust_binary("dualbench")), "--version"], capture_output=True, text=True, timeout=10)
        versions["dualbench"] = out.stdout.strip()
    if "iperf" in kinds:
        from congestlab.workloads.iperf import iperf_versions

        versions |= iperf_versions()
    if "ping" in kinds:
        import subprocess

        out = subprocess.run(["ping", "-V"], capture_output=True, text=True, timeout=10)
        versions["ping"] = (out.stdout + out.stderr).strip().splitlines()[0] if out.returncode == 0 else "?"
    return versions
