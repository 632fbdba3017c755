"""One repetition of a stored run analysed: its captures measured and checked against
tcpdump's own counts, its records checked (analysis/record_checks.py) and turned into rows.
Every file of the repetition is read defensively: a damaged rep.json or records.jsonl leaves
the repetition out with the file and why, a damaged capture makes its GETs invalid, a damaged
probe or log file costs its series; the rest is analysed (analysis/run_analysis.py)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from congestlab.analysis.capture_counts import capture_count_problem
from congestlab.analysis.quic_capture import QuicConnection
from congestlab.analysis.quic_requests import (QLOG_DIR, QuicCaptures, measure_quic_captures, qlog_columns,
                                              write_qlog_series)
from congestlab.analysis.quic_trace import quic_trace_lines
from congestlab.analysis.record_checks import axis_mismatch, deduplicated
from congestlab.analysis.request_outcome import PathLimits
from congestlab.analysis.request_rows import (connection_of, lower_bounds, metric_columns, request_base,
                                              request_outcome)
from congestlab.analysis.server_views import SERIES_DIR, capture_span_s, write_probe_series
from congestlab.analysis.trace import PcapConnection, PortAggregate, measure_pcap
from congestlab.analysis.trace_files import write_trace
from congestlab.errors import RunDirError, TraceError
from congestlab.results import KIND_COLUMNS
from congestlab.rundir import PCAP_DIR
from congestlab.rundir.records import GetRecord
from congestlab.spec.network import path_bottleneck, round_trip_floor_ms
from congestlab.stats.outcomes import COMPLETE, INVALID, OUTCOMES
from congestlab.stored import StoredPoint, StoredRepetition, StoredRun


@dataclass
class Tally:
    """What the analysis of a run has found so far."""

    rows: dict[str, list[dict]] = field(default_factory=lambda: {kind: [] for kind in KIND_COLUMNS})
    problems: list[str] = field(default_factory=list)
    unusable: list[str] = field(default_factory=list)  # captures that could not be used, with why
    not_analysed: list[dict] = field(default_factory=list)  # repetitions left out: the file and why
    input_problems: list[str] = field(default_factory=list)  # records, probe and log files with problems
    pcap_read: dict[str, dict] = field(default_factory=dict)
    outcomes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    raw_requests: int = 0
    lean_checks: dict[str, list[tuple]] = field(default_factory=dict)

    def input_problem(self, problem: str) -> None:
        self.input_problems.append(problem)
        self.problems.append(problem)


def relative(run: StoredRun, text: str) -> str:
    """A message with the run directory's own path left out of the files it names."""
    return text.replace(f"{run.path}/", "")


