"""dualbench's JSON report (`--json FILE`), read into small typed records."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from congestlab.errors import RunDirError

FORMAT_VERSION = 1
FAMILIES = ("v6", "v4", "all")


@dataclass(frozen=True)
class TimeSummary:
    count: int
    avg: float
    p50: float
    p90: float
    p99: float
    max: float


@dataclass(frozen=True)
class FamilyResult:
    requests: int
    normal: int
    reset: int
    timeout: int
    refused: int
    other: int
    other_kinds: dict[str, int]
    connect_us: TimeSummary
    continuation_ms: TimeSummary
    latency_ms: TimeSummary
    body_bytes: int
    throughput_mbps: float


@dataclass(frozen=True)
class DualbenchReport:
    mode: str
    wall_s: float
    config: dict
    families: dict[str, FamilyResult]
    per_second: list[dict] = field(default_factory=list)
    nofile: dict = field(default_factory=dict)

    def family(self, name: str) -> FamilyResult:
        return self.families[name]


def _summary(data: dict) -> TimeSummary:
    return TimeSummary(int(data["count"]), float(data["avg"]), float(data["p50"]), float(data["p90"]),
                       float(data["p99"]), float(data["max"]))


def _family(data: dict) -> FamilyResult:
    return FamilyResult(
        requests=int(data["requests"]), normal=int(data["normal"]), reset=int(data["reset"]),
        timeout=int(data["timeout"]), refused=int(data["refused"]), other=int(data["other"]),
        other_kinds={str(k): int(v) for k, v in data.get("other_kinds", {}).items()},
        connect_us=_summary(data["connect_us"]), continuation_ms=_summary(data["continuation_ms"]),
        latency_ms=_summary(data["latency_ms"]), body_bytes=int(data["body_bytes"]),
        throughput_mbps=float(data["throughput_mbps"]))


def parse_report(text: str, origin: str = "dualbench JSON") -> DualbenchReport:
    try:
        doc = json.loads(text)
    except ValueError as err:
        raise RunDirError(f"{origin}: not valid JSON ({err})") from None
    if not isinstance(doc, dict) or doc.get("tool") != "dualbench":
        raise RunDirError(f"{origin}: not a dualbench report")
    if doc.get("format_version") != FORMAT_VERSION:
        raise RunDirError(f"{origin}: format_version {doc.get('format_version')!r}, expected {FORMAT_VERSION}")
    try:
        families = {name: _family(doc["families"][name]) for name in FAMILIES}
        return DualbenchReport(mode=str(doc["mode"]), wall_s=float(doc["wall_s"]), config=dict(doc["config"]),
                               families=families, per_second=list(doc.get("per_second", [])),
                               nofile=dict(doc.get("nofile", {})))
    except (KeyError, TypeError, ValueError) as err:
        raise RunDirError(f"{origin}: missing or malformed field ({type(err).__name__}: {err})") from None


def read_report(path: Path) -> DualbenchReport:
    path = Path(path)
    if not path.exists():
        raise RunDirError(f"{path}: no dualbench report")
    return parse_report(path.read_text(), str(path))
