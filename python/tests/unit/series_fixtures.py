"""Synthetic results/series/ files in the formats docs/data-format.md gives: the segment trace
(traceanalyze --trace), `<server>-tcp_probe.csv` and `bottleneck-queue.csv` (the columns of
analysis/sender_series.py SENDER_COLUMNS and queue_series.py QUEUE_COLUMNS), for GETs whose
timing a test chooses (how long, whether a segment is lost and retransmitted after an RTO)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from congestlab.analysis.trace_files import TRACE_HEADER
from report_fixtures import RunBuilder

MSS = 1448
RTT_NS = 20_000_000
PROBE_COLUMNS = ["ts_ns", "event", "family", "client_port", "snd_cwnd_bytes", "snd_cwnd_pkts", "mss_bytes",
                 "ssthresh_bytes", "srtt_us", "rttvar_us", "rto_us", "in_flight_bytes", "in_flight_pkts",
                 "packets_out", "sacked_out", "lost_out", "retrans_out", "snd_una_off", "snd_nxt_off", "ack_off",
                 "snd_wnd_bytes", "pacing_rate_bps", "ca_state", "seq_off", "len_bytes"]
QUEUE_COLUMNS = ["ts_ns", "link", "backlog_bytes", "backlog_pkts", "max_backlog_bytes", "max_backlog_pkts", "drops",
                 "dequeues"]


def trace_lines(t0_ns: int, delay_ms: float, segments: int = 20, lost: int | None = None) -> list[list]:
    """A GET: handshake, request, `segments` data segments spread over `delay_ms`, an ACK for
    each; with `lost`, that segment is missing, SACKed around and sent again at the end."""
    rows = [[1, t0_ns, "c", "S", 0, 1, 0, 0, "", 64240, "", 0, ""],
            [1, t0_ns + RTT_NS // 2, "s", "SA", 0, 1, 0, 0, 1, 65160, "", 1, ""],
            [1, t0_ns + RTT_NS, "c", "A", 1, 1, 0, 0, 1, 65536, "", 0, ""],
            [1, t0_ns + RTT_NS, "c", "PA", 1, 90, 89, 0, 1, 65536, "", 0, ""]]
    step = int((delay_ms * 1e6 - 2 * RTT_NS) / (segments + 1))
    acked = 1
    t = t0_ns + RTT_NS
    for i in range(segments):
        t += step
        lo, hi = 1 + i * MSS, 1 + (i + 1) * MSS
        rows.append([1, t, "s", "A", lo, hi, MSS, 0, 90, 65160, "", hi - acked, ""])
        if lost is not None and i >= lost:
            sack = f"{1 + (lost + 1) * MSS}-{hi}" if i > lost else ""
            rows.append([1, t + RTT_NS // 2, "c", "A", 90, 90, 0, 0, acked, 131072, sack, hi - acked, ""])
        else:
            acked = hi
            rows.append([1, t + RTT_NS // 2, "c", "A", 90, 90, 0, 0, acked, 131072, "", 0, RTT_NS])
    if lost is not None:
        t += step
        lo, hi = 1 + lost * MSS, 1 + (lost + 1) * MSS
        rows.append([1, t, "s", "A", lo, hi, MSS, 1, 90, 65160, "", segments * MSS + 1 - acked, ""])
        acked = 1 + segments * MSS
        rows.append([1, t + RTT_NS // 2, "c", "A", 90, 90, 0, 0, acked, 131072, "", 0, ""])
    return rows


def write_trace(path: Path, rows: list[list]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(TRACE_HEADER)
        w.writerows(rows)


def write_probe(path: Path, events: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, PROBE_COLUMNS, restval="", lineterminator="\n")
        w.writeheader()
        w.writerows(events)


def write_queue(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, QUEUE_COLUMNS, restval="", lineterminator="\n")
        w.writeheader()
        w.writerows(rows)


def probe_events(t0_ns: int, family: str, port: int, trace: list[list]) -> list[dict]:
    """One `ack` event per client ACK of the trace, cwnd growing by one MSS each, and a
    `retransmit` event (in the loss state: an RTO) for every retransmitted segment."""
    out, cwnd = [], 10 * MSS
    for row in trace:
        if row[2] == "c" and row[8] != "":
            out.append({"ts_ns": row[1], "event": "ack", "family": family, "client_port": port,
                        "snd_cwnd_bytes": cwnd, "snd_cwnd_pkts": cwnd // MSS, "mss_bytes": MSS, "srtt_us": 20000,
                        "in_flight_bytes": row[11], "ack_off": row[8], "ca_state": "open"})
            cwnd += MSS
        elif row[2] == "s" and row[7] == 1:
            out.append({"ts_ns": row[1] - 1000, "event": "ack", "family": family, "client_port": port,
                        "snd_cwnd_bytes": MSS, "ssthresh_bytes": cwnd // 2, "srtt_us": 20000, "ca_state": "loss"})
            out.append({"ts_ns": row[1], "event": "retransmit", "family": family, "client_port": port,
                        "seq_off": row[4], "len_bytes": row[6], "ca_state": "loss"})
    return out


def panels_run(run_dir: Path, delays: dict[tuple[str, str], list[float | None]], lost_in: set = frozenset(),
               probe: bool = True, queue: bool = True, drops: dict[int, int] | None = None) -> Path:
    """An ipv6-shaped run: delays[(server, family)] = one delay (ms) per repetition at level C1B,
    None for a GET that timed out; each GET with its series; rep.json with drops and CPU."""
    b = RunBuilder("ipv6", ["server", "level"], {}, experiment="main")
    series: list[tuple[str, int, str, str, int, float, bool]] = []
    for (server, family), values in delays.items():
        for rep, delay in enumerate(values, start=1):
            port = 40000 + rep * 10 + (family == "v6")
            start = 1_000.0 + rep * 10 + (family == "v6")
            record = dict(server=server, client="client", family=family, file_kib=320, client_port=port,
                          start_ts=start, outcome="complete" if delay is not None else "timed_out",
                          ok=delay is not None, timeout_s=30, retransmissions=int((rep, family) in lost_in))
            if delay is not None:
                record["delay_ms"] = delay
            b.add("request", {"server": server, "level": "C1B"}, rep, **record)
            series.append((server, rep, family, b.point_id({"server": server, "level": "C1B"}), port,
                           delay if delay is not None else 3_000.0, (rep, family) in lost_in))
    b.write(run_dir)
    for server, rep, family, point, port, delay, lost in series:
        d = run_dir / "results" / "series" / point / f"r{rep}"
        t0 = int((1_000.0 + rep * 10 + (family == "v6")) * 1e9)
        trace = trace_lines(t0, delay, lost=5 if lost else None)
        write_trace(d / f"{server}-{family}-{port}.csv", trace)
        if probe:
            old = []
            if (d / f"{server}-tcp_probe.csv").exists():
                with open(d / f"{server}-tcp_probe.csv", newline="") as fh:
                    old = list(csv.DictReader(fh))
            write_probe(d / f"{server}-tcp_probe.csv", old + probe_events(t0, family, port, trace))
        if queue and not (d / "bottleneck-queue.csv").exists():
            # one file per repetition, every shaped egress: 1 kHz rows from the repetition's first
            # GET past its last; r1/eth0 drops one packet every 50 ms
            base = int((1_000.0 + rep * 10) * 1e9)
            rows = [{"ts_ns": base + i * 1_000_000, "link": "r1/eth0", "backlog_pkts": i % 30,
                     "max_backlog_pkts": i % 30 + 1, "drops": i // 50, "dequeues": 8} for i in range(4_500)]
            rows += [{"ts_ns": base + i * 5_000_000, "link": "s0/p-r1", "backlog_pkts": 0, "max_backlog_pkts": 1,
                      "drops": 0, "dequeues": 1} for i in range(3)]
            write_queue(d / "bottleneck-queue.csv", sorted(rows, key=lambda r: r["ts_ns"]))
        rep_json = run_dir / "points" / point / f"r{rep}" / "rep.json"
        rep_json.write_text(json.dumps({"point": point, "repetition": rep, "cpu_busy_pct": 40.0 + rep,
                                        "bottleneck_drops": {"r1/eth0": (drops or {}).get(rep, rep * 10),
                                                             "s0/p-r1": 1}}))
    return run_dir