def analyze_repetition(run: StoredRun, rep: StoredRepetition, tally: Tally, lean: dict[tuple[str, str], Path],
                       lean_rows_by_log: dict[Path, list[dict]], scratch_dir: Path) -> None:
    point = rep.point
    planned = rep.planned
    try:
        info = rep.info
        numbered = rep.numbered_records()
    except RunDirError as err:
        why = relative(run, str(err))
        tally.not_analysed.append({"point": point.id, "repetition": rep.number, "why": why})
        tally.problems.append(f"{rep.where}: not analysed: {why}")
        return
    common = {"point_id": point.id, "experiment": point.experiment, "repetition": rep.number,
              "round": planned.get("round", ""), "block": planned.get("block", ""),
              "run_index": planned.get("run", "")} | {axis: point.labels.get(axis, "") for axis in run.axes}
    checked = deduplicated(numbered, relative(run, str(rep.dir / "records.jsonl")))
    for problem in checked.problems:
        tally.input_problem(problem)
    records = checked.records
    gets = [r for r in records if isinstance(r, GetRecord)]
    # derived data goes under results/, never into the repetition: a resumed run keeps its
    # finished repetitions byte for byte (python/tests/netns/test_resume_netns.py)
    series_dir = run.path / "results" / SERIES_DIR / point.id / f"r{rep.number}"
    shutil.rmtree(series_dir, ignore_errors=True)  # written again below
    captures = _measure_captures(run, rep, info, gets, common, tally, lean, scratch_dir)
    quic = _measure_quic(run, rep, info, tally)
    for problem in write_probe_series(series_dir, rep, lean, lean_rows_by_log):
        tally.input_problem(relative(run, problem))
    series_names: dict[tuple[str, int], str] = {}  # (server, conn) -> file name, one per connection
    for record in records:
        mismatch = axis_mismatch(record, point, run.axes)
        if not isinstance(record, GetRecord):
            if mismatch:
                tally.input_problem(f"{rep.where} {record.kind}: left out: {mismatch}")
            else:
                tally.rows[record.kind].append(common | record.row)
            continue
        tally.raw_requests += 1
        out = common | request_base(record)
        over_quic = record.http == "3"
        found = quic if over_quic else captures
        conns = found.connections.get(record.server, [])
        outcome, error, conn = request_outcome(record, found.errors.get(record.server), conns,
                                               _path_limits(point, record))
        why_not = checked.invalid.get(id(record)) or mismatch
        if why_not and outcome != INVALID:
            outcome, error, conn = INVALID, why_not, None
        traced = conn or connection_of(conns, record)
        if over_quic:
            columns, series = qlog_columns(_qlog_dir(run, info, record.server), traced)
            out |= columns | {"quic_end": conn.ended_by if conn is not None else ""}
            if traced is not None:  # its trace, and the sender's series beside it under the same name
                name = _write_series(series_dir, record.server, traced, None, series_names)
                if series is not None and series.time_ms:
                    write_qlog_series(series_dir / f"{name}.qlog.csv", series, traced.first_ts)
        elif traced is not None:  # also a GET that timed out or failed: why is the question
            _write_series(series_dir, record.server, traced, captures.traces.get(record.server, {}), series_names)
        if outcome == COMPLETE:
            out |= metric_columns(conn.metrics) | {"client_port": conn.metrics.client_port,
                                                   "capture_duplicates": conn.capture_duplicates}
        else:
            out |= lower_bounds(outcome, traced)
            tally.problems.append(f"{rep.where} {record.server} {record.family}: {outcome}: {error}")
        out |= {"outcome": outcome, "ok": outcome == COMPLETE, "error": error}
        tally.outcomes[outcome] += 1
        tally.rows["request"].append(out)


@dataclass
class _Captures:
    connections: dict[str, list[PcapConnection]] = field(default_factory=dict)
    traces: dict[str, dict[int, list[bytes]]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)  # server -> why its capture cannot be used


def _measure_captures(run: StoredRun, rep: StoredRepetition, info: dict, gets: list[GetRecord], common: dict,
                      tally: Tally, lean: dict[tuple[str, str], Path], scratch_dir: Path) -> _Captures:
    """Every capture of the repetition measured; one that cannot be read, is cut, or holds
    other frames than tcpdump wrote (rep.json's counts) is unusable, named."""
    point = rep.point
    out = _Captures()
    pcaps = {pcap.stem: pcap for pcap in rep.pcaps()}
    for server in (info.get("captures") or {}):
        if server not in pcaps:  # tcpdump ran for it: its file belongs here
            out.errors[server] = (f"{relative(run, str(rep.dir / PCAP_DIR / server))}.pcap: missing (the "
                                  "repetition recorded this capture; deleted since?)")
    for server, pcap in pcaps.items():
        where_file = pcap.relative_to(run.path)
        try:
            measured = measure_pcap(pcap, server_port=_server_port(run, point, server, info),
                                    scratch_dir=scratch_dir, trace_client_ports=_measured_client_ports(gets, server))
        except (TraceError, RunDirError) as err:
            out.errors[server] = f"{where_file}: unreadable ({relative(run, str(err))})"
        else:
            if measured.read_stats.truncated:
                out.errors[server] = (f"{where_file}: {measured.stop_reason or 'truncated'} "
                                      f"after {measured.read_stats.frames} frames")
            elif problem := capture_count_problem(measured.read_stats.frames, info, server):
                out.errors[server] = f"{where_file}: {problem}"
        if server in out.errors:
            continue
        stats = measured.read_stats
        out.connections[server] = measured.connections
        out.traces[server] = measured.trace_lines
        tally.pcap_read[f"{point.id}/r{rep.number}/{server}"] = {
            "frames": stats.frames, "tcp_segments": stats.tcp_segments, "skipped": stats.skipped,
            "capture_duplicates": stats.capture_duplicates}
        if stats.capture_duplicates:
            tally.problems.append(f"{where_file}: {stats.capture_duplicates} frames recorded twice (capture "
                                  "duplicates) left out")
        tally.rows["port"].append(common | {"server": server} | _port_row(measured.port))
        log = lean.get((server, info.get("servers", {}).get(server)))
        if log is not None:
            tally.lean_checks.setdefault(server, []).append((rep.where, measured.connections, log,
                                                             capture_span_s(rep)))
    for error in out.errors.values():
        tally.unusable.append(error)
        tally.problems.append(error)
    return out


