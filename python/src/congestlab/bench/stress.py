"""dualbench as the HTTP stress/background client of a study (http_load in seeds 000/002):
a spec of the load and its command line. E.g. "50 Mbit/s of HTTP stress of a 320 KB file"
= HttpStress.for_throughput."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from congestlab.errors import SpecError


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

