"""A small web-study spec (the ipv6 preset's network, two short levels) and leftover checks."""

from __future__ import annotations

import subprocess
from importlib import resources
from pathlib import Path

MINI_TAIL = """
[[levels]]
name = "C0"
set = { "workloads.bg.rate_bps" = 0 }

[[levels]]
name = "L20"
set = { "workloads.bg.rate_bps" = 20_000_000, "workloads.bg.mix" = { tcp4 = 45, tcp6 = 45, udp4 = 5, udp6 = 5 } }

[[experiments]]
name = "main"
axes = [
  { name = "server", fields = ["workloads.get.requests.0.server"], values = ["apache", "lean"] },
  { name = "level", levels = ["C0", "L20"] },
]
"""


def mini_spec_text(repetitions: int = 2) -> str:
    """The ipv6 preset with two short levels (C0 and 20 Mbit/s of MGEN) and both servers."""
    text = (resources.files("congestlab.spec.presets") / "ipv6.toml").read_text()
    text = text[: text.index("# Table I of seed 001")] + MINI_TAIL
    text = text.replace('name = "ipv6"', 'name = "mini"', 1)
    text = text.replace("repetitions = 10", f"repetitions = {repetitions}", 1)
    text = text.replace("warmup_s = 3.0", "warmup_s = 1.0", 1).replace("gap_s = 0.3", "gap_s = 0.1", 1)
    return text


def write_mini_spec(directory: Path, repetitions: int = 2) -> Path:
    path = directory / "mini.toml"
    path.write_text(mini_spec_text(repetitions))
    return path


def namespaces_with(prefix: str) -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith(prefix + "-")]


def processes_mentioning(text: str) -> list[str]:
    """Command lines of live processes that mention `text` (e.g. a run directory)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline and "pytest" not in cmdline:
            found.append(f"{proc.name}: {cmdline.strip()}")
    return found
