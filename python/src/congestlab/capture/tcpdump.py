"""tcpdump on the server's interface: headers only, immediate mode, one pcap per server; a
QUIC server's UDP port whole (its packets are read after decryption)."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

from congestlab.errors import ToolError

# Ethernet 14 + IPv6 40 + TCP with options 60 = 114: every header, no payload.
SNAPLEN_BYTES = 128


def tcpdump_argv(iface: str, pcap: Path, bpf_filter: str, snaplen_bytes: int = SNAPLEN_BYTES) -> list[str]:
    """`snaplen_bytes` 0: whole packets."""
    exe = shutil.which("tcpdump") or "/usr/bin/tcpdump"
    # -Z root: keep writing into the root-owned run directory; -U + immediate mode: a
    # capture stopped right after the traffic still holds every packet.
    return [exe, "-i", iface, "-s", str(snaplen_bytes), "-n", "-U", "--immediate-mode", "-Z", "root",
            "-w", str(pcap), bpf_filter]


def tcpdump_version() -> str:
    exe = shutil.which("tcpdump")
    if not exe:
        raise ToolError(["tcpdump"], None)
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=5).stdout
    match = re.search(r"tcpdump version (\S+)", out)
    return match.group(1) if match else out.strip()


def wait_listening(stderr_path: Path, proc: subprocess.Popen, argv: list[str], timeout_s: float = 5.0) -> None:
    """tcpdump says "listening on IFACE" once its socket is open."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = stderr_path.read_text(errors="replace") if stderr_path.exists() else ""
        if "listening on" in text:
            return
        if proc.poll() is not None:
            raise ToolError(argv, proc.returncode, text)
        time.sleep(0.02)
    raise ToolError(argv, -1, "tcpdump did not start listening")


def parse_drop_counts(stderr_text: str) -> dict[str, int]:
    counts = {}
    for key in ("packets captured", "packets received by filter", "packets dropped by kernel"):
        match = re.search(rf"(\d+) {key}", stderr_text)
        if match:
            counts[key.replace(" ", "_")] = int(match.group(1))
    return counts
