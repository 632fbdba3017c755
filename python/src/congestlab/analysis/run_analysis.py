"""From a run directory's point repetitions (records.jsonl, pcap/) to its results in long
form (results/<kind>.csv, congestlab/results.py): the measured GETs measured in the
capture, every server port's aggregate, and the workloads' own records passed through
with the point's axis columns. Pure apart from reading and writing files; `congestlab
analyze RUN_DIR` runs it again on a stored run."""

from __future__ import annotations

import ipaddress
import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from congestlab.analysis.drift import drift_checks
from congestlab.analysis.lean_log import LogIndex, compare_with_pcap, logged_connections
from congestlab.analysis.metrics import ConnectionMetrics
from congestlab.analysis.probe_clock import probe_clock
from congestlab.analysis.queue_series import queue_rows, write_queue_series
from congestlab.analysis.sender_series import kernel_rows, lean_rows, write_sender_series
from congestlab.analysis.request_outcome import (COMPLETE, INVALID, OUTCOMES, client_outcome, cross_check,
                                                 path_bottleneck, point_spec)
from congestlab.analysis.rto_replay import lean_servers, replay_run
from congestlab.analysis.trace import SCRATCH_PREFIX, PcapConnection, PortAggregate, measure_pcap
from congestlab.analysis.trace_files import write_trace
from congestlab.capture.probes import CLOCK_FILE, KERNEL_FILE, QUEUE_FILE, RAW_DIR
from congestlab.errors import LeanLogError, RunDirError, TraceError
from congestlab.fidelity import Check
from congestlab.results import KIND_COLUMNS, result_path, write_results
from congestlab.rundir import RAW_KIND, completed_repetitions


@dataclass
class AnalysisResult:
    summary: dict
    checks: list[Check] = field(default_factory=list)
    rows: dict[str, list[dict]] = field(default_factory=dict)


