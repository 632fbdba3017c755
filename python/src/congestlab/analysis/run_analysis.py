"""From a run directory's point repetitions (records.jsonl, pcap/) to its results in long
form (results/<kind>.csv, congestlab/results.py): the measured GETs measured in the
capture, every server port's aggregate, and the workloads' own records passed through
with the point's axis columns. The run is read through congestlab.stored (typed records, the
spec each point ran with); pure apart from reading and writing files. `congestlab analyze
RUN_DIR` runs it again on a stored run."""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from congestlab.analysis.drift import drift_checks
from congestlab.analysis.request_rows import (connection_of, lower_bounds, metric_columns, request_base,
                                              request_outcome)
from congestlab.analysis.rto_replay import replay_run
from congestlab.analysis.server_views import (SERIES_DIR, capture_span_s, lean_log_checks, lean_logs,
                                              write_probe_series)
from congestlab.analysis.trace import SCRATCH_PREFIX, PcapConnection, PortAggregate, measure_pcap
from congestlab.analysis.trace_files import write_trace
from congestlab.errors import LeanLogError, RunDirError, TraceError
from congestlab.fidelity import Check
from congestlab.results import KIND_COLUMNS, result_path, write_results
from congestlab.rundir.records import GetRecord
from congestlab.spec.network import Bottleneck, path_bottleneck
from congestlab.stats.outcomes import COMPLETE, OUTCOMES
from congestlab.stored import StoredPoint, StoredRepetition, StoredRun


@dataclass
class AnalysisResult:
    summary: dict
    checks: list[Check] = field(default_factory=list)
    rows: dict[str, list[dict]] = field(default_factory=dict)


@dataclass
class _Tally:
    """What the analysis of a run has found so far."""

    rows: dict[str, list[dict]] = field(default_factory=lambda: {kind: [] for kind in KIND_COLUMNS})
    problems: list[str] = field(default_factory=list)
    unusable: list[str] = field(default_factory=list)
    pcap_read: dict[str, dict] = field(default_factory=dict)
    outcomes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    raw_requests: int = 0
    lean_checks: dict[str, list[tuple]] = field(default_factory=dict)


def analyze_run(run_dir: Path, manifest: dict) -> AnalysisResult:
    """Analyse the run in `run_dir` whose manifest (as stored, or as a running run holds it
    in memory) is `manifest`."""
    start = time.monotonic()
    run = StoredRun(run_dir, require_complete=False, manifest=manifest)
    tally = _Tally()
    lean = lean_logs(run)
    lean_rows_by_log: dict[Path, list[dict]] = {}  # a lean log's sender rows, read once for all repetitions
    scratch_dir = _scratch_dir(run.path)
    for rep in run.repetitions():
        _analyze_repetition(run, rep, tally, lean, lean_rows_by_log, scratch_dir)
    rows, problems = tally.rows, tally.problems
    replay_skipped = bool(lean) and not replay_wanted(run)
    replay = _rto_replay(run, rows, problems) if lean and not replay_skipped else None
    for kind, kind_rows in rows.items():
        if kind_rows or kind == "request" and tally.raw_requests:
            write_results(run.path, kind, run.axes, kind_rows)
        else:  # results/ is this analysis's: a table an earlier one wrote (e.g. a replay since skipped) goes
            result_path(run.path, kind).unlink(missing_ok=True)
    measured = tally.outcomes[COMPLETE]
    checks = []
    if tally.raw_requests:
        checks.append(Check("measured_requests", measured == tally.raw_requests, measured, f"{tally.raw_requests}",
                            "; ".join(problems[:3])))
    checks += lean_log_checks(tally.lean_checks)
    drift, drift_entries = drift_checks(run.manifest, rows["request"])
    checks += drift
    summary = {"rows": {k: len(v) for k, v in rows.items() if v}, "problems": problems,
               "pcap_read": tally.pcap_read, "request_outcomes": tally.outcomes, "captures_unusable": tally.unusable,
               "drift": drift_entries, "analysis_s": round(time.monotonic() - start, 3)}
    if replay is not None:
        summary["rto_replay"] = {"samples": replay.samples_replayed, "seconds": replay.seconds, "cpu_s": replay.cpu_s}
    elif replay_skipped:
        summary["rto_replay_skipped"] = ("no rto_* metric in the study's report; `congestlab rto-replay RUN` "
                                         "writes results/rto_*.csv")
    return AnalysisResult(summary, checks, rows)


