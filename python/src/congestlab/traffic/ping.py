"""iputils ping: its command line, its output (the summary, the rtt line, the per-reply
times) and its version. The runner is workloads/ping.py."""

from __future__ import annotations

import re
import statistics
import subprocess
from dataclasses import dataclass, field


class PingParseError(ValueError):
    pass


@dataclass
class PingResult:
    sent: int
    received: int
    rtt_min_ms: float | None = None
    rtt_avg_ms: float | None = None
    rtt_max_ms: float | None = None
    rtt_mdev_ms: float | None = None
    rtts_ms: list[float] = field(default_factory=list)

    @property
    def loss(self) -> float:
        return (self.sent - self.received) / self.sent if self.sent else 1.0

    @property
    def rtt_median_ms(self) -> float | None:
        return statistics.median(self.rtts_ms) if self.rtts_ms else None


def parse_ping(out: str) -> PingResult:
    """iputils ping output: the summary line, the rtt line (absent when nothing came back)
    and the per-reply `time=` values (absent with -q)."""
    m = re.search(r"(\d+) packets transmitted, (\d+) (?:packets )?received", out)
    if not m:
        raise PingParseError("no 'packets transmitted' summary line")
    result = PingResult(int(m.group(1)), int(m.group(2)))
    rtt = re.search(r"(?:rtt|round-trip) min/avg/max/(?:mdev|stddev) = ([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+) ms", out)
    if rtt:
        result.rtt_min_ms, result.rtt_avg_ms, result.rtt_max_ms, result.rtt_mdev_ms = map(float, rtt.groups())
    elif result.received:
        raise PingParseError(f"{result.received} replies but no rtt summary line")
    result.rtts_ms = [float(x) for x in re.findall(r"time=([\d.]+) ms", out)]
    return result


def ping_argv(addr: str, family: str, count: int, interval_s: float, flood: bool) -> list[str]:
    """`count` echo requests, each waited for at most 2 s. No `-w` deadline: with one, ping
    keeps sending until `count` replies came back, and the requests still in flight when it
    stops count as lost (at 40 ms RTT and 10 ms spacing, ~1.5 %). The runner's timeout bounds it."""
    argv = ["ping", "-4" if family == "v4" else "-6", "-n", "-c", str(count), "-i", f"{interval_s:g}", "-W", "2"]
    if flood:
        argv[1:1] = ["-f", "-q"]
    return argv + [addr]


def ping_version() -> str:
    out = subprocess.run(["ping", "-V"], capture_output=True, text=True, timeout=10)
    return (out.stdout + out.stderr).strip().splitlines()[0] if out.returncode == 0 else "?"
