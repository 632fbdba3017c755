"""index.md and index.html of a suite run, from its stored sub-runs only (no root): per
study its claims with their verdicts, its distance to the published numbers, the time it
took and where that went, and a link to its own report."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from congestlab.errors import CongestlabError, RunDirError
from congestlab.report.claims import NOT_MEASURED
from congestlab.report.data import RunData
from congestlab.report.engine import VERDICT_ORDER, run_findings, verdict_class
from congestlab.report.render import render_template
from congestlab.report.time_table import time_table
from congestlab.rundir import MANIFEST, completed_repetitions, planned_repetitions, read_json_file, read_manifest
from congestlab.runner.time_budget import merge as merge_budgets
from congestlab.sensitivity.distance import distance
from congestlab.sensitivity.report import published_cells
from congestlab.suite.run import STATE


RestOf = Callable[[Path], float | None]


@dataclass
class SuiteIndex:
    markdown_path: Path
    html_path: Path
    studies: list[dict]
    total_wall_s: float


def read_state(parent: Path) -> dict:
    path = Path(parent) / STATE
    if not path.is_file():
        raise RunDirError(f"{parent}: holds no {STATE} (not a suite run)")
    return read_json_file(path)


def _progress(run_dir: Path) -> tuple[str | None, dict | None]:
    """A run's own status and, when it is not complete, how far it got: what a --resume goes on from."""
    try:
        m = read_manifest(run_dir, require_complete=False)
    except CongestlabError:
        return None, None
    if m.get("status") == "complete":
        return "complete", None
    return m.get("status"), {"done": len(completed_repetitions(run_dir)),
                             "planned": planned_repetitions(m)}


def study_summary(parent: Path, study: dict, entry: dict, rest_s: RestOf | None = None) -> dict:
    run_dir = parent / study["dir"]
    attempts = entry.get("attempts_wall_s") or []  # a study resumed across sessions took every attempt's time
    out = {"key": study["key"], "label": study.get("label", study["key"]), "dir": study["dir"],
           "status": entry.get("status") or ("not run" if not (run_dir / MANIFEST).exists() else "?"),
           "error": entry.get("error"), "wall_s": round(sum(attempts), 1) if attempts else entry.get("wall_s"),
           "attempts": len(attempts), "report_s": entry.get("report_s"),
           "claims": [], "verdicts": {}, "distance": None,
           "report_href": None, "time_table": None, "budget": None, "load": entry.get("load_avg_1m"),
           "progress": None}
    if not (run_dir / MANIFEST).exists():
        return out
    status, out["progress"] = _progress(run_dir)
    if out["progress"] is not None and rest_s is not None:
        out["progress"]["left_s"] = rest_s(run_dir)
    if out["status"] == "?" and status:  # the suite recorded no attempt (stopped from outside)
        out["status"] = status
    try:
        data = RunData(run_dir)
    except CongestlabError as err:
        out["error"] = out["error"] or str(err)
        return out
    m = data.manifest
    out["status"] = m.get("status", out["status"])
    out["run_wall_s"] = (m.get("timing") or {}).get("wall_s")
    out["budget"] = m.get("time_budget")
    out["time_table"] = time_table(m)
    if (run_dir / "report.html").exists():
        out["report_href"] = os.path.relpath(run_dir / "report.html", parent)
    if m.get("status") != "complete":
        return out
    try:
        findings = run_findings(data)
        cells = published_cells(data)
    except CongestlabError as err:
        out["error"] = f"claims or distance not computed: {err}"
        return out
    out["claims"] = [{"id": f.claim.id, "title": f.claim.title, "verdict": f.verdict, "css": verdict_class(f.verdict),
                      "coverage": f.coverage if f.verdict != NOT_MEASURED else ""} for f in findings]
    out["verdicts"] = {v: n for v in VERDICT_ORDER if (n := sum(f.verdict == v for f in findings))}
    d = distance(cells)
    if d.median is not None:
        out["distance"] = {"median": round(d.median, 2), "median_x": round(math.exp(d.median), 2),
                           "worst": round(d.worst, 2), "worst_x": round(math.exp(d.worst), 2),
                           "within": d.within(), "measured": d.measured, "unmeasured": len(d.unmeasured)}
    elif cells:
        out["distance"] = {"measured": 0, "unmeasured": len(cells)}
    return out


def build_index(parent: Path, rest_s: RestOf | None = None) -> SuiteIndex:
    """`rest_s`: an unfinished study's time left, in seconds (None: unknown), shown beside
    how far it got (the planner's, given by the command line: it sits above this layer)."""
    parent = Path(parent).absolute()
    state = read_state(parent)
    runs = state.get("runs") or {}
    studies = [study_summary(parent, s, runs.get(s["key"]) or {}, rest_s) for s in state.get("studies") or []]
    total_wall = round(sum(s["wall_s"] or 0 for s in studies), 1)
    total_report = round(sum(s["report_s"] or 0 for s in studies), 1)
    budgets = [s["budget"] for s in studies if s["budget"]]
    context = {"title": state.get("title") or f"Suite {state.get('suite')}", "suite": state.get("suite"),
               "quick": state.get("quick"), "started_utc": state.get("started_utc"), "parent": parent.name,
               "studies": studies, "total_wall_s": total_wall, "total_report_s": total_report,
               # (units are per study: u0 of one study is not u0 of another)
               "total_time_table": time_table({"time_budget": merge_budgets(budgets) | {"units": {}}})
               if budgets else None}
    md_path, html_path = parent / "index.md", parent / "index.html"
    md_path.write_text(render_template("suite.md.j2", context))
    html_path.write_text(render_template("suite.html.j2", context))
    return SuiteIndex(md_path, html_path, studies, total_wall)
