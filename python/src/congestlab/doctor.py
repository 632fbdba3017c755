"""`congestlab doctor`: is everything a run needs present on this machine?"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from congestlab.testbed.capabilities import probe_kernel_features
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
        _tool("apache2", "apache2"), _tool("nginx", "nginx"), _tool("mgen", "mgen"),
        _tool("tcpdump", "tcpdump"), _tool("tshark", "tshark"), _tool("iperf", "iperf"),
        _tool("iperf3", "iperf3"), _tool("curl", "curl"), _tool("ethtool", "ethtool"),
        _tool("bpftool", "bpftool"), _tool("clang", "clang"),
    ]
    items.append(Item("mgen-ipv6-shim", SHIM_PATH.exists(), str(SHIM_PATH), "make build"))
    return items
