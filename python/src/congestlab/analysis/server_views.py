"""The servers' own view beside the capture: the samplers' series on the capture's clock, each
lean server's log as a series, and the check that a lean server's log and its capture count
the same retransmissions (analysis/lean_log.py)."""

from __future__ import annotations

from pathlib import Path

from congestlab.analysis.lean_log import LogIndex, compare_with_pcap, logged_connections
from congestlab.analysis.probe_clock import probe_clock
from congestlab.analysis.queue_series import queue_rows, write_queue_series
from congestlab.analysis.rto_replay import lean_servers
from congestlab.analysis.sender_series import kernel_rows, lean_rows, write_sender_series
from congestlab.capture.probes import CLOCK_FILE, KERNEL_FILE, QUEUE_FILE, RAW_DIR
from congestlab.errors import RunDirError
from congestlab.fidelity import Check
from congestlab.stored import StoredRepetition, StoredRun

SERIES_DIR = "series"
QUEUE_SERIES = "bottleneck-queue.csv"


def lean_logs(run: StoredRun) -> dict[tuple[str, str], Path]:
    """(server, instance) -> leanweb's log, for every lean server of the run."""
    return {(server, instance): run.path / record["log_dir"] / "leanweb.jsonl"
            for server, instances in lean_servers(run.manifest).items() for instance, record in instances.items()}


def capture_span_s(rep: StoredRepetition) -> tuple[float, float] | None:
    """When the repetition's captures ran (epoch s)."""
    span = rep.info.get("capture_epoch_s")
    return tuple(span) if span else None


def write_probe_series(series_dir: Path, rep: StoredRepetition, lean: dict[tuple[str, str], Path],
                       lean_rows_by_log: dict[Path, list[dict]]) -> list[str]:
    """The servers' own view and the queues, on the capture's clock (analysis/sender_series.py,
    queue_series.py): from the sampler's recording in probes/, and with kernel_probe on, from
    each lean server's log inside the capture's span. Returns the problems (a bad recording
    or a missing log costs its series, not the analysis)."""
    problems = []
    raw = rep.dir / RAW_DIR
    if (raw / CLOCK_FILE).exists():
        try:
            clock = probe_clock(raw / CLOCK_FILE)
            if (raw / KERNEL_FILE).exists():
                for server, rows in kernel_rows(raw / KERNEL_FILE, clock).items():
                    write_sender_series(series_dir / f"{server}-tcp_probe.csv", rows)
            if (raw / QUEUE_FILE).exists():
                write_queue_series(series_dir / QUEUE_SERIES, queue_rows(raw / QUEUE_FILE, clock))
        except RunDirError as err:
            problems.append(f"probe series: {err}")
    kernel_probe = rep.point.run.study.capture.kernel_probe
    span = capture_span_s(rep)
    for server, instance in (rep.info.get("servers") or {}).items():
        log = lean.get((server, instance))
        if not kernel_probe or log is None or span is None:
            continue
        if not log.exists():  # said, not skipped: a plot without the server's view must say why
            problems.append(f"lean series: {log}: missing, so no {server}-lean_log.csv")
            continue
        try:
            if log not in lean_rows_by_log:
                lean_rows_by_log[log] = list(lean_rows(log))
        except RunDirError as err:
            problems.append(f"lean series: {err}")
            continue
        lo, hi = span[0] * 1e9, span[1] * 1e9
        write_sender_series(series_dir / f"{server}-lean_log.csv",
                            (r for r in lean_rows_by_log[log] if lo <= r["ts_ns"] <= hi))
    return problems


def lean_log_checks(by_server: dict[str, list[tuple]]) -> list[Check]:
    """Per connection on a lean server's port: the capture's retransmissions == leanweb's log
    (the log's counted within the capture's span; analysis/lean_log.py)."""
    checks = []
    for server, entries in by_server.items():
        agreeing, continued, problems, total = 0, 0, [], 0
        logged: dict[Path, LogIndex] = {}  # one index per log: every repetition of a run shares the server's
        for where, conns, log, span in entries:
            total += len(conns)
            if not log.exists():
                problems.append(f"{where}: {log.name} missing")
                continue
            if log not in logged:
                logged[log] = LogIndex(logged_connections(log))
            compared = compare_with_pcap(conns, logged[log], where, span)
            agreeing += compared.agreeing
            continued += compared.continued
            problems += compared.disagreements
        compared_total = total - continued
        note = (f"{continued} connection(s) already open when their capture started (a timed-out GET the server "
                "kept retransmitting, a ready check's closing) not compared" if continued else "")
        message = "; ".join(m for m in (f"{server}: {compared_total - agreeing} of {compared_total} connections "
                                        "disagree: " + "; ".join(problems[:3]) if problems else "", note) if m)
        checks.append(Check(f"retransmissions_pcap_vs_log_{server}", agreeing == compared_total,
                            f"{agreeing}/{compared_total}",
                            "every connection at the lean server's port: pcap count == leanweb log count", message))
    return checks
