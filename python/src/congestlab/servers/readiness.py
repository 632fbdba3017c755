"""Ready checks that need no client: a socket listening (bound) on the server's port, seen
with `ss` in its namespace, or a line of its log matching a pattern."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

WILDCARDS = {"*", "0.0.0.0", "[::]", "::"}


def listening_families(netns: str | None, port: str, protocol: str, addr4: str, addr6: str) -> set[str]:
    """The families a listening TCP (bound UDP) socket on `port` covers: a wildcard or the
    host's address of the family (a `[::]` socket is taken to cover v4 too, as Linux's
    default `bindv6only = 0` makes it)."""
    flag = "-Hltn" if protocol == "tcp" else "-Hlun"
    prefix = ["ip", "netns", "exec", netns] if netns else []
    try:
        out = subprocess.run(prefix + ["ss", flag, f"( sport = :{port} )"], capture_output=True, text=True,
                             timeout=5).stdout
    except (OSError, subprocess.TimeoutExpired):
        return set()
    found: set[str] = set()
    for line in out.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        local = fields[3].rsplit(":", 1)[0].split("%")[0]
        if local in ("[::]", "::", "*"):
            found |= {"v4", "v6"}
        elif local in ("0.0.0.0", addr4):
            found.add("v4")
        elif local.strip("[]") == addr6:
            found.add("v6")
    return found


def log_matches(path: Path, pattern: str) -> bool:
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return False
    return re.search(pattern, text, re.MULTILINE) is not None
