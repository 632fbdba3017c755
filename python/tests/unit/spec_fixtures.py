"""A tiny spec's network (a client, a 20 Mbit/s router, an Apache server) and the one-line
refusal check that spec tests share."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from congestlab.errors import SpecError
from congestlab.spec.loader import parse_spec

TINY_NETWORK = """
[topology]
switches = [
  { name = "s0", subnet4 = "10.9.0.0/24", subnet6 = "fd00:9:0:0::/64" },
  { name = "s1", subnet4 = "10.9.1.0/24", subnet6 = "fd00:9:0:1::/64" },
]
[[topology.nodes]]
name = "r1"
kind = "router"
links = [{ switch = "s0", host_id = 1, rate_bps = 20_000_000 }, { switch = "s1", host_id = 1 }]
[[topology.nodes]]
name = "client"
links = [{ switch = "s0" }]
[[topology.nodes]]
name = "server"
links = [{ switch = "s1" }]
"""
TINY_TOPOLOGY = TINY_NETWORK + """
[[servers]]
name = "apache"
kind = "apache"
node = "server"
"""


def refused(text: str) -> str:
    """The SpecError a spec text gets: one line."""
    with pytest.raises(SpecError) as err:
        parse_spec(text, "x.toml")
    message = str(err.value)
    assert "\n" not in message, message
    return message


def dry_run(spec: Path) -> subprocess.CompletedProcess:
    """`congestlab run SPEC --dry-run` in a subprocess, as a user types it."""
    return subprocess.run([sys.executable, "-m", "congestlab.cli", "run", str(spec), "--dry-run"],
                          capture_output=True, text=True)
