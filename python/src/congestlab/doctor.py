"""`congestlab doctor`: is everything a run needs present on this machine?"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

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


def _netns_probe() -> tuple[bool, str, dict[str, bool]]:
    """Make a throwaway namespace, try each kernel feature in it, delete it."""
    ns = f"cldoc{uuid.uuid4().hex[:6]}"
    found = {}
    if subprocess.run(["ip", "netns", "add", ns], capture_output=True).returncode != 0:
        return False, "cannot create network namespaces", {}
    try:
        run = lambda *a: subprocess.run(["ip", "netns", "exec", ns, *a], capture_output=True).returncode == 0  # noqa: E731
        run("ip", "link", "add", "cldva", "type", "veth", "peer", "name", "cldvb")
        found["htb"] = run("tc", "qdisc", "add", "dev", "cldva", "root", "handle", "1:", "htb")
        found["tbf"] = run("tc", "qdisc", "add", "dev", "cldvb", "root", "tbf", "rate", "1mbit", "burst", "10k",
                           "latency", "10ms")
        run("tc", "qdisc", "del", "dev", "cldvb", "root")
        found["netem"] = run("tc", "qdisc", "add", "dev", "cldvb", "root", "netem", "delay", "1ms")
        found["tuntap"] = run("ip", "tuntap", "add", "t0", "mode", "tap")
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    return True, "ok", found


def diagnose() -> list[Item]:
    items = [Item("root", os.geteuid() == 0, f"euid {os.geteuid()}", "run as root (sudo)")]
    if os.geteuid() == 0:
        ok, detail, found = _netns_probe()
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
