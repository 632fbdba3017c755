"""dualbench `load` (the studies' http_load stress and "BT" background): open-loop fetches
of one file at a set rate. Its per-second lines, read while it runs, give each measuring
window the offered fetch rate and the body throughput the client received (load.csv's
window_s = how many of the load's whole seconds overlap the window)."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

from congestlab.bench.stress import HttpStress
from congestlab.errors import SpecError
from congestlab.fidelity import Check
from congestlab.paths import rust_binary
from congestlab.servers.files import url_path
from congestlab.traffic.http_request import url_for
from congestlab.workloads.base import Background, OneClientOneServer, Record

# leansim: competing lean fetches are scheduled this long past the warm-up (they end with the GETs)
LEANSIM_HORIZON_S = 30.0
LEANSIM_MAX_FETCHES = 10_000

# dualbench's per-second line (crates/dualbench/src/load.rs, SecondLine::human)
_SECOND = re.compile(rb"^\s*(\d+)s\s+started\s+(\d+)\s+done\s+(\d+)\s+normal\s+(\d+)\s+reset\s+(\d+)\s+timeout\s+(\d+)"
                     rb"\s+refused\s+(\d+)\s+other\s+(\d+)\s+([\d.]+) Mbit/s(?:\s+skipped\s+(\d+))?")


def parse_seconds(text: bytes) -> list[dict]:
    rows = []
    for line in text.splitlines():
        m = _SECOND.match(line)
        if m:
            second, started, done, normal, reset, timeout, refused, other = (int(g) for g in m.groups()[:8])
            rows.append({"second": second, "started": started, "done": done, "normal": normal,
                         "failed": reset + timeout + refused + other, "mbps": float(m.group(9)),
                         "skipped": int(m.group(10) or 0)})
    return rows


class HttpLoadRunner(OneClientOneServer, Background):
    def __init__(self, spec, ctx, log_dir: Path):
        super().__init__(spec, ctx, log_dir)
        self.proc: subprocess.Popen | None = None
        self.started_epoch_s = 0.0
        self.span_epoch_s: list[float] = []  # first window's start, last window's end
        self.stdout_path = log_dir / f"dualbench-{spec.name}.txt"

    @classmethod
    def tools(cls, spec) -> set[str]:
        return {"dualbench"}

    @classmethod
    def leansim_background(cls, spec, study, lean_server: str, where: str) -> list[dict] | None:
        """Its fetches from the lean server, a connection each, from the start of the warm-up."""
        if spec.server != lean_server:
            raise SpecError(f"{where}.server", f"{spec.server!r} is not the simulated lean server {lean_server!r}")
        if spec.keepalive:
            raise SpecError(f"{where}.keepalive", "keep-alive fetches are not simulated (one connection each)")
        per_s = spec.fetch_rate_per_s()
        if per_s <= 0:
            return []
        count = min(LEANSIM_MAX_FETCHES, int((study.warmup_s + LEANSIM_HORIZON_S) * per_s) + 1)
        return [{"kind": "get", "family": spec.family, "path": url_path(spec.file_kib), "interval_ms": 1000.0 / per_s,
                 "count": count}]

    @property
    def off(self) -> bool:
        return self.spec.fetch_rate_per_s() <= 0

    def start(self) -> None:
        if self.off:
            return
        self.log_dir.mkdir(parents=True, exist_ok=True)
        spec, ctx = self.spec, self.ctx
        server = ctx.servers[spec.server]
        url = url_for(ctx.server_address(spec.server, spec.family), server.port, url_path(spec.file_kib))
        stress = HttpStress(urls=(url,), seconds=ctx.bound_s, rate_per_s=spec.fetch_rate_per_s(),
                            keepalive=spec.keepalive, timeout_s=spec.timeout_s,
                            max_connections=spec.max_connections)
        # not --quiet: the per-second lines are what each window is measured from
        argv = [a for a in stress.argv(rust_binary("dualbench"), self.log_dir / f"dualbench-{spec.name}.json")
                if a != "--quiet"]
        self.argvs.append(argv)
        with open(self.stdout_path, "wb") as out:
            self.started_epoch_s = time.time()
            self.proc = ctx.tb.start(spec.client, argv, stdout=out, stderr=subprocess.STDOUT)

    def _seconds_until(self, t1: float, wait_s: float = 1.5) -> list[dict]:
        """The per-second lines, once the line of the second holding t1 is out (dualbench
        prints a second's line when that second ends)."""
        needed = int(t1 - self.started_epoch_s) + 1
        deadline = time.monotonic() + wait_s
        while True:
            seconds = parse_seconds(self.stdout_path.read_bytes())
            if (seconds and seconds[-1]["second"] >= needed) or time.monotonic() > deadline \
                    or self.proc.poll() is not None:
                return seconds
            time.sleep(0.05)

    def _covering(self, seconds: list[dict], t0: float, t1: float) -> list[dict]:
        """The load's whole seconds that overlap [t0, t1] (second k spans start+k-1 .. start+k)."""
        return [r for r in seconds
                if self.started_epoch_s + r["second"] - 1 < t1 and self.started_epoch_s + r["second"] > t0]

    def _offered_check(self, name: str, seconds: list[dict]) -> Check:
        """Open loop: fetches start on a fixed schedule, so over n seconds the count is the
        configured rate x n, give or take the one fetch a second boundary may cut. With
        skipped_as_due, fetches skipped at the connection cap count too (an overload by design)."""
        spec = self.spec
        configured = spec.fetch_rate_per_s()
        started = sum(r["started"] + (r["skipped"] if spec.skipped_as_due else 0) for r in seconds)
        expected = configured * len(seconds)
        dev = (started - expected) / expected * 100 if expected else 0.0
        ok = abs(started - expected) <= 1 + expected * spec.tolerance_pct / 100
        what = "started or skipped" if spec.skipped_as_due else "started"
        return Check(name, ok, round(dev, 2), f"within ±{spec.tolerance_pct:g} % (±1 fetch)",
                     "" if ok else f"{spec.name}: {what} {started} fetches in {len(seconds)} s, configured "
                                   f"{expected:.1f} ({dev:+.1f} %)")

    def measure(self, window_epoch_s: tuple[float, float]) -> tuple[list[Record], list[Check]]:
        """The load during the window, from its whole seconds that overlap the window (a
        measuring window is often shorter than one second)."""
        if self.off or self.proc is None:
            return [], []
        t0, t1 = window_epoch_s
        self.span_epoch_s = [self.span_epoch_s[0] if self.span_epoch_s else t0, t1]
        seconds = self._covering(self._seconds_until(t1), t0, t1)
        spec = self.spec
        configured_fetches = spec.fetch_rate_per_s()
        configured_mbps = configured_fetches * spec.file_kib * 1024 * 8 / 1e6
        if not seconds:  # the load printed no line for the window's seconds (it ended?)
            return [("load", self._row(configured_mbps, configured_fetches, None, None, 0, 0, 0.0, 0))], []
        n = len(seconds)
        offered = sum(r["started"] for r in seconds) / n
        achieved = sum(r["mbps"] for r in seconds) / n
        row = self._row(configured_mbps, configured_fetches, offered, achieved, sum(r["normal"] for r in seconds),
                        sum(r["failed"] for r in seconds), float(n), sum(r["skipped"] for r in seconds))
        return [("load", row)], [self._offered_check(f"load_offered_{spec.name}", seconds)]

    def lifetime_checks(self) -> list[Check]:
        """The offered rate from the first window's start to the last window's end."""
        if self.off or self.proc is None or not self.span_epoch_s:
            return []
        seconds = self._covering(parse_seconds(self.stdout_path.read_bytes()), *self.span_epoch_s)
        return [self._offered_check(f"load_offered_lifetime_{self.spec.name}", seconds)] if seconds else []

    def describe(self) -> dict:
        spec = self.spec
        return super().describe() | {"max_connections": spec.max_connections,
                                     "configured_fetches_per_s": spec.fetch_rate_per_s(), "file_kib": spec.file_kib}

    def _row(self, configured_mbps, configured_fetches, offered, achieved, ok, failed, window_s, skipped) -> dict:
        spec = self.spec
        return {"workload": spec.name, "client": spec.client, "server": spec.server, "family": spec.family,
                "file_kib": spec.file_kib, "configured_mbps": configured_mbps,
                "configured_fetches_per_s": configured_fetches, "offered_fetches_per_s": offered,
                "achieved_mbps": achieved,
                "shared_bandwidth_pct": None if achieved is None or not configured_mbps
                else achieved / configured_mbps * 100,
                "fetches_ok": ok, "fetches_failed": failed, "fetches_skipped": skipped, "latency_mean_ms": None,
                "window_s": window_s}

    def stop(self) -> None:
        if self.proc is not None:
            self.ctx.tb.stop(self.proc)
            self.proc = None