def analyze_run(run_dir: Path, manifest: dict) -> AnalysisResult:
    start = time.monotonic()
    run_dir = Path(run_dir)
    points = {p["id"]: p for p in manifest["points"]}
    axes = manifest["axes"]
    rows: dict[str, list[dict]] = {kind: [] for kind in KIND_COLUMNS}
    problems: list[str] = []
    pcap_read: dict[str, dict] = {}
    raw_requests = 0
    outcomes = dict.fromkeys(OUTCOMES, 0)
    unusable: list[str] = []
    specs: dict[str, dict] = {}
    lean = _lean_logs(run_dir, manifest)
    lean_checks: dict[str, list[tuple[str, list[PcapConnection], Path]]] = {}
    lean_rows_by_log: dict[Path, list[dict]] = {}  # a lean log's sender rows, read once for all repetitions
    planned = {(r["point"], r["repetition"]): r for r in manifest.get("run_order", [])}
    scratch_dir = _scratch_dir(run_dir)
    for point_id, rep, rep_dir in completed_repetitions(run_dir):
        if point_id not in points:
            raise RunDirError(f"{rep_dir}: point {point_id!r} is not in the manifest")
        point = points[point_id]
        where_run = planned.get((point_id, rep), {})
        common = {"point_id": point_id, "experiment": point["experiment"], "repetition": rep,
                  "round": where_run.get("round", ""), "block": where_run.get("block", ""),
                  "run_index": where_run.get("run", "")} | {axis: point["axes"].get(axis, "") for axis in axes}
        info = json.loads((rep_dir / "rep.json").read_text())
        records = [json.loads(line) for line in (rep_dir / "records.jsonl").read_text().splitlines() if line.strip()]
        pcaps = sorted((rep_dir / "pcap").glob("*.pcap"))
        conns_by_server = {}
        traces_by_server: dict[str, dict[int, list[bytes]]] = {}
        series_names: dict[tuple[str, int], str] = {}  # (server, conn) -> file name, one per connection
        # derived data goes under results/, never into the repetition: a resumed run keeps its
        # finished repetitions byte for byte (python/tests/netns/test_resume_netns.py)
        series_dir = run_dir / "results" / SERIES_DIR / point_id / f"r{rep}"
        shutil.rmtree(series_dir, ignore_errors=True)  # written again below
        capture_errors: dict[str, str] = {}  # server -> why its capture cannot be used
        for pcap in pcaps:
            server = pcap.stem
            port = _server_port(manifest, server, info)
            where_file = pcap.relative_to(run_dir)
            try:
                measured = measure_pcap(pcap, server_port=port, scratch_dir=scratch_dir,
                                        trace_client_ports=_measured_client_ports(records, server))
            except TraceError as err:
                capture_errors[server] = f"{where_file}: unreadable ({err})"
            else:
                if measured.read_stats.truncated:
                    capture_errors[server] = (f"{where_file}: {measured.stop_reason or 'truncated'} "
                                              f"after {measured.read_stats.frames} frames")
            if server in capture_errors:
                unusable.append(capture_errors[server])
                problems.append(capture_errors[server])
                continue
            stats = measured.read_stats
            conns_by_server[server] = measured.connections
            traces_by_server[server] = measured.trace_lines
            pcap_read[f"{point_id}/r{rep}/{server}"] = {"frames": stats.frames, "tcp_segments": stats.tcp_segments,
                                                       "skipped": stats.skipped}
            rows["port"].append(common | {"server": server} | _port_row(measured.port))
            log = lean.get((server, info.get("servers", {}).get(server)))
            if log is not None:
                lean_checks.setdefault(server, []).append((f"{point_id} #{rep}", measured.connections, log,
                                                           _capture_span_s(info)))
        problems += _write_probe_series(series_dir, rep_dir, info, manifest, lean, lean_rows_by_log)
        for record in records:
            kind, row = record["kind"], record["row"]
            if kind != RAW_KIND:
                rows[kind].append(common | row)
                continue
            raw_requests += 1
            where = f"{point_id} #{rep} {row['server']} {row['family']}"
            if point_id not in specs:
                specs[point_id] = point_spec(manifest["spec"], point.get("settings") or {})
            out = common | _request_base(row, specs[point_id])
            outcome, error, conn = _outcome(row, out["timeout_s"], capture_errors.get(row["server"]),
                                            conns_by_server.get(row["server"], []), specs[point_id])
            traced = conn or _connection_of(conns_by_server.get(row["server"], []), row)
            if traced is not None:  # also a GET that timed out or failed: why is the question
                _write_series(series_dir, row["server"], traced, traces_by_server.get(row["server"], {}),
                              series_names)
            if outcome == COMPLETE:
                out |= _metrics(conn.metrics) | {"client_port": conn.metrics.client_port}
            else:
                problems.append(f"{where}: {outcome}: {error}")
            out |= {"outcome": outcome, "ok": outcome == COMPLETE, "error": error}
            outcomes[outcome] += 1
            rows["request"].append(out)
    replay_skipped = bool(lean) and not replay_wanted(manifest)
    replay = _rto_replay(run_dir, manifest, rows, problems) if lean and not replay_skipped else None
    for kind, kind_rows in rows.items():
        if kind_rows or kind == "request" and raw_requests:
            write_results(run_dir, kind, axes, kind_rows)
        else:  # results/ is this analysis's: a table an earlier one wrote (e.g. a replay since skipped) goes
            result_path(run_dir, kind).unlink(missing_ok=True)
    measured = outcomes[COMPLETE]
    checks = []
    if raw_requests:
        checks.append(Check("measured_requests", measured == raw_requests, measured, f"{raw_requests}",
                            "; ".join(problems[:3])))
    checks += _lean_log_checks(lean_checks)
    drift, drift_entries = drift_checks(manifest, rows["request"])
    checks += drift
    summary = {"rows": {k: len(v) for k, v in rows.items() if v}, "problems": problems, "pcap_read": pcap_read,
               "request_outcomes": outcomes, "captures_unusable": unusable,
               "drift": drift_entries, "analysis_s": round(time.monotonic() - start, 3)}
    if replay is not None:
        summary["rto_replay"] = {"samples": replay.samples_replayed, "seconds": replay.seconds, "cpu_s": replay.cpu_s}
    elif replay_skipped:
        summary["rto_replay_skipped"] = ("no rto_* metric in the study's report; `congestlab rto-replay RUN` "
                                         "writes results/rto_*.csv")
    return AnalysisResult(summary, checks, rows)


SERIES_DIR = "series"
QUEUE_SERIES = "bottleneck-queue.csv"


def _write_probe_series(series_dir: Path, rep_dir: Path, info: dict, manifest: dict,
                        lean: dict[tuple[str, str], Path], lean_rows_by_log: dict[Path, list[dict]]) -> list[str]:
    """The servers' own view and the queues, on the capture's clock (analysis/sender_series.py,
    queue_series.py): from the sampler's recording in probes/, and with kernel_probe on, from
    each lean server's log inside the capture's span. Returns the problems (a bad recording
    or a missing log costs its series, not the analysis)."""
    problems = []
    raw = rep_dir / RAW_DIR
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
    kernel_probe = manifest["spec"].get("capture", {}).get("kernel_probe", False)
    span = _capture_span_s(info)
    for server, instance in (info.get("servers") or {}).items():
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


