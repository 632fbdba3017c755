"""The congestion series of one ngtcp2 qlog (gtlsserver --qlog-dir, or curl's QLOGDIR).

The file is JSON-SEQ (RFC 7464: each record starts with RS 0x1E): a header record with the
trace (vantage point, reference_time, relative times in ms), then events. ngtcp2 0.12.1 writes
only parameters_set, packet_sent, packet_received, metrics_updated and packet_lost, and no
connection_closed: the file is whole once the connection closed (the writer ends it then).

One point per recovery:metrics_updated event. ngtcp2 leaves fields out of an event (min_rtt
before the first RTT sample, for example): a field absent from an event carries the last value
given, None before the first. packets_sent and packets_lost are running counts of
transport:packet_sent and recovery:packet_lost events up to that point.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

RS = "\x1e"
QLOG_SUFFIXES = (".sqlog", ".qlog")
_METRICS = {"cwnd_bytes": "congestion_window", "bytes_in_flight": "bytes_in_flight",
            "smoothed_rtt_ms": "smoothed_rtt", "latest_rtt_ms": "latest_rtt", "min_rtt_ms": "min_rtt"}


@dataclass
class QlogSeries:
    path: Path
    vantage_point: str | None = None  # "server" or "client"
    time_ms: list[float] = field(default_factory=list)
    cwnd_bytes: list[int | None] = field(default_factory=list)
    bytes_in_flight: list[int | None] = field(default_factory=list)
    smoothed_rtt_ms: list[float | None] = field(default_factory=list)
    latest_rtt_ms: list[float | None] = field(default_factory=list)
    min_rtt_ms: list[float | None] = field(default_factory=list)
    packets_sent: list[int] = field(default_factory=list)  # running count at each point
    packets_lost: list[int] = field(default_factory=list)  # running count at each point
    total_packets_sent: int = 0
    total_packets_lost: int = 0
    complete: bool = True  # the whole file was read; False when truncated or unreadable
    problems: list[str] = field(default_factory=list)


def read_qlog_series(path: Path) -> QlogSeries:
    """The series of one qlog file; what is wrong with it goes to `problems` (never raises
    for a missing, cut or garbled file: the caller reports the problems)."""
    path = Path(path)
    s = QlogSeries(path=path)
    try:
        text = path.read_bytes().decode("utf-8", errors="replace")
    except FileNotFoundError:
        s.complete = False
        s.problems.append(f"{path.name}: no such qlog file")
        return s
    except OSError as err:
        s.complete = False
        s.problems.append(f"{path.name}: unreadable: {err.strerror}")
        return s
    records = text.split(RS)
    if records and records[0].strip():
        s.complete = False
        s.problems.append(f"{path.name}: not JSON-SEQ (no record separator before the first record)")
        return s
    records = records[1:]
    if not records:
        s.complete = False
        s.problems.append(f"{path.name}: empty qlog")
        return s
    last = dict.fromkeys(_METRICS)
    for n, raw in enumerate(records, start=1):
        try:
            rec = json.loads(raw)
        except ValueError:
            s.complete = False
            where = "truncated after record" if n == len(records) else "unreadable record after record"
            s.problems.append(f"{path.name}: {where} {n - 1}")
            break
        if n == 1:
            trace = rec.get("trace") if isinstance(rec, dict) else None
            if not isinstance(trace, dict):
                s.complete = False
                s.problems.append(f"{path.name}: first record is not a qlog header")
                break
            s.vantage_point = (trace.get("vantage_point") or {}).get("type")
            continue
        _add_event(s, rec, last)
    if not s.time_ms and s.complete:
        s.problems.append(f"{path.name}: no metrics_updated events (no cwnd series)")
    elif not s.time_ms:
        s.problems.append(f"{path.name}: no metrics_updated events before the cut (no cwnd series)")
    return s


def _add_event(s: QlogSeries, rec, last: dict) -> None:
    if not isinstance(rec, dict):
        return
    name = rec.get("name")
    if name == "transport:packet_sent":
        s.total_packets_sent += 1
    elif name == "recovery:packet_lost":
        s.total_packets_lost += 1
    elif name == "recovery:metrics_updated":
        data = rec.get("data") or {}
        for attr, key in _METRICS.items():
            if key in data:
                last[attr] = data[key]
            getattr(s, attr).append(last[attr])
        s.time_ms.append(float(rec.get("time", 0)))
        s.packets_sent.append(s.total_packets_sent)
        s.packets_lost.append(s.total_packets_lost)


def qlog_for_connection(qlog_dir: Path, scid: str | None) -> Path | None:
    """The qlog file of a connection: ngtcp2 names it by its own source connection ID in
    hex (`<scid>.sqlog`: the server's SCID for gtlsserver, the client's for curl)."""
    if not scid:
        return None
    scid = scid.replace(":", "").lower()
    for suffix in QLOG_SUFFIXES:
        candidate = Path(qlog_dir) / f"{scid}{suffix}"
        if candidate.is_file():
            return candidate
    return None
