"""dualbench `anma` (seed 004, the ANMA dual-stack benchmark): `requests` fetches of one
file from the client's namespace, `concurrency` at a time, over an address list holding
the server's IPv6 and IPv4 addresses in the ratio v6:v4 (dualbench assigns the entries
round-robin, so the per-family counts are exact: requests x v6 / (v6 + v4)). One `anma`
record per family (v6, v4, all) per repetition, with the columns of congestlab/results.py."""

from __future__ import annotations

import math

from congestlab.bench.results import FamilyResult, read_report
from congestlab.errors import ToolError
from congestlab.paths import rust_binary
from congestlab.servers.files import url_path
from congestlab.workloads.base import Measuring, OneClientOneServer, Record

# the slides' address lists repeat one address per entry; dualbench's --seed fixes the
# shuffle of the request order, so two runs of a pattern send the same sequence
SEED = 4
FAMILIES = ("v6", "v4", "all")


def address_lines(v6_addr: str, v4_addr: str, v6: int, v4: int) -> list[str]:
    """The address list of a v6:v4 pattern: v6 entries of the IPv6 address, then v4 of the IPv4."""
    return [v6_addr] * v6 + [v4_addr] * v4


def anma_row(name: str, server: str, family: str, fam: FamilyResult) -> dict:
    """An `anma` record (results.py): times as means in ms, None where no request of the
    family got that far (no handshake completed, no NORMAL transfer)."""
    def mean_ms(summary, scale: float):
        return summary.avg * scale if summary.count else None

    return {"workload": name, "server": server, "family": family, "requests": fam.requests, "normal": fam.normal,
            "reset": fam.reset, "timeout": fam.timeout, "refused": fam.refused, "other": fam.other,
            "connect_mean_ms": mean_ms(fam.connect_us, 1e-3),
            "connect_p50_ms": fam.connect_us.p50 * 1e-3 if fam.connect_us.count else None,
            "connect_p99_ms": fam.connect_us.p99 * 1e-3 if fam.connect_us.count else None,
            "continuation_mean_ms": mean_ms(fam.continuation_ms, 1.0),
            "continuation_p50_ms": fam.continuation_ms.p50 if fam.continuation_ms.count else None,
            "continuation_p90_ms": fam.continuation_ms.p90 if fam.continuation_ms.count else None,
            "latency_mean_ms": mean_ms(fam.latency_ms, 1.0),
            "throughput_mbps": fam.throughput_mbps}


class AnmaRunner(OneClientOneServer, Measuring):
    def run(self, repetition: int) -> tuple[list[Record], list]:
        spec, ctx = self.spec, self.ctx
        server = ctx.servers[spec.server]
        self.log_dir.mkdir(parents=True, exist_ok=True)
        stem = f"anma-{spec.name}"
        addresses = self.log_dir / f"{stem}.addresses"
        lines = address_lines(ctx.server_address(spec.server, "v6"), ctx.server_address(spec.server, "v4"),
                              spec.v6, spec.v4)
        addresses.write_text(f"# IPv6:IPv4 = {spec.v6}:{spec.v4}\n" + "\n".join(lines) + "\n")
        json_path = self.log_dir / f"{stem}.json"
        argv = [str(rust_binary("dualbench")), "anma", "--addresses", str(addresses), "--port", str(server.port),
                "--path", url_path(spec.file_kib), "--requests", str(spec.requests),
                "--concurrency", str(spec.concurrency), "--timeout", f"{spec.timeout_s:g}s", "--seed", str(SEED),
                "--json", str(json_path)]
        self.argvs.append(argv)
        proc = ctx.tb.run(spec.client, argv, timeout_s=self.time_bound_s(spec, ctx.study), check=False)
        (self.log_dir / f"{stem}.txt").write_text(proc.stdout + proc.stderr)
        if proc.returncode != 0:  # dualbench exits 0 whatever the outcomes (docs/dualbench.md)
            raise ToolError(argv, proc.returncode, proc.stderr or proc.stdout)
        report = read_report(json_path)
        return [("anma", anma_row(spec.name, spec.server, fam, report.family(fam))) for fam in FAMILIES], []

    @classmethod
    def tools(cls, spec) -> set[str]:
        return {"dualbench"}

    @classmethod
    def time_bound_s(cls, spec, study) -> float:
        # every round of `concurrency` requests ends within the per-request timeout
        rounds = math.ceil(spec.requests / spec.concurrency)
        return rounds * spec.timeout_s * 2 + 60
