"""The recorded series of one measured GET, as the panels (report/panels.py) draw them, read
from results/series/<point>/r<rep>/ (docs/data-format.md): the capture's segment trace of the
GET's connection, the server's own view (`<server>-tcp_probe.csv` for a kernel server,
`<server>-lean_log.csv` for the lean server, `<trace name>.qlog.csv` for an HTTP/3 GET to
ngtcp2: analysis/quic_requests.py) and the bottleneck queues (`bottleneck-queue.csv`). An
HTTP/3 GET's trace is its QUIC connection's (analysis/quic_trace.py): offsets are response
stream bytes, the SACK blocks the client's ACK ranges above its contiguous ACK.
Only the segment trace is required; a missing server or queue file leaves that panel empty
with a note, so a run recorded without the samplers still draws its capture's panels.

Every time is epoch ns on the capture's clock; the panels draw them in ms since the GET's
first segment (`t0_ns`).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from congestlab.analysis.trace_files import read_trace
from congestlab.stats.outcomes import COMPLETE

SERIES_ROOT = ("results", "series")
QUEUE_FILE = "bottleneck-queue.csv"
SENDER_FILES = (("tcp_probe", "kernel tcp_probe"), ("lean_log", "leanweb's log"))


@dataclass
class Trace:
    """The connection's segments as arrays (ms since t0), server data and client ACKs apart."""

    data_t_ms: np.ndarray      # server segments with payload
    data_lo: np.ndarray        # their relative sequence range [lo, hi)
    data_hi: np.ndarray
    data_retx: np.ndarray      # bool: bytes sent before
    ack_t_ms: np.ndarray       # client segments with an ACK
    ack_off: np.ndarray
    rwnd_edge: np.ndarray      # ack_off + the client's advertised window
    sack_t_ms: np.ndarray      # one entry per SACK block
    sack_lo: np.ndarray
    sack_hi: np.ndarray
    flight_t_ms: np.ndarray    # every segment: in-flight after it
    flight_bytes: np.ndarray
    rtt_t_ms: np.ndarray       # client ACKs that took an RTT sample
    rtt_ms: np.ndarray
    end_ms: float              # last segment


@dataclass
class Sender:
    """The server's own view of the GET's connection (kernel, lean log or ngtcp2's qlog)."""

    source: str                # "kernel tcp_probe", "leanweb's log" or "ngtcp2 qlog"
    t_ms: np.ndarray           # every event
    cwnd_bytes: np.ndarray     # NaN where empty
    ssthresh_bytes: np.ndarray
    in_flight_bytes: np.ndarray
    srtt_ms: np.ndarray
    retx_t_ms: np.ndarray      # retransmit events
    retx_seq: np.ndarray
    rto_t_ms: np.ndarray       # rto events (lean) and the kernel's entry to the loss state
    retx_label: str = "server retransmits"


@dataclass
class Queue:
    link: str
    t_ms: np.ndarray
    backlog_pkts: np.ndarray
    max_backlog_pkts: np.ndarray
    drop_t_ms: np.ndarray      # rows whose cumulative drops grew
    drops_new: np.ndarray      # by how much
    drops_in_window: int


@dataclass
class GetSeries:
    """One GET (a row of results/request.csv) with whatever was recorded of it."""

    point_id: str
    repetition: str
    server: str
    family: str
    client_port: int
    outcome: str
    delay_ms: float | None
    t0_ns: int
    trace: Trace
    sender: Sender | None = None
    queues: list[Queue] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    quic: bool = False         # an HTTP/3 GET: its trace is a QUIC connection's
    sender_absent: str = "cwnd not recorded"  # panel 2's word when `sender` is None

    @property
    def label(self) -> str:
        took = f"{self.delay_ms:.0f} ms" if self.delay_ms is not None else self.outcome.replace("_", " ")
        return f"r{self.repetition} · {self.family} port {self.client_port} · {took}"


def series_dir(run_dir: Path, point_id: str, repetition) -> Path:
    return Path(run_dir).joinpath(*SERIES_ROOT, point_id, f"r{repetition}")


def trace_file(run_dir: Path, point_id: str, repetition, server: str, family: str, client_port: int,
               start_ts: float | None) -> Path | None:
    """The GET's segment trace: `<server>-<family>-<port>.csv`, or, with the port used twice in
    the repetition, the `-<conn>` file whose first segment is nearest the GET's start."""
    d = series_dir(run_dir, point_id, repetition)
    base = f"{server}-{family}-{client_port}"
    found = [p for p in (d / f"{base}.csv", *sorted(d.glob(f"{base}-*.csv"))) if p.is_file()]
    if len(found) <= 1 or start_ts is None:
        return found[0] if found else None
    return min(found, key=lambda p: abs(_first_ts_ns(p) / 1e9 - start_ts))


