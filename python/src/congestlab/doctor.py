"""`congestlab doctor`: is everything a run needs present on the host it runs on?"""

from __future__ import annotations

import os
import shutil
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

from congestlab.cc.registry import COMPOUND_KERNEL_NAME, default_object
from congestlab.errors import ToolError
from congestlab.paths import rust_binary
from congestlab.testbed.capabilities import probe_kernel_features
from congestlab.testbed.cgroups import cgroups_available
from congestlab.traffic.mgen import SHIM_PATH

APT = "apt-get install -y"


@dataclass
class Item:
    name: str
    ok: bool
    detail: str
    fix: str
    required: bool = True


def _tool(name: str, package: str) -> Item:
    path = shutil.which(name) or (f"/usr/sbin/{name}" if Path(f"/usr/sbin/{name}").exists() else None)
    return Item(name, path is not None, path or "not found", f"{APT} {package}")


def _built(name: str, what: str) -> Item:
    """A binary of the Rust workspace (crates/<name>), which `make build` builds."""
    try:
        return Item(name, True, str(rust_binary(name)), "make build")
    except ToolError:
        return Item(name, False, f"not built ({what})", "make build")


# the workspace binaries a study needs, and what for
RUST_BINARIES = (
    ("leanweb", "the lean server"),
    ("dualbench", "http_load stress and the ANMA benchmark"),
    ("linkem", "delay, jitter and loss without netem"),
    ("traceanalyze", "the capture analysis"),
    ("leansim", "congestlab simulate"),
)


def diagnose() -> list[Item]:
    items = [Item("root", os.geteuid() == 0, f"euid {os.geteuid()}", "run as root (sudo)")]
    if os.geteuid() == 0:
        ok, detail, found = probe_kernel_features()
        items.append(Item("netns", ok, detail, "a kernel with network namespaces"))
        for feature, why in (("htb", "the bottleneck shaper"), ("tbf", "alternative shaper"),
                             ("netem", "kernel delay/loss; without it linkem is used"),
                             ("tuntap", "the lean server's TAP device")):
            present = found.get(feature, False)
            items.append(Item(feature, present, why if present else f"unavailable ({why})",
                              "kernel module/config" if feature != "netem" else "none needed: linkem replaces it",
                              required=feature != "netem"))
    bpf = Path("/sys/kernel/btf/vmlinux").exists()
    items.append(Item("bpf-btf", bpf, "/sys/kernel/btf/vmlinux" if bpf else "no BTF",
                      "a kernel with CONFIG_DEBUG_INFO_BTF"))
    items += [
        _tool("apache2", "apache2"), _tool("nginx", "nginx"), _tool("caddy", "caddy"), _tool("lighttpd", "lighttpd"),
        _tool("h2o", "h2o"), _tool("mgen", "mgen"),
        _tool("tcpdump", "tcpdump"), _tool("tshark", "tshark"), _tool("iperf", "iperf"),
        _tool("iperf3", "iperf3"), _tool("curl", "curl"), _tool("ethtool", "ethtool"),
        _tool("bpftool", "bpftool"), _tool("clang", "clang"),
    ]
    openssl_module = Path("/usr/lib/lighttpd/mod_openssl.so").exists()
    items.append(Item("lighttpd-mod-openssl", openssl_module, "lighttpd over TLS" if openssl_module else
                      "not found (lighttpd over TLS)", f"{APT} lighttpd-mod-openssl"))
    items.append(Item("cgroup-v1", cgroups_available(), "cpuacct, pids, freezer: a cgroup per server instance",
                      "cgroup v1 controllers mounted under /sys/fs/cgroup"))
    items.append(Item("mgen-ipv6-shim", SHIM_PATH.exists(), str(SHIM_PATH), "make build"))
    items += [_built(name, what) for name, what in RUST_BINARIES]
    compound = default_object(COMPOUND_KERNEL_NAME)
    items.append(Item("compound-bpf", compound.is_file(), str(compound) if compound.is_file() else
                      f"{compound} missing (Compound TCP)", "make build"))
    # optional: only `workloads.get.client_kind = "chromium"` needs the browser
    chromium = shutil.which("chromium")
    items.append(Item("chromium", chromium is not None, chromium or "not found (browser GETs)",
                      f"{APT} chromium", required=False))
    items.append(_readable_by_others())
    return items


def _readable_by_others() -> Item:
    """Whether users other than root can start this Python and import congestlab: the readers
    of a run directory (report, analyze, ...) need no root (README, "Without root")."""
    wanted = (Path(sys.executable).resolve(), Path(sys.base_prefix, "lib").resolve(), Path(__file__).resolve().parent)
    for path in wanted:
        for folder in path.parents if path.is_file() else (path, *path.parents):
            if not folder.stat().st_mode & stat.S_IXOTH:
                return Item("non-root", False, f"{folder} lets no other user in, so they cannot run {path}",
                            "rm -rf .venv && make venv (it picks a Python every user can run)", required=False)
    return Item("non-root", True, "other users can run this Python and congestlab (report, analyze, ...)", "",
                required=False)
