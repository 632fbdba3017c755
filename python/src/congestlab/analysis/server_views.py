"""The servers' own view beside the capture: the samplers' series on the capture's clock, each
lean server's log as a series, and the check that a lean server's log and its capture count
the same retransmissions (analysis/lean_log.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, TypeVar

from congestlab.analysis.lean_log import LogIndex, compare_with_pcap, logged_connections
from congestlab.analysis.probe_clock import probe_clock
from congestlab.analysis.queue_series import queue_rows, write_queue_series
from congestlab.analysis.rto_replay import lean_servers
from congestlab.analysis.sender_series import kernel_rows, lean_rows, write_sender_series
from congestlab.capture.probes import CLOCK_FILE, KERNEL_FILE, QUEUE_FILE, RAW_DIR
from congestlab.errors import LeanLogError, RunDirError
from congestlab.fidelity import Check
from congestlab.stored import StoredRepetition, StoredRun

SERIES_DIR = "series"
T = TypeVar("T")
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
    or a missing log costs its series, not the analysis), each naming its file."""
    problems = []
    raw = rep.dir / RAW_DIR
    if (raw / CLOCK_FILE).exists():
        clock = _read(problems, "probe series", raw / CLOCK_FILE, lambda: probe_clock(raw / CLOCK_FILE))
        if clock is not None and (raw / KERNEL_FILE).exists():
            def kernel() -> None:
                for server, rows in kernel_rows(raw / KERNEL_FILE, clock).items():
                    write_sender_series(series_dir / f"{server}-tcp_probe.csv", rows)
            _read(problems, "probe series", raw / KERNEL_FILE, kernel)
        if clock is not None and (raw / QUEUE_FILE).exists():
            _read(problems, "probe series", raw / QUEUE_FILE,
                  lambda: write_queue_series(series_dir / QUEUE_SERIES, queue_rows(raw / QUEUE_FILE, clock)))
    kernel_probe = rep.point.run.study.capture.kernel_probe
    span = capture_span_s(rep)
    for server, instance in (rep.info.get("servers") or {}).items():
        log = lean.get((server, instance))
        if not kernel_probe or log is None or span is None:
            continue
        if not log.exists():  # said, not skipped: a plot without the server's view must say why
            problems.append(f"lean series: {log}: missing, so no {server}-lean_log.csv")
            continue
        if log not in lean_rows_by_log:
            rows = _read(problems, "lean series", log, lambda log=log: list(lean_rows(log)))
            if rows is None:
                continue
            lean_rows_by_log[log] = rows
        lo, hi = span[0] * 1e9, span[1] * 1e9
        write_sender_series(series_dir / f"{server}-lean_log.csv",
                            (r for r in lean_rows_by_log[log] if lo <= r["ts_ns"] <= hi))
    return problems


def _read(problems: list[str], what: str, path: Path, step: Callable[[], T]) -> T | None:
    """`step()`, or None with the problem named when `path` holds what it cannot read."""
    try:
        return step()
    except RunDirError as err:
        problems.append(f"{what}: {err}")
    except (KeyError, TypeError, ValueError, IndexError) as err:
        problems.append(f"{what}: {path}: a wrong or missing value ({err!r})")
    return None


def lean_log_checks(by_server: dict[str, list[tuple]]) -> tuple[list[Check], list[str]]:
    """Per connection on a lean server's port: the capture's retransmissions == leanweb's log
    (the log's counted within the capture's span; analysis/lean_log.py). Returns the checks
    and the problems of the logs themselves: a log missing, with a line that is not an event,
    or without a connection its capture holds (a log cut short)."""
    checks, log_problems = [], []
    for server, entries in by_server.items():
        agreeing, continued, problems, total = 0, 0, [], 0
        logged: dict[Path, LogIndex | None] = {}  # one index per log: every repetition of a run shares the server's
        for where, conns, log, span in entries:
            total += len(conns)
            if not log.exists():
                problems.append(f"{where}: {log.name} missing")
                log_problems.append(f"lean log check: {log}: missing, so {where}'s {len(conns)} connections "
                                    "are not compared")
                continue
            if log not in logged:
                try:
                    logged[log] = LogIndex(logged_connections(log))
                except LeanLogError as err:
                    logged[log] = None
                    log_problems.append(f"lean log check: {err}")
            if logged[log] is None:
                problems.append(f"{where}: {log.name} unreadable")
                continue
            compared = compare_with_pcap(conns, logged[log], where, span)
            agreeing += compared.agreeing
            continued += compared.continued
            problems += compared.disagreements
            log_problems += [f"lean log check: {log}: {c}" for c in compared.not_in_log]
        compared_total = total - continued
        note = (f"{continued} connection(s) already open when their capture started (a timed-out GET the server "
                "kept retransmitting, a ready check's closing) not compared" if continued else "")
        message = "; ".join(m for m in (f"{server}: {compared_total - agreeing} of {compared_total} connections "
                                        "disagree: " + "; ".join(problems[:3]) if problems else "", note) if m)
        checks.append(Check(f"retransmissions_pcap_vs_log_{server}", agreeing == compared_total,
                            f"{agreeing}/{compared_total}",
                            "every connection at the lean server's port: pcap count == leanweb log count", message))
    return checks, log_problems