def _measured_client_ports(records: list[dict], server: str) -> set[int]:
    """The client ports of this server's measured GETs: their connections are traced (on a port
    shared with load connections, only theirs)."""
    return {r["row"]["client_port"] for r in records
            if r["kind"] == RAW_KIND and r["row"].get("server") == server and r["row"].get("client_port")}


def _write_series(series_dir: Path, server: str, conn: PcapConnection, traces: dict[int, list[bytes]],
                  names: dict[tuple[str, int], str]) -> None:
    """The measured connection's segment trace as <series_dir>/<server>-<family>-<client port>.csv
    (-<conn id> appended when the port's name is taken: a port reused in one repetition);
    once per connection, however many GET rows name it."""
    lines = traces.get(conn.conn)
    if not lines or (server, conn.conn) in names:
        return
    name = f"{server}-{conn.family}-{conn.client_port}"
    if name in names.values():
        name += f"-{conn.conn}"
    names[(server, conn.conn)] = name
    write_trace(series_dir / f"{name}.csv", lines)


def _server_port(manifest: dict, server: str, info: dict) -> int:
    for record in manifest.get("servers", {}).get(server, []):
        if record.get("instance") == info.get("servers", {}).get(server):
            return int(record["port"])
    for spec in manifest["spec"].get("servers", []):
        if spec["name"] == server:
            return int(spec.get("port", 80))
    raise RunDirError(f"server {server!r} has a capture but is not in the manifest")


def _request_base(row: dict, spec: dict) -> dict:
    return {"server": row["server"], "client": row["client"], "family": row["family"], "file_kib": row["file_kib"],
            "client_port": row.get("client_port"), "timeout_s": _timeout_s(spec, row.get("workload")),
            "start_ts": row.get("start_ts"), "curl_time_ms": round(row.get("time_total_s", 0) * 1e3, 3),
            "client_kind": row.get("client_kind", "curl")} | {
            key: row.get(key) for key in ("family_pair", "family_position", "family_order", "previous_closed",
                                          "previous_wait_ms")}


def _outcome(row: dict, timeout_s: float | None, capture_error: str | None, conns: list[PcapConnection],
             spec: dict) -> tuple[str, str, PcapConnection | None]:
    """(outcome, why not complete, the measured connection) of one GET
    (analysis/request_outcome.py): the client's word first, then the capture's."""
    outcome, error = client_outcome(row, timeout_s)
    if outcome is not None:
        return outcome, error, None
    if capture_error:
        return INVALID, capture_error, None
    conn, error = _measure(conns, row)
    if conn is None:
        return INVALID, error, None
    error = cross_check(row, conn.server_data_unacked_bytes, conn.metrics, _bottleneck(spec, row))
    return (INVALID if error else COMPLETE), error, conn


def _timeout_s(spec: dict, workload: str | None) -> float | None:
    """The client's time limit: the `get` workload's timeout_s at this point."""
    for w in spec.get("workloads", []):
        if w.get("name") == workload and w.get("timeout_s") is not None:
            return float(w["timeout_s"])
    return None


def _bottleneck(spec: dict, row: dict):
    node = next((s.get("node") for s in spec.get("servers", []) if s.get("name") == row["server"]), None)
    return path_bottleneck(spec, row["client"], node) if node else None


def _connection_of(conns: list[PcapConnection], row: dict) -> PcapConnection | None:
    """The GET's connection in the capture, measured or not (as _measure finds it)."""
    return next((c for c in conns if row.get("client_port") and c.key == (row["family"], row["client_port"])
                 and c.first_ts <= row["end_ts"] + 1 and c.last_ts >= row["start_ts"] - 1), None)


def _measure(conns: list[PcapConnection], row: dict) -> tuple[PcapConnection | None, str]:
    """The request's connection with its metrics, or None and why not."""
    if not row.get("client_port"):  # a browser does not say which port it used
        return pick_browser_connection(conns, row)
    candidates = [c for c in conns if c.key == (row["family"], row["client_port"])
                  and c.first_ts <= row["end_ts"] + 1 and c.last_ts >= row["start_ts"] - 1]
    if not candidates:
        return None, f"connection from port {row['client_port']} not in the capture"
    if candidates[0].metrics is None:
        return None, str(candidates[0].error)
    return candidates[0], ""