def _measure_quic(run: StoredRun, rep: StoredRepetition, info: dict, tally: Tally) -> QuicCaptures:
    """The repetition's QUIC captures (analysis/quic_requests.py); one tcpdump recorded
    without its file is named, as for TCP."""
    pcaps = rep.quic_pcaps()
    ports = {pcap.stem: _server_port(run, rep.point, pcap.stem, info) for pcap in pcaps
             if pcap.stem in (info.get("servers") or {})}
    quic = measure_quic_captures(pcaps, rep.quic_keylog, ports, lambda path: relative(run, str(path)), info)
    for server in (info.get("quic_captures") or {}):
        if server not in {p.stem for p in pcaps}:
            quic.errors[server] = f"{relative(run, str(rep.quic_keylog.parent / server))}.pcap: missing"
    for error in quic.errors.values():
        tally.unusable.append(error)
        tally.problems.append(error)
    return quic


def _qlog_dir(run: StoredRun, info: dict, server: str) -> Path | None:
    """The qlog directory of the server instance of this repetition (ngtcp2 writes one; None
    for a server that writes none)."""
    for record in run.manifest.get("servers", {}).get(server, []):
        if record.get("instance") == (info.get("servers") or {}).get(server) and record.get("kind") == "ngtcp2":
            return run.path / record["log_dir"] / QLOG_DIR
    return None


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


def _path_limits(point: StoredPoint, record: GetRecord) -> PathLimits:
    """What the way between the GET's client and its server allows at this point
    (spec/network.py): its narrowest shaping and the least round trip of its delays."""
    topology = point.study.topology
    try:
        server_node = point.study.server(record.server).node
        return PathLimits(path_bottleneck(topology, record.client, server_node),
                          round_trip_floor_ms(topology, record.client, server_node))
    except KeyError:  # a host the topology does not have: nothing to hold the GET to
        return PathLimits()


def _write_series(series_dir: Path, server: str, conn: PcapConnection | QuicConnection,
                  traces: dict[int, list[bytes]] | None, names: dict[tuple[str, int], str]) -> str:
    """The measured connection's segment trace as <series_dir>/<server>-<family>-<client port>.csv
    (-<conn id> appended when the port's name is taken: a port reused in one repetition);
    once per connection, however many GET rows name it. `traces`: the TCP analyzer's lines by
    connection; None for a QUIC connection (its trace built here: analysis/quic_trace.py).
    Returns the file's name without .csv."""
    key = (server if traces is not None else f"{server} quic", conn.conn)
    if key in names:
        return names[key]
    lines = traces.get(conn.conn) if traces is not None else quic_trace_lines(conn)
    name = f"{server}-{conn.family}-{conn.client_port}"
    if name in names.values():
        name += f"-{conn.conn}"
    if lines:
        names[key] = name
        write_trace(series_dir / f"{name}.csv", lines)
    return name


def _port_row(p: PortAggregate) -> dict:
    """The port's row as analysis/port.py's port_aggregate gives it."""
    return {"connections": p.connections, "interval_s": p.interval_s,
            "captured_throughput_mbps": p.throughput_mbps if p.interval_s > 0 else None,
            "nrt_throughput_mbps": p.nrt_throughput_mbps if p.interval_s > 0 else None,
            "retransmissions": p.retransmissions, "capture_duplicates": p.capture_duplicates}
