"""A server's own view of its connections, one row per event, on the capture's clock
(docs/data-format.md, "the server's own view"): a kernel server's from the BPF sampler
(probes/kernel-probe.csv, bpf/clprobe.bpf.c), the lean server's from leanweb's event log, in
the same columns so one plot reads either. Sequence numbers are made relative to the server's
first sequence number as the segment trace does (its SYN is 0, data starts at 1), so the
two line up with results/series/<server>-<family>-<client port>.csv.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path

from congestlab.analysis.probe_clock import ProbeClock, raw_probe_rows, write_series_csv
from congestlab.errors import RunDirError
from congestlab.servers.lean_events import family, peer_port, read_events

SENDER_COLUMNS = ["ts_ns", "event", "family", "client_port", "snd_cwnd_bytes", "snd_cwnd_pkts", "mss_bytes",
                  "ssthresh_bytes", "srtt_us", "rttvar_us", "rto_us", "in_flight_bytes", "in_flight_pkts",
                  "packets_out", "sacked_out", "lost_out", "retrans_out", "snd_una_off", "snd_nxt_off", "ack_off",
                  "snd_wnd_bytes", "pacing_rate_bps", "ca_state", "seq_off", "len_bytes"]
_TEXT = {"event", "family", "ca_state"}
# the kernel's snd_ssthresh before the first loss (TCP_INFINITE_SSTHRESH)
INFINITE_SSTHRESH = 0x7FFFFFFF
RAW_KERNEL_COLUMNS = ["mono_ns", "event", "server", "family", "saddr", "sport", "daddr", "dport", "snd_cwnd",
                      "ssthresh", "mss", "srtt_us", "mdev_us", "rto_us", "packets_out", "sacked_out", "lost_out",
                      "retrans_out", "snd_una", "snd_nxt", "bytes_acked", "snd_wnd", "ack_seq", "seq", "end_seq", "err",
                      "pacing_rate", "ca_state"]


def _seq_diff(a: int, b: int) -> int:
    """a − b in 32-bit sequence space, signed (RFC 9293's modular comparison)."""
    return ((a - b + 2**31) % 2**32) - 2**31


def kernel_rows(raw_csv: Path, clock: ProbeClock) -> dict[str, list[dict]]:
    """The sampler's raw rows per server, aligned and made relative. The first sequence number
    is snd_una − bytes_acked − 1: bytes_acked counts every byte of sequence space acknowledged
    after the SYN (RFC 4898 HCThruOctetsAcked), so it holds on every row."""
    by_server: dict[str, list[dict]] = defaultdict(list)
    for line, raw in raw_probe_rows(raw_csv, RAW_KERNEL_COLUMNS, "kernel probe"):
        if raw["event"] not in ("ack", "retransmit"):
            raise RunDirError(f"{raw_csv}: line {line}: event {raw['event']!r} is not ack or retransmit")
        try:
            row = _kernel_row(raw, clock)
        except ValueError:
            raise RunDirError(f"{raw_csv}: line {line}: not a number where one belongs") from None
        by_server[raw["server"]].append(row)
    for rows in by_server.values():
        rows.sort(key=lambda r: r["ts_ns"])  # two CPUs' events reach the ring buffer interleaved
    return dict(by_server)


def _kernel_row(raw: dict, clock: ProbeClock) -> dict:
    n = {k: int(v) for k, v in raw.items() if k not in ("event", "server", "family", "saddr", "daddr", "ca_state")}
    mss = n["mss"]
    bytes_acked = n["bytes_acked"]
    isn = (n["snd_una"] - bytes_acked - 1) % 2**32
    una_off = bytes_acked + 1
    row = {
        "ts_ns": clock.epoch_ns(n["mono_ns"]), "event": raw["event"], "family": raw["family"],
        "client_port": n["dport"], "snd_cwnd_bytes": n["snd_cwnd"] * mss, "snd_cwnd_pkts": n["snd_cwnd"],
        "mss_bytes": mss,
        "ssthresh_bytes": n["ssthresh"] * mss if n["ssthresh"] < INFINITE_SSTHRESH else None,
        "srtt_us": n["srtt_us"], "rttvar_us": n["mdev_us"], "rto_us": n["rto_us"],
        "in_flight_bytes": _seq_diff(n["snd_nxt"], n["snd_una"]),
        "in_flight_pkts": n["packets_out"] - n["sacked_out"] - n["lost_out"] + n["retrans_out"],
        "packets_out": n["packets_out"], "sacked_out": n["sacked_out"], "lost_out": n["lost_out"],
        "retrans_out": n["retrans_out"], "snd_una_off": una_off,
        "snd_nxt_off": una_off + _seq_diff(n["snd_nxt"], n["snd_una"]),
        "ack_off": None, "snd_wnd_bytes": n["snd_wnd"], "pacing_rate_bps": n["pacing_rate"] * 8,
        "ca_state": raw["ca_state"], "seq_off": None, "len_bytes": None,
    }
    if raw["event"] == "ack":
        row["ack_off"] = _seq_diff(n["ack_seq"], isn)
    else:
        row["seq_off"] = _seq_diff(n["seq"], isn)
        row["len_bytes"] = _seq_diff(n["end_seq"], n["seq"])
    return row


class _LeanConnection:
    def __init__(self, family: str, client_port: int):
        self.family = family
        self.client_port = client_port
        self.isn: int | None = None
        self.high_off = 0  # highest sequence offset sent (end of the furthest segment)
        self.una_off = 0
        self.ssthresh: int | None = None
        self.srtt_us: int | None = None
        self.rttvar_us: int | None = None
        self.rto_us: int | None = None


def lean_rows(log_path: Path) -> Iterator[dict]:
    """leanweb's log (docs/leanweb.md, "Event log") as sender rows: `ack` lines, `tx` lines
    that carry data sent before (`retransmit`) and `timeout` lines (`rto`). The state the log
    gives only on its own lines (ssthresh, the RTT estimator) is carried forward."""
    conns: dict[int, _LeanConnection] = {}
    try:
        for ev in read_events(log_path):
            kind = ev["event"]
            if kind == "open":
                conns[ev["conn"]] = _LeanConnection(family(ev.get("family")), peer_port(ev))
                continue
            conn = conns.get(ev.get("conn"))
            if conn is None:
                continue
            row = _lean_event(conn, kind, ev)
            if row is not None:
                yield row
    except OSError as err:
        raise RunDirError(f"{log_path}: unreadable ({err.strerror})") from None


def _lean_event(c: _LeanConnection, kind: str, ev: dict) -> dict | None:
    ts_ns = int(ev.get("unix_us", 0)) * 1000
    if kind in ("tx", "tx_dropped"):
        seq, length = int(ev["seq"]), int(ev.get("len", 0))
        if c.isn is None:
            c.isn = seq if ev.get("syn") else seq - 1
        start = _seq_diff(seq, c.isn)
        end = start + length + bool(ev.get("syn")) + bool(ev.get("fin"))
        c.high_off = max(c.high_off, end)
        for key in ("srtt_us", "rttvar_us", "rto_us"):
            if ev.get(key) is not None:
                setattr(c, key, int(ev[key]))
        if kind == "tx" and ev.get("retransmission"):
            return _lean_row(c, ts_ns, "retransmit", seq_off=start, len_bytes=length)
        return None
    if kind == "rtt_sample":
        c.srtt_us, c.rttvar_us, c.rto_us = int(ev["srtt_us"]), int(ev["rttvar_us"]), int(ev["rto_us"])
        return None
    if kind in ("cc_phase", "recovery"):
        c.ssthresh = ev.get("ssthresh_bytes")
        return None
    if kind == "timeout":
        c.rto_us = int(ev["rto_us"])
        return _lean_row(c, ts_ns, "rto")
    if kind == "ack" and c.isn is not None:
        c.una_off = _seq_diff(int(ev["ack"]), c.isn)
        return _lean_row(c, ts_ns, "ack", ack_off=c.una_off, snd_cwnd_bytes=ev.get("cwnd_bytes"))
    return None


def _lean_row(c: _LeanConnection, ts_ns: int, event: str, **values) -> dict:
    row = dict.fromkeys(SENDER_COLUMNS)
    row |= {"ts_ns": ts_ns, "event": event, "family": c.family, "client_port": c.client_port,
            "ssthresh_bytes": c.ssthresh, "srtt_us": c.srtt_us, "rttvar_us": c.rttvar_us, "rto_us": c.rto_us,
            "in_flight_bytes": max(c.high_off - c.una_off, 0), "snd_una_off": c.una_off, "snd_nxt_off": c.high_off}
    return row | values


def write_sender_series(path: Path, rows: Iterable[dict]) -> int:
    """SENDER_COLUMNS as CSV; returns the rows written."""
    return write_series_csv(path, SENDER_COLUMNS, rows)


def read_sender_series(path: Path) -> list[dict]:
    """A <server>-tcp_probe.csv or <server>-lean_log.csv as typed rows (None for empty cells)."""
    rows = []
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            rows.append({k: (v if k in _TEXT else int(v)) if v != "" else None for k, v in row.items()})
    return rows