def pick_browser_connection(conns: list[PcapConnection], row: dict) -> tuple[PcapConnection | None, str]:
    """The connection that carried the file of a browser's request, and why not if none.

    A browser may open more connections than the one that fetches the file: speculative
    preconnects (no request on them), /favicon.ico (a small answer). The one chosen comes
    from the request's client address and family, overlaps the request's time, has a request
    and the client's ACK after it (so it has metrics), and carried at least the file's bytes
    from the server; exactly one may qualify. The others are named in the reason when none does.
    """
    client = ipaddress.ip_address(row["client_addr"])
    near = [c for c in conns if c.family == row["family"] and ipaddress.ip_address(c.client) == client
            and c.first_ts <= row["end_ts"] + 1 and c.last_ts >= row["start_ts"] - 1]
    file_bytes = int(row["file_kib"]) * 1024
    carried = [c for c in near if c.metrics is not None and c.metrics.payload_bytes >= file_bytes]
    if len(carried) == 1:
        return carried[0], ""
    seen = ", ".join(f"port {c.client_port}: " + (f"{c.metrics.payload_bytes} B" if c.metrics else str(c.error))
                     for c in near) or "none"
    if not carried:
        return None, f"no connection from {client} carried the {file_bytes} B file (seen: {seen})"
    return None, f"{len(carried)} connections from {client} carried {file_bytes} B or more; which one is ambiguous ({seen})"


def _port_row(p: PortAggregate) -> dict:
    """The port's row as analysis/port.py's port_aggregate gives it."""
    return {"connections": p.connections, "interval_s": p.interval_s,
            "captured_throughput_mbps": p.throughput_mbps if p.interval_s > 0 else None,
            "nrt_throughput_mbps": p.nrt_throughput_mbps if p.interval_s > 0 else None,
            "retransmissions": p.retransmissions}


def _metrics(m: ConnectionMetrics) -> dict:
    return {
        "delay_ms": round(m.delay_ms, 3),
        "syn_to_last_ack_ms": round(m.syn_to_last_ack_ms, 3) if m.syn_to_last_ack_ms is not None else None,
        "nrt_throughput_mbps": round(m.nrt_throughput_mbps, 3),
        "captured_throughput_mbps": round(m.captured_throughput_mbps, 3),
        "goodput_mbps": round(m.goodput_mbps, 3),
        "retransmissions": m.retransmissions,
        "rtt_mean_ms": round(m.rtt_mean_ms, 3) if m.rtt_mean_ms is not None else None,
        "rtt_samples": len(m.rtt_samples_ms),
        "bytes_nrt": m.bytes_nrt,
        "bytes_captured": m.bytes_captured,
        "payload_bytes": m.payload_bytes,
    }


def _scratch_dir(run_dir: Path) -> Path:
    """Where the capture analysis keeps its temporary files: inside the run directory, so a
    run killed while analysing leaves them there, not in /tmp, and the next analysis of the
    run (a resume, `congestlab analyze`) removes them."""
    results = run_dir / "results"
    results.mkdir(exist_ok=True)
    for stale in results.glob(SCRATCH_PREFIX + "*"):
        shutil.rmtree(stale, ignore_errors=True)
    return results


def _lean_logs(run_dir: Path, manifest: dict) -> dict[tuple[str, str], Path]:
    """(server, instance) -> leanweb's log, for every lean server of the run."""
    return {(server, instance): run_dir / record["log_dir"] / "leanweb.jsonl"
            for server, instances in lean_servers(manifest).items() for instance, record in instances.items()}


def _capture_span_s(info: dict) -> tuple[float, float] | None:
    """When the repetition's captures ran (epoch s). Runs from before the runner recorded it:
    the measurement window, which ends 0.2 s before the captures stop."""
    if info.get("capture_epoch_s"):
        return tuple(info["capture_epoch_s"])
    window = info.get("window_epoch_s")
    return (window[0], window[1] + 0.2) if window else None


def _lean_log_checks(by_server: dict[str, list[tuple]]) -> list[Check]:
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


def replay_wanted(manifest: dict) -> bool:
    """Whether the study's report reads the RTO replay's tables (a metric of kind rto_*). A
    lean server that serves load, not one GET, gives millions of samples: anma's full run
    152 MB of rto_samples.csv and minutes of CPU that no table of its report reads."""
    metrics = ((manifest.get("spec") or {}).get("report") or {}).get("metrics") or {}
    return any(str(m.get("kind", "")).startswith("rto_") for m in metrics.values() if isinstance(m, dict))


def _rto_replay(run_dir: Path, manifest: dict, rows: dict[str, list[dict]], problems: list[str]):
    """The RTO replay with each lean server's live settings (analysis/rto_replay.py)."""
    try:
        result = replay_run(run_dir, manifest)
    except LeanLogError as err:
        problems.append(f"RTO replay: {err}")
        return None
    for kind, kind_rows in result.rows.items():
        rows[kind] += kind_rows
    problems += [f"RTO replay: {p}" for p in result.problems]
    return result
