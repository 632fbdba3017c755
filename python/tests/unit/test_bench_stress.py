"""The HTTP stress spec: rate from a throughput, argv, and what it refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from congestlab.bench.stress import HttpStress
from congestlab.errors import SpecError


def test_rate_for_a_throughput():
    s = HttpStress.for_throughput("http://10.0.4.10/320KiB.bin", 320, 50e6, 30)
    assert s.rate_per_s == pytest.approx(50e6 / (320 * 1024 * 8))  # ≈ 19.07 fetches/s


def test_argv_open_and_closed_loop():
    s = HttpStress(urls=("http://10.0.4.10/a", "http://[fd00::4:a]/a"), seconds=5, rate_per_s=20.0)
    assert s.argv(Path("/b/dualbench"), Path("/r/x.json")) == [
        "/b/dualbench", "load", "--url", "http://10.0.4.10/a", "--url", "http://[fd00::4:a]/a", "--rate", "20",
        "--seconds", "5", "--timeout", "10s", "--quiet", "--json", "/r/x.json"]
    c = HttpStress(urls=("http://10.0.4.10/a",), seconds=2.5, parallel=8, keepalive=True, timeout_s=0.5)
    argv = c.argv(Path("d"), Path("j"))
    assert argv[argv.index("--parallel") + 1] == "8" and argv[-1] == "--keepalive"
    assert argv[argv.index("--timeout") + 1] == "0.5s"


@pytest.mark.parametrize("kw", [
    {"rate_per_s": 1.0, "parallel": 2},
    {},
    {"rate_per_s": 1.0, "seconds": 0},
])
def test_refuses_ambiguous_or_unbounded(kw):
    args = {"urls": ("http://127.0.0.1/",), "seconds": 1.0} | kw
    with pytest.raises(SpecError):
        HttpStress(**args)
