"""ping from a client host to another host: RTT and loss of the emulated path, and the
fidelity checks a spec asks for (expected RTT within a tolerance, expected loss over at
least `loss_min_packets` echo requests) — the tcp-lab study's checks of its line.

One `ping` record per run (results.py). The run is bounded by ping's own count and
deadline (-w) and by a timeout on our side.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field

from congestlab.errors import ToolError
from congestlab.fidelity import Check
from congestlab.workloads.base import Measuring, Record

DEADLINE_MARGIN_S = 10.0


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


def rtt_check(name: str, result: PingResult, expected_ms: float, tolerance_ms: float, where: str) -> Check:
    expected = f"{expected_ms:g} ± {tolerance_ms:g} ms (mean and median)"
    if not result.rtts_ms or result.rtt_avg_ms is None:
        return Check(name, False, None, expected, f"{where}: no ping replies")
    mean, median = result.rtt_avg_ms, result.rtt_median_ms
    ok = abs(mean - expected_ms) <= tolerance_ms and abs(median - expected_ms) <= tolerance_ms
    return Check(name, ok, round(mean, 3), expected,
                 f"{where}: ping mean {mean:.3f} ms, median {median:.3f} ms, min {result.rtt_min_ms:.3f}, "
                 f"max {result.rtt_max_ms:.3f}, {result.received} of {result.sent} replies")


def loss_check(name: str, result: PingResult, expected: float, tolerance: float, min_packets: int,
               where: str) -> Check:
    ok = abs(result.loss - expected) <= tolerance
    note = "" if result.sent >= min_packets else f"; only {result.sent} packets, the check asks for >= {min_packets}"
    return Check(name, ok, round(result.loss * 100, 3), f"{expected * 100:g} ± {tolerance * 100:g} %",
                 f"{where}: {result.sent - result.received} of {result.sent} echo requests lost = "
                 f"{result.loss * 100:.3f} %{note}")


class PingRunner(Measuring):
    @classmethod
    def host_pairs(cls, spec, study) -> set[tuple[str, str]]:
        return {(spec.client, spec.server)}

    def run(self, repetition: int) -> tuple[list[Record], list[Check]]:
        spec = self.spec
        addr = self.ctx.address(spec.server, spec.family)
        argv = ping_argv(addr, spec.family, spec.count, spec.interval_s, spec.flood)
        self.argvs.append(argv)
        proc = self.ctx.tb.run(spec.client, argv, check=False, timeout_s=self.time_bound_s(spec, self.ctx.study))
        self.log_dir.mkdir(parents=True, exist_ok=True)
        (self.log_dir / f"{spec.name}-ping.out").write_text(proc.stdout + proc.stderr)
        try:
            result = parse_ping(proc.stdout)
        except PingParseError as err:
            raise ToolError(argv, proc.returncode, f"{err}: {proc.stderr.strip()[:300]}") from None
        row = {"workload": spec.name, "client": spec.client, "server": spec.server, "family": spec.family,
               "sent": result.sent, "received": result.received, "loss": result.loss,
               "rtt_min_ms": result.rtt_min_ms, "rtt_avg_ms": result.rtt_avg_ms, "rtt_max_ms": result.rtt_max_ms,
               "rtt_mdev_ms": result.rtt_mdev_ms, "rtt_median_ms": result.rtt_median_ms}
        where = f"{spec.client} -> {spec.server} ({spec.family})"
        checks = []
        if spec.expect_rtt_ms is not None:
            checks.append(rtt_check(f"rtt_{spec.expect_rtt_ms:g}ms", result, spec.expect_rtt_ms, spec.rtt_tolerance_ms, where))
        if spec.expect_loss is not None:
            checks.append(loss_check(f"loss_{spec.expect_loss * 100:g}pct", result, spec.expect_loss, spec.loss_tolerance,
                                     spec.loss_min_packets, where))
        return [("ping", row)], checks

    @classmethod
    def time_bound_s(cls, spec, study) -> float:
        return spec.count * max(spec.interval_s, 0.001) * 3 + DEADLINE_MARGIN_S + 5
