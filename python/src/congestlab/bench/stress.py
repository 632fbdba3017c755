"""dualbench as the HTTP stress/background client of a study (http_load in seeds 000/002):
a spec of the load, its command line, and a run in a testbed node that ends with the
parsed report. E.g. "50 Mbit/s of HTTP stress of a 320 KB file" = HttpStress.for_throughput."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from congestlab.bench.results import DualbenchReport, read_report
from congestlab.errors import SpecError, ToolError
from congestlab.paths import rust_binary


@dataclass(frozen=True)
class HttpStress:
    urls: tuple[str, ...]
    seconds: float
    rate_per_s: float | None = None  # open loop
    parallel: int | None = None  # closed loop
    keepalive: bool = False
    timeout_s: float = 10.0
    max_connections: int | None = None  # open loop: fetches due beyond this many open are skipped

    def __post_init__(self) -> None:
        if (self.rate_per_s is None) == (self.parallel is None):
            raise SpecError("http stress", "give exactly one of rate_per_s (open loop) or parallel (closed loop)")
        if not self.urls:
            raise SpecError("http stress", "no URLs")
        if self.seconds <= 0 or self.timeout_s <= 0:
            raise SpecError("http stress", "seconds and timeout_s must be positive")

    @classmethod
    def for_throughput(cls, url: str, file_kib: int, rate_bps: float, seconds: float, **kw) -> "HttpStress":
        """Open-loop fetches of a file_kib file at the rate that offers rate_bps of body bytes."""
        if rate_bps <= 0 or file_kib <= 0:
            raise SpecError("http stress", "rate_bps and file_kib must be positive")
        return cls(urls=(url,), seconds=seconds, rate_per_s=rate_bps / (file_kib * 1024 * 8), **kw)

    def argv(self, binary: Path, json_path: Path) -> list[str]:
        argv = [str(binary), "load"]
        for url in self.urls:
            argv += ["--url", url]
        if self.rate_per_s is not None:
            argv += ["--rate", f"{self.rate_per_s:.6g}"]
        else:
            argv += ["--parallel", str(self.parallel)]
        argv += ["--seconds", f"{self.seconds:g}", "--timeout", f"{self.timeout_s:g}s", "--quiet",
                 "--json", str(json_path)]
        if self.max_connections is not None:
            argv += ["--max-connections", str(self.max_connections)]
        return argv + (["--keepalive"] if self.keepalive else [])


class StressRun:
    """Start `stress` in a testbed node (killed at teardown if still running), then `wait()`."""

    def __init__(self, testbed, node: str, stress: HttpStress, json_path: Path, log_path: Path):
        self.testbed = testbed
        self.json_path = Path(json_path)
        self.log_path = Path(log_path)
        self.argv = stress.argv(rust_binary("dualbench"), self.json_path)
        self.deadline_s = stress.seconds + stress.timeout_s + 30
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "wb") as log:
            self.proc = testbed.start(node, self.argv, stdout=log, stderr=subprocess.STDOUT)

    def wait(self) -> DualbenchReport:
        try:
            rc = self.proc.wait(timeout=self.deadline_s)
        except subprocess.TimeoutExpired:
            self.testbed.stop(self.proc)
            raise ToolError(self.argv, None, f"did not finish within {self.deadline_s:g} s") from None
        if rc != 0:
            raise ToolError(self.argv, rc, self.log_path.read_text(errors="replace"))
        return read_report(self.json_path)
