"""iperf 2 (Debian `iperf`, the study's tool): command lines and its `-y C` (CSV) reports.

CSV fields (iperf 2.0/2.1 `-y C`, one line per stream and report):
  TCP: time, src_addr, src_port, dst_addr, dst_port, id, interval, bytes, bits_per_second
  UDP: the same nine, then jitter_ms, lost, total_datagrams, lost_pct, out_of_order
`id` -1 marks a SUM line of a parallel client (we sum per-stream lines ourselves).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

from congestlab.errors import ToolError

PORT = 50123  # the study's port (TCP and UDP servers share it, as in the study)
TCP_FIELDS = 9
UDP_FIELDS = 14


class IperfParseError(ValueError):
    """A line that looks like an iperf CSV report but is not a valid one."""


@dataclass(frozen=True)
class StreamReport:
    src: str
    src_port: int
    dst: str
    dst_port: int
    stream_id: int
    start_s: float
    end_s: float
    bytes: int
    bits_per_second: float
    protocol: str  # "tcp" or "udp"
    jitter_ms: float | None = None
    lost: int | None = None
    total_datagrams: int | None = None
    lost_pct: float | None = None

    @property
    def seconds(self) -> float:
        return self.end_s - self.start_s

    @property
    def mbit_per_s(self) -> float:
        return self.bits_per_second / 1e6

    @property
    def is_sum(self) -> bool:
        return self.stream_id < 0


def parse_csv_line(line: str) -> StreamReport:
    fields = line.strip().split(",")
    if len(fields) not in (TCP_FIELDS, UDP_FIELDS):
        raise IperfParseError(f"expected {TCP_FIELDS} or {UDP_FIELDS} comma-separated fields, got {len(fields)}")
    try:
        start_s, end_s = (float(x) for x in fields[6].split("-", 1))
        report = StreamReport(
            src=fields[1], src_port=int(fields[2]), dst=fields[3], dst_port=int(fields[4]),
            stream_id=int(fields[5]), start_s=start_s, end_s=end_s, bytes=int(fields[7]),
            bits_per_second=float(fields[8]), protocol="tcp" if len(fields) == TCP_FIELDS else "udp",
        )
        if len(fields) == UDP_FIELDS:
            report = StreamReport(**{**report.__dict__, "jitter_ms": float(fields[9]), "lost": int(fields[10]),
                                     "total_datagrams": int(fields[11]), "lost_pct": float(fields[12])})
    except ValueError as err:
        raise IperfParseError(f"bad field value ({err})") from None
    if report.bytes < 0 or report.bits_per_second < 0 or end_s < start_s:
        raise IperfParseError("negative bytes, rate or interval")
    return report


def parse_csv(text: str) -> tuple[list[StreamReport], list[str]]:
    """Per-stream reports (SUM lines dropped) and the lines that were not reports (warnings etc.).

    A line counts as a report attempt when it starts with a digit and holds commas; a
    malformed report raises IperfParseError naming the line number.
    """
    reports, other = [], []
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped:
            continue
        if not (stripped[0].isdigit() and "," in stripped):
            other.append(stripped)
            continue
        try:
            report = parse_csv_line(stripped)
        except IperfParseError as err:
            raise IperfParseError(f"line {number}: {err}: {stripped[:120]!r}") from None
        if not report.is_sum:
            reports.append(report)
    return reports, other


def server_argv(*, udp: bool = False, window_bytes: int | None = None, length_bytes: int | None = None,
                port: int = PORT, interval_s: float | None = None) -> list[str]:
    argv = ["iperf", "-s", "-p", str(port), "-y", "C"]
    if interval_s is not None:
        argv += ["-i", f"{interval_s:g}"]
    if udp:
        argv.append("-u")
    if window_bytes is not None:
        argv += ["-w", str(window_bytes)]
    if length_bytes is not None:
        argv += ["-l", str(length_bytes)]
    return argv


def client_argv(server: str, *, duration_s: float, udp: bool = False, parallel: int = 1,
                window_bytes: int | None = None, length_bytes: int | None = None,
                udp_rate_bps: int | None = None, port: int = PORT) -> list[str]:
    if duration_s <= 0:
        raise ValueError("duration_s must be > 0")
    if parallel < 1:
        raise ValueError("parallel must be >= 1")
    argv = ["iperf", "-c", server, "-p", str(port), "-t", f"{duration_s:g}", "-y", "C"]
    if udp:
        argv.append("-u")
        if udp_rate_bps is not None:
            argv += ["-b", str(udp_rate_bps)]
    if parallel > 1:
        argv += ["-P", str(parallel)]
    if window_bytes is not None:
        argv += ["-w", str(window_bytes)]
    if length_bytes is not None:
        argv += ["-l", str(length_bytes)]
    return argv


def iperf_version() -> str:
    try:
        proc = subprocess.run(["iperf", "-v"], capture_output=True, text=True, timeout=5)
    except FileNotFoundError:
        raise ToolError(["iperf"], None, "iperf (iperf 2) is not installed; apt-get install iperf") from None
    return (proc.stdout + proc.stderr).strip()
