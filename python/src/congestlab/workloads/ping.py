"""ping from a client host to another host: RTT and loss of the emulated path, and the
fidelity checks a spec asks for (expected RTT within a tolerance, expected loss over at
least `loss_min_packets` echo requests) — the tcp-lab study's checks of its line.

One `ping` record per run (results.py). ping sends its count of echo requests with no
deadline of its own (traffic/ping.py, ping_argv); a timeout on our side bounds the run.
"""

from __future__ import annotations

from congestlab.errors import ToolError
from congestlab.fidelity import Check
from congestlab.traffic.ping import PingParseError, PingResult, parse_ping, ping_argv
from congestlab.workloads.base import Measuring, Record

DEADLINE_MARGIN_S = 10.0


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

    @classmethod
    def tools(cls, spec) -> set[str]:
        return {"ping"}

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