def _first_ts_ns(path: Path) -> int:
    with open(path, newline="") as fh:
        row = next(csv.DictReader(fh), None)
    return int(row["ts_ns"]) if row else 0


def load_get(run_dir: Path, row: dict) -> GetSeries | None:
    """The series of one request row (results/request.csv as RunData keeps it), or None when
    its connection has no segment trace (not in the capture, or a run from before series)."""
    port = _int(row.get("client_port"))
    if port is None:
        return None
    start = _float(row.get("start_ts"))
    path = trace_file(run_dir, row["point_id"], row["repetition"], row["server"], row["family"], port, start)
    if path is None:
        return None
    rows = read_trace(path)
    if not rows:
        return None
    t0 = rows[0]["ts_ns"]
    trace = _trace(rows, t0)
    got = GetSeries(row["point_id"], row["repetition"], row["server"], row["family"], port,
                    row.get("outcome") or COMPLETE, _float(row.get("delay_ms")), t0, trace)
    d = path.parent
    window = (t0, t0 + int(trace.end_ms * 1e6))
    if str(row.get("http") or "") == "3":
        _quic_sender(got, path, row)
    else:
        _tcp_sender(got, d, row, port, t0)
    queue_path = d / QUEUE_FILE
    if queue_path.is_file():
        got.queues = _queues(queue_path, window, t0)
    else:
        got.notes.append(f"no {QUEUE_FILE}: the bottleneck queue was not recorded")
    return got


def _tcp_sender(got: GetSeries, d: Path, row: dict, port: int, t0: int) -> None:
    for suffix, source in SENDER_FILES:
        sender_path = d / f"{row['server']}-{suffix}.csv"
        if sender_path.is_file():
            got.sender = _sender(sender_path, source, row["family"], port, t0)
            if got.sender is None:
                got.notes.append(f"{sender_path.name} has no event of this connection")
            break
    else:
        got.notes.append(f"no {row['server']}-tcp_probe.csv or -lean_log.csv: the server's cwnd, ssthresh "
                         "and srtt were not recorded")


def _quic_sender(got: GetSeries, trace_path: Path, row: dict) -> None:
    """An HTTP/3 GET's sender view: ngtcp2's qlog series beside its trace, or why there is none."""
    got.quic = True
    if not (got.trace.rwnd_edge > got.trace.ack_off).any():
        got.notes.append("no MAX_STREAM_DATA of the response stream in the capture: no receive window drawn")
    qlog = trace_path.with_name(f"{trace_path.stem}.qlog.csv")
    if qlog.is_file():
        got.sender = qlog_sender(qlog, got.t0_ns)
        got.notes.append("ngtcp2 qlog: cwnd, in flight (whole packets), srtt; no ssthresh; lost packets marked")
        if got.sender is None:
            got.notes.append(f"{qlog.name} has no point")
    elif row.get("qlog"):
        got.sender_absent = "cwnd not recorded (no qlog series)"
        got.notes.append(f"the server's qlog of this GET: {row['qlog']}")
    else:  # a QUIC server that keeps no qlog: quic-go (Caddy) here
        got.sender_absent = "cwnd not recorded (the server writes no qlog)"
        got.notes.append(f"{got.server} writes no qlog (quic-go keeps none): no cwnd or srtt")


def qlog_sender(path: Path, t0: int) -> Sender | None:
    """ngtcp2's series of a GET (analysis/quic_requests.py write_qlog_series): its `ts_ns` on
    the capture's clock; a file without it (written before it was) is put at the trace's
    start, which is the client's first datagram, the qlog's time 0."""
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    if not rows:
        return None
    ts = [int(r["ts_ns"]) if r.get("ts_ns") else t0 + round(float(r["time_ms"]) * 1e6) for r in rows]
    lost = _column(rows, "packets_lost")
    grew = np.diff(lost, prepend=0.0) > 0
    t_ms = _ms(ts, t0)
    # before its first RTT sample (latest_rtt 0) ngtcp2's srtt is its initial guess (333 ms): not drawn
    srtt = _column(rows, "smoothed_rtt_ms")
    srtt[np.cumsum(np.nan_to_num(_column(rows, "latest_rtt_ms")) > 0) == 0] = np.nan
    return Sender(source="ngtcp2 qlog", t_ms=t_ms, cwnd_bytes=_column(rows, "cwnd_bytes"),
                  ssthresh_bytes=np.full(len(rows), np.nan), in_flight_bytes=_column(rows, "bytes_in_flight"),
                  srtt_ms=srtt, retx_t_ms=t_ms[grew], retx_seq=np.zeros(int(grew.sum())),
                  rto_t_ms=np.array([], dtype=float), retx_label="packets lost (qlog)")


def _ms(ts_ns, t0: int) -> np.ndarray:
    return (np.asarray(ts_ns, dtype=np.int64) - t0) / 1e6


