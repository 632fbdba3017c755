"""What this kernel offers a testbed (for `congestlab doctor`): a throwaway namespace in
which each feature is tried for real, then deleted. It lives in testbed/ because it
builds network pieces, as everything that does."""

from __future__ import annotations

import subprocess
import uuid


def probe_kernel_features() -> tuple[bool, str, dict[str, bool]]:
    """Make a throwaway namespace, try each kernel feature in it, delete it."""
    ns = f"cldoc{uuid.uuid4().hex[:6]}"
    found = {}
    if subprocess.run(["ip", "netns", "add", ns], capture_output=True).returncode != 0:
        return False, "cannot create network namespaces", {}
    try:
        def run(*a: str) -> bool:
            return subprocess.run(["ip", "netns", "exec", ns, *a], capture_output=True).returncode == 0

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
