"""From a run directory's point repetitions (records.jsonl, pcap/) to its results in long
form (results/<kind>.csv, congestlab/results.py): the measured GETs measured in the
capture, every server port's aggregate, and the workloads' own records passed through
with the point's axis columns (analysis/repetition_analysis.py). What was found is compared
with what the run planned: a planned repetition without data and one found that was not
planned are listed, the latter left out. The run is read through congestlab.stored (typed
records, the spec each point ran with); pure apart from reading and writing files.
`congestlab analyze RUN_DIR` runs it again on a stored run."""

from __future__ import annotations

import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from congestlab.analysis.drift import drift_checks
from congestlab.analysis.repetition_analysis import Tally, analyze_repetition, relative
from congestlab.analysis.rto_replay import replay_run
from congestlab.analysis.server_views import lean_log_checks, lean_logs
from congestlab.analysis.trace import SCRATCH_PREFIX
from congestlab.errors import LeanLogError
from congestlab.fidelity import Check
from congestlab.results import result_path, write_results
from congestlab.stats.outcomes import COMPLETE, INVALID
from congestlab.stored import StoredRun


@dataclass
class AnalysisResult:
    summary: dict
    checks: list[Check] = field(default_factory=list)
    rows: dict[str, list[dict]] = field(default_factory=dict)


def analyze_run(run_dir: Path, manifest: dict) -> AnalysisResult:
    """Analyse the run in `run_dir` whose manifest (as stored, or as a running run holds it
    in memory) is `manifest`."""
    start = time.monotonic()
    run = StoredRun(run_dir, require_complete=False, manifest=manifest)
    tally = Tally()
    missing, unplanned = run.missing(), run.unplanned()
    absent = {(a.point, a.repetition) for a in missing}
    lean = lean_logs(run)
    lean_rows_by_log: dict[Path, list[dict]] = {}  # a lean log's sender rows, read once for all repetitions
    scratch_dir = _scratch_dir(run.path)
    analysed = 0
    for rep in run.repetitions():
        if (rep.point.id, rep.number) not in absent:
            analyze_repetition(run, rep, tally, lean, lean_rows_by_log, scratch_dir)
            analysed += 1
    tally.problems += [f"{a}: planned, no data" for a in missing] + [f"{a}: left out" for a in unplanned]
    rows, problems = tally.rows, tally.problems
    replay_skipped = bool(lean) and not replay_wanted(run)
    replay = _rto_replay(run, tally) if lean and not replay_skipped else None
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
    log_checks, log_problems = lean_log_checks(tally.lean_checks)
    checks += log_checks
    for problem in log_problems:
        tally.input_problem(relative(run, problem))
    drift, drift_entries = drift_checks(run.manifest, rows["request"])
    checks += drift
    summary = {"rows": {k: len(v) for k, v in rows.items() if v}, "problems": problems,
               "pcap_read": tally.pcap_read, "request_outcomes": tally.outcomes, "captures_unusable": tally.unusable,
               "repetitions": {"planned": len(run.planned_runs), "analysed": analysed - len(tally.not_analysed),
                               "missing": [asdict(a) for a in missing], "unplanned": [asdict(a) for a in unplanned],
                               "not_analysed": tally.not_analysed},
               "input_problems": tally.input_problems,
               "drift": drift_entries, "analysis_s": round(time.monotonic() - start, 3)}
    if replay is not None:
        summary["rto_replay"] = {"samples": replay.samples_replayed, "seconds": replay.seconds, "cpu_s": replay.cpu_s}
    elif replay_skipped:
        summary["rto_replay_skipped"] = ("no rto_* metric in the study's report; `congestlab rto-replay RUN` "
                                         "writes results/rto_*.csv")
    return AnalysisResult(summary, checks, rows)


def problem_counts(summary: dict) -> dict[str, int]:
    """What makes an analysis one "with problems" (`congestlab analyze` exits 6), counted:
    invalid GETs, unusable captures, repetitions planned without data, found unplanned or not
    analysed, and records, probe and log files with problems. Timed-out GETs are measurements."""
    reps = summary.get("repetitions") or {}
    return {"invalid requests": summary.get("request_outcomes", {}).get(INVALID, 0),
            "unusable captures": len(summary.get("captures_unusable") or []),
            "repetitions not analysed": len(reps.get("not_analysed") or []),
            "planned repetitions without data": len(reps.get("missing") or []),
            "unplanned repetitions": len(reps.get("unplanned") or []),
            "input problems": len(summary.get("input_problems") or [])}


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


def _rto_replay(run: StoredRun, tally: Tally):
    """The RTO replay with each lean server's live settings (analysis/rto_replay.py)."""
    try:
        result = replay_run(run)
    except LeanLogError as err:
        tally.input_problem(relative(run, f"RTO replay: {err}"))
        return None
    for kind, kind_rows in result.rows.items():
        tally.rows[kind] += kind_rows
    tally.problems += [f"RTO replay: {p}" for p in result.problems]
    for problem in result.damaged:
        tally.input_problem(relative(run, f"RTO replay: {problem}"))
    return result