def _trace(rows: list[dict], t0: int) -> Trace:
    data = [r for r in rows if r["dir"] == "s" and r["payload_bytes"] > 0]
    acks = [r for r in rows if r["dir"] == "c" and r["ack_off"] is not None]
    sacks = [(r["ts_ns"], lo, hi) for r in acks for lo, hi in r["sack_blocks"]]
    rtts = [r for r in acks if r["rtt_ns"] is not None]
    return Trace(
        data_t_ms=_ms([r["ts_ns"] for r in data], t0),
        data_lo=np.array([r["seq_off"] for r in data], dtype=float),
        data_hi=np.array([r["end_off"] for r in data], dtype=float),
        data_retx=np.array([r["retransmitted"] for r in data], dtype=bool),
        ack_t_ms=_ms([r["ts_ns"] for r in acks], t0),
        ack_off=np.array([r["ack_off"] for r in acks], dtype=float),
        rwnd_edge=np.array([r["ack_off"] + r["rwnd_bytes"] for r in acks], dtype=float),
        sack_t_ms=_ms([s[0] for s in sacks], t0),
        sack_lo=np.array([s[1] for s in sacks], dtype=float),
        sack_hi=np.array([s[2] for s in sacks], dtype=float),
        flight_t_ms=_ms([r["ts_ns"] for r in rows], t0),
        flight_bytes=np.array([r["in_flight_bytes"] for r in rows], dtype=float),
        rtt_t_ms=_ms([r["ts_ns"] for r in rtts], t0),
        rtt_ms=np.array([r["rtt_ns"] / 1e6 for r in rtts], dtype=float),
        end_ms=(rows[-1]["ts_ns"] - t0) / 1e6,
    )


def _sender(path: Path, source: str, family: str, port: int, t0: int) -> Sender | None:
    wanted = str(port)
    with open(path, newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r.get("client_port") == wanted and r.get("family") == family]
    if not rows:
        return None
    events = [r for r in rows if r.get("event") == "ack"] or rows
    retx = [r for r in rows if r.get("event") == "retransmit"]
    rtos = [r for r in rows if r.get("event") == "rto"]
    # the kernel has no rto event: its entry to the loss state (ca_state) is the RTO
    previous = ""
    for r in rows:
        state = r.get("ca_state") or ""
        if state == "loss" and previous != "loss":
            rtos.append(r)
        previous = state or previous
    return Sender(
        source=source,
        t_ms=_ms([int(r["ts_ns"]) for r in events], t0),
        cwnd_bytes=_column(events, "snd_cwnd_bytes"),
        ssthresh_bytes=_column(events, "ssthresh_bytes"),
        in_flight_bytes=_column(events, "in_flight_bytes"),
        srtt_ms=_column(events, "srtt_us") / 1e3,
        retx_t_ms=_ms([int(r["ts_ns"]) for r in retx], t0),
        retx_seq=_column(retx, "seq_off"),
        rto_t_ms=np.sort(_ms([int(r["ts_ns"]) for r in rtos], t0)),
    )


def _queues(path: Path, window: tuple[int, int], t0: int) -> list[Queue]:
    """Each link's rows in the GET's window (and the row before it: the backlog it started with)."""
    by_link: dict[str, list[dict]] = {}
    with open(path, newline="") as fh:
        for r in csv.DictReader(fh):
            by_link.setdefault(r["link"], []).append(r)
    out = []
    lo, hi = window
    for link, rows in by_link.items():
        ts = np.array([int(r["ts_ns"]) for r in rows], dtype=np.int64)
        order = np.argsort(ts, kind="stable")
        ts = ts[order]
        rows = [rows[i] for i in order]
        first = max(int(np.searchsorted(ts, lo, side="left")) - 1, 0)
        last = int(np.searchsorted(ts, hi, side="right"))
        inside = rows[first:last]
        if not inside or int(inside[-1]["ts_ns"]) < lo:
            continue
        drops = _column(inside, "drops")
        grew = np.diff(drops, prepend=drops[0]) if len(drops) else drops
        grew = np.nan_to_num(grew)
        mask = grew > 0
        t = _ms(ts[first:last], t0)
        out.append(Queue(link, t, _column(inside, "backlog_pkts"), _column(inside, "max_backlog_pkts"),
                         t[mask], grew[mask], int(grew.sum())))
    return out


def _column(rows: list[dict], name: str) -> np.ndarray:
    return np.array([float(r[name]) if r.get(name) not in (None, "") else np.nan for r in rows], dtype=float)


def _int(text) -> int | None:
    value = _float(text)
    return int(value) if value is not None else None


def _float(text) -> float | None:
    try:
        return float(text) if text not in (None, "") else None
    except ValueError:
        return None