def _analyze_repetition(run: StoredRun, rep: StoredRepetition, tally: _Tally, lean: dict[tuple[str, str], Path],
                        lean_rows_by_log: dict[Path, list[dict]], scratch_dir: Path) -> None:
    point = rep.point
    planned = rep.planned
    common = {"point_id": point.id, "experiment": point.experiment, "repetition": rep.number,
              "round": planned.get("round", ""), "block": planned.get("block", ""),
              "run_index": planned.get("run", "")} | {axis: point.labels.get(axis, "") for axis in run.axes}
    records = rep.records()
    gets = [r for r in records if isinstance(r, GetRecord)]
    conns_by_server: dict[str, list[PcapConnection]] = {}
    traces_by_server: dict[str, dict[int, list[bytes]]] = {}
    series_names: dict[tuple[str, int], str] = {}  # (server, conn) -> file name, one per connection
    # derived data goes under results/, never into the repetition: a resumed run keeps its
    # finished repetitions byte for byte (python/tests/netns/test_resume_netns.py)
    series_dir = run.path / "results" / SERIES_DIR / point.id / f"r{rep.number}"
    shutil.rmtree(series_dir, ignore_errors=True)  # written again below
    capture_errors: dict[str, str] = {}  # server -> why its capture cannot be used
    for pcap in rep.pcaps():
        server = pcap.stem
        where_file = pcap.relative_to(run.path)
        try:
            measured = measure_pcap(pcap, server_port=_server_port(run, point, server, rep.info),
                                    scratch_dir=scratch_dir, trace_client_ports=_measured_client_ports(gets, server))
        except TraceError as err:
            capture_errors[server] = f"{where_file}: unreadable ({err})"
        else:
            if measured.read_stats.truncated:
                capture_errors[server] = (f"{where_file}: {measured.stop_reason or 'truncated'} "
                                          f"after {measured.read_stats.frames} frames")
        if server in capture_errors:
            tally.unusable.append(capture_errors[server])
            tally.problems.append(capture_errors[server])
            continue
        stats = measured.read_stats
        conns_by_server[server] = measured.connections
        traces_by_server[server] = measured.trace_lines
        tally.pcap_read[f"{point.id}/r{rep.number}/{server}"] = {
            "frames": stats.frames, "tcp_segments": stats.tcp_segments, "skipped": stats.skipped}
        tally.rows["port"].append(common | {"server": server} | _port_row(measured.port))
        log = lean.get((server, rep.info.get("servers", {}).get(server)))
        if log is not None:
            tally.lean_checks.setdefault(server, []).append((rep.where, measured.connections, log,
                                                             capture_span_s(rep)))
    tally.problems.extend(write_probe_series(series_dir, rep, lean, lean_rows_by_log))
    for record in records:
        if not isinstance(record, GetRecord):
            tally.rows[record.kind].append(common | record.row)
            continue
        tally.raw_requests += 1
        out = common | request_base(record)
        conns = conns_by_server.get(record.server, [])
        outcome, error, conn = request_outcome(record, capture_errors.get(record.server), conns,
                                               _bottleneck(point, record))
        traced = conn or connection_of(conns, record)
        if traced is not None:  # also a GET that timed out or failed: why is the question
            _write_series(series_dir, record.server, traced, traces_by_server.get(record.server, {}), series_names)
        if outcome == COMPLETE:
            out |= metric_columns(conn.metrics) | {"client_port": conn.metrics.client_port}
        else:
            out |= lower_bounds(outcome, traced)
            tally.problems.append(f"{rep.where} {record.server} {record.family}: {outcome}: {error}")
        out |= {"outcome": outcome, "ok": outcome == COMPLETE, "error": error}
        tally.outcomes[outcome] += 1
        tally.rows["request"].append(out)


def _measured_client_ports(gets: list[GetRecord], server: str) -> set[int]:
    """The client ports of this server's measured GETs: their connections are traced (on a port
    shared with load connections, only theirs)."""
    return {r.client_port for r in gets if r.server == server and r.client_port}


def _server_port(run: StoredRun, point: StoredPoint, server: str, info: dict) -> int:
    for record in run.manifest.get("servers", {}).get(server, []):
        if record.get("instance") == info.get("servers", {}).get(server):
            return int(record["port"])
    try:
        return point.study.server(server).port
    except KeyError:
        raise RunDirError(f"server {server!r} has a capture but is not in the manifest") from None


def _bottleneck(point: StoredPoint, record: GetRecord) -> Bottleneck | None:
    """The narrowest shaping between the GET's client and its server at this point
    (spec/network.py); None when nothing on the way is shaped."""
    topology = point.study.topology
    try:
        return path_bottleneck(topology, record.client, point.study.server(record.server).node)
    except KeyError:  # a host the topology does not have: nothing to hold the rate to
        return None


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


def _port_row(p: PortAggregate) -> dict:
    """The port's row as analysis/port.py's port_aggregate gives it."""
    return {"connections": p.connections, "interval_s": p.interval_s,
            "captured_throughput_mbps": p.throughput_mbps if p.interval_s > 0 else None,
            "nrt_throughput_mbps": p.nrt_throughput_mbps if p.interval_s > 0 else None,
            "retransmissions": p.retransmissions}


def _scratch_dir(run_dir: Path) -> Path:
    """Where the capture analysis keeps its temporary files: inside the run directory, so a
    run killed while analysing leaves them there, not in /tmp, and the next analysis of the
    run (a resume, `congestlab analyze`) removes them."""
    results = run_dir / "results"
    results.mkdir(exist_ok=True)
    for stale in results.glob(SCRATCH_PREFIX + "*"):
        shutil.rmtree(stale, ignore_errors=True)
    return results


def replay_wanted(run: StoredRun) -> bool:
    """Whether the study's report reads the RTO replay's tables (a metric of kind rto_*). A
    lean server that serves load, not one GET, gives millions of samples: anma's full run
    152 MB of rto_samples.csv and minutes of CPU that no table of its report reads."""
    report = run.report
    return report is not None and any(m.kind.startswith("rto_") for m in report.metrics.values())


def _rto_replay(run: StoredRun, rows: dict[str, list[dict]], problems: list[str]):
    """The RTO replay with each lean server's live settings (analysis/rto_replay.py)."""
    try:
        result = replay_run(run.path, run.manifest)
    except LeanLogError as err:
        problems.append(f"RTO replay: {err}")
        return None
    for kind, kind_rows in result.rows.items():
        rows[kind] += kind_rows
    problems += [f"RTO replay: {p}" for p in result.problems]
    return result
