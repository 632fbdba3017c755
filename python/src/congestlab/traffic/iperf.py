"""iperf's command lines and reports: iperf 2 as seed 003 drove it (`-y C` CSV lines, one
per stream and report; -w/-l on either side) and iperf3 (`-J` JSON, a per-socket congestion
control with `-C`). The runner that starts them is workloads/iperf.py.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass

# --- iperf 2 -----------------------------------------------------------------------------
# CSV fields (iperf 2.0/2.1 `-y C`, one line per stream and report):
#   TCP: time, src_addr, src_port, dst_addr, dst_port, id, interval, bytes, bits_per_second
#   UDP: the same nine, then jitter_ms, lost, total_datagrams, lost_pct, out_of_order
# `id` -1 marks a SUM line of a parallel client (we sum per-stream lines ourselves).
TCP_FIELDS = 9
UDP_FIELDS = 14


class IperfParseError(ValueError):
    """A line that looks like an iperf report but is not a valid one."""


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
    """Per-stream reports (SUM lines dropped) and the lines that were not reports.

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


def whole_run(reports: list[StreamReport]) -> list[StreamReport]:
    """A server that also prints 1 s interval lines: only the whole-session lines (from 0, longer than 1.5 s)."""
    return [r for r in reports if r.start_s == 0 and r.seconds > 1.5]


def steady_mbps(reports: list[StreamReport], omit_s: float) -> float:
    """Rate of the 1 s interval reports that start at or after `omit_s` (slow start left
    out, like iperf3 -O), all streams together; whole-run lines are not interval reports."""
    steady = [r for r in reports if r.start_s >= omit_s and r.seconds <= 1.5]
    if not steady:
        raise IperfParseError(f"no interval reports after {omit_s:g} s")
    spans = {(r.start_s, r.end_s) for r in steady}
    return sum(r.bytes for r in steady) * 8 / sum(e - s for s, e in spans) / 1e6


def server2_argv(port: int, *, udp: bool = False, window_bytes: int | None = None,
                 length_bytes: int | None = None, interval_s: float | None = None, family: str = "v4") -> list[str]:
    argv = ["iperf", "-s", "-p", str(port), "-y", "C"]
    if family == "v6":
        argv.append("-V")
    if interval_s is not None:
        argv += ["-i", f"{interval_s:g}"]
    if udp:
        argv.append("-u")
    if window_bytes is not None:
        argv += ["-w", str(window_bytes)]
    if length_bytes is not None:
        argv += ["-l", str(length_bytes)]
    return argv


def client2_argv(server: str, port: int, *, duration_s: float, udp: bool = False, parallel: int = 1,
                 window_bytes: int | None = None, length_bytes: int | None = None,
                 udp_rate_bps: float | None = None, family: str = "v4") -> list[str]:
    if duration_s <= 0:
        raise ValueError("duration_s must be > 0")
    if parallel < 1:
        raise ValueError("parallel must be >= 1")
    argv = ["iperf", "-c", server, "-p", str(port), "-t", f"{duration_s:g}", "-y", "C"]
    if family == "v6":
        argv.append("-V")
    if udp:
        argv.append("-u")
        if udp_rate_bps is not None:
            argv += ["-b", str(int(udp_rate_bps))]
    if parallel > 1:
        argv += ["-P", str(parallel)]
    if window_bytes is not None:
        argv += ["-w", str(window_bytes)]
    if length_bytes is not None:
        argv += ["-l", str(length_bytes)]
    return argv



# --- iperf3 --------------------------------------------------------------------------------
def server3_argv(port: int) -> list[str]:
    """One server per flow, ending after its one test (-1)."""
    return ["iperf3", "-s", "-1", "-p", str(port)]


def client3_argv(server: str, port: int, *, duration_s: float, cc: str | None = None, udp: bool = False,
                 udp_rate_bps: float | None = None, window_bytes: int | None = None,
                 length_bytes: int | None = None, omit_s: float = 0.0, family: str = "v4") -> list[str]:
    argv = ["iperf3", "-c", server, "-p", str(port), "-t", f"{duration_s:g}", "-J", "--connect-timeout", "3000",
            "-4" if family == "v4" else "-6"]
    if cc:
        argv += ["-C", cc]
    if udp:
        argv += ["-u", "-b", str(int(udp_rate_bps or 1_000_000))]
    if window_bytes is not None:
        argv += ["-w", str(window_bytes)]
    if length_bytes is not None:
        argv += ["-l", str(length_bytes)]
    if omit_s:
        argv += ["-O", f"{omit_s:g}"]
    return argv


@dataclass(frozen=True)
class Iperf3Result:
    bytes: int
    seconds: float
    received_bps: float
    retransmits: int | None
    local_port: int
    jitter_ms: float | None = None
    lost: int | None = None
    packets: int | None = None


def parse_iperf3_json(text: str) -> Iperf3Result:
    """The client's `-J` report: what the receiver got (TCP sum_received; UDP the server's sum)."""
    try:
        report = json.loads(text)
    except json.JSONDecodeError as err:
        raise IperfParseError(f"iperf3 -J output is not JSON: {err}") from None
    if "error" in report:
        raise IperfParseError(f"iperf3: {report['error']}")
    try:
        end = report["end"]
        local_port = int(report["start"]["connected"][0]["local_port"])
        if "sum_received" in end:  # TCP
            recv = end["sum_received"]
            return Iperf3Result(int(recv["bytes"]), float(recv["seconds"]), float(recv["bits_per_second"]),
                                int(end["sum_sent"].get("retransmits", 0)), local_port)
        total = end["sum"]  # UDP: the server's view of the datagrams
        return Iperf3Result(int(total["bytes"]), float(total["seconds"]), float(total["bits_per_second"]), None,
                            local_port, float(total.get("jitter_ms", 0.0)), int(total.get("lost_packets", 0)),
                            int(total.get("packets", 0)))
    except (KeyError, IndexError, TypeError, ValueError) as err:
        raise IperfParseError(f"iperf3 -J report lacks {err}") from None


def iperf_versions() -> dict[str, str]:
    out = {}
    for name, argv in (("iperf", ["iperf", "-v"]), ("iperf3", ["iperf3", "--version"])):
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=5)
        except FileNotFoundError:
            out[name] = "not installed"
            continue
        text = (proc.stdout + proc.stderr).strip()
        out[name] = text.splitlines()[0] if text else "?"
    return out

