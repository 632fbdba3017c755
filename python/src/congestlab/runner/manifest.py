"""The run directory as a run writes it: the manifest (docs/data-format.md) from its first
version to how the run ended, its analysis (`record_analysis`) and the continuation of a stored
one (`--resume`)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from congestlab import fidelity
from congestlab.analysis.run_analysis import AnalysisResult, analyze_run
from congestlab.errors import RunDirError
from congestlab.rundir import (FORMAT_VERSION, FULL_OR_READ_ONLY, MANIFEST, RECORDS, REP_INFO, environment, utc_now,
                               write_manifest)
from congestlab.runner.host import pause_if_asked
from congestlab.runner.time_budget import settle_in_progress
from congestlab.spec.models import StudySpec
from congestlab.spec.sweep import Point


def rep_dir(run_dir: Path, point_id: str, rep: int) -> Path:
    return run_dir / "points" / point_id / f"r{rep}"


def rep_complete(run_dir: Path, point_id: str, rep: int) -> bool:
    """rep.json is written last: a repetition with it completed."""
    return (rep_dir(run_dir, point_id, rep) / REP_INFO).is_file()


def new_manifest(study: StudySpec, points: list[Point], axes: list[str], runs_total: int, quick: bool,
                 preset: str | None, argv: list[str] | None, prefix: str) -> dict:
    return {
        "format_version": FORMAT_VERSION,
        "study": study.name,
        "preset": preset,
        "quick": quick,
        "status": "running",
        "started_utc": utc_now(),
        "command": argv or sys.argv,
        "spec": study.model_dump(mode="json"),
        "axes": axes,
        "order": study.order,
        "points": [p.describe() for p in points],
        "runs_total": runs_total,
        "runs_done": 0,
        "environment": environment(),
        "testbed": {"prefix": prefix},
        "servers": {},
        "workloads": {},
        "reconfigurations": [],
    }


def continued_manifest(stored: dict, fresh: dict, run_dir: Path, done: list[tuple[Point, int]],
                       to_run: list[tuple[Point, int]], argv: list[str] | None,
                       prefix: str) -> tuple[dict, dict, list[fidelity.Check]]:
    """A stored manifest carried on: what the finished repetitions recorded (server and
    background instances, fidelity checks) is kept, only `to_run` runs. Returns the manifest,
    its new `resumes` entry and the kept checks."""
    manifest = dict(stored)
    for key in ("error", "finished_utc", "timing"):
        manifest.pop(key, None)
    manifest["status"] = "running"
    manifest["runs_done"] = len(done)
    manifest["environment"] = fresh["environment"]
    manifest.setdefault("servers", {})
    manifest.setdefault("workloads", {})
    manifest.setdefault("reconfigurations", [])
    manifest["testbed"] = {"prefix": prefix}
    entry = {"started_utc": utc_now(), "command": argv or sys.argv,
             "previous_status": stored.get("status"), "previous_error": stored.get("error"),
             "previous_prefix": stored.get("testbed", {}).get("prefix"), "prefix": prefix,
             "kept": len(done), "ran": []}  # each repetition as it finishes (StudyRun.finished)
    manifest.setdefault("resumes", []).append(entry)
    settle_in_progress(manifest)  # a killed attempt's time up to its last finished repetition
    checks: list[fidelity.Check] = []
    for point, rep in done:  # their checks stand as recorded (rep.json, background instances)
        info = json.loads((rep_dir(run_dir, point.id, rep) / REP_INFO).read_text())
        checks += [fidelity.Check(f"{c['name']}@{point.id}#{rep}", c["ok"], c["value"], c["expected"],
                                  c.get("message", "")) for c in info.get("checks", [])]
    for workload in manifest["workloads"].values():
        for instance in workload.get("instances", []):
            checks += [fidelity.Check(f"{c['name']}@{instance['first_point']}", c["ok"], c["value"],
                                      c["expected"], c.get("message", ""))
                       for c in instance.get("checks", [])]
    return manifest, entry, checks


def write_failed_manifest(run_dir: Path, manifest: dict, unfinished: list[Path]) -> None:
    """The manifest of a run that ended in an error; when its file system takes no more
    (full, over quota), written again after removing what the `unfinished` repetitions wrote
    (no rep.json: a --resume runs them again). A RunDirError when it still cannot be written."""
    try:
        write_manifest(run_dir, manifest)
        return
    except OSError as err:
        if err.errno not in FULL_OR_READ_ONLY:
            raise
        first = err
    for folder in unfinished:
        if not (folder / REP_INFO).is_file():
            shutil.rmtree(folder, ignore_errors=True)
    try:
        write_manifest(run_dir, manifest)
    except OSError as err:
        raise RunDirError(f"{run_dir}: {manifest.get('error')}; and its manifest cannot be written to say so "
                          f"({err.strerror or first.strerror}): it still says {_stored_status(run_dir)!r}") from None


def _stored_status(run_dir: Path) -> str | None:
    try:
        return json.loads((run_dir / MANIFEST).read_text()).get("status")
    except (OSError, ValueError, AttributeError):
        return None


def write_repetition(rep_path: Path, info: dict, records: list) -> None:
    """records.jsonl, then rep.json last: the repetition is complete."""
    with open(rep_path / RECORDS, "w") as fh:
        for kind, row in records:
            fh.write(json.dumps({"kind": kind, "row": row}) + "\n")
    pause_if_asked("repetition-write")
    (rep_path / REP_INFO).write_text(json.dumps(info, indent=1) + "\n")


def record_analysis(run_dir: Path, manifest: dict) -> AnalysisResult:
    """The run's results/ analysed from its repetitions (analysis/run_analysis.py) and their
    summary kept as the manifest's `analysis`: at the end of a run, and by `congestlab analyze`
    on a stored one. The caller writes the manifest."""
    result = analyze_run(run_dir, manifest)
    manifest["analysis"] = result.summary
    return result
