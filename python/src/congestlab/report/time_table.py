"""The "where the time went" table of a report, from the manifest's time_budget
(runner/time_budget.py, docs/time-budget.md): seconds and share of the wall time per
category, in total and per unit, with a stacked bar's segments for the HTML page."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from congestlab.rundir import read_manifest, write_manifest

# the order of runner/time_budget.CATEGORIES (the report layer reads manifests, not the runner)
CATEGORIES = ("setup", "server_restart", "warmup", "measure", "timeout_wait", "teardown", "analysis", "other")
LABELS = {"setup": "set-up", "server_restart": "server (re)starts", "warmup": "warm-ups",
          "measure": "measured requests", "timeout_wait": "waits for timeouts", "teardown": "teardown",
          "analysis": "analysis", "other": "other"}
COLOURS = {"setup": "#8c8c8c", "server_restart": "#d62728", "warmup": "#ff7f0e", "measure": "#2ca02c",
           "timeout_wait": "#9467bd", "teardown": "#7f7f7f", "analysis": "#1f77b4", "other": "#c7c7c7"}


@dataclass
class TimeTable:
    wall_s: float
    rows: list[dict] = field(default_factory=list)  # category, label, seconds, pct, colour
    units: list[dict] = field(default_factory=list)  # unit, runs, wall_s, per-category seconds
    unit_columns: list[str] = field(default_factory=list)
    node_seconds_s: float | None = None  # a cluster run: the nodes' summed time
    report_s: float | None = None  # building the report: after the run, outside its wall time

    sum_s: float = 0.0  # of the categories before rounding: equals wall_s when they add up


def time_table(manifest: dict, report_s: float | None = None) -> TimeTable | None:
    """None for a run recorded before the time budget existed. `report_s`: this build's
    time so far (default: the last build's, as recorded in the manifest)."""
    budget = manifest.get("time_budget")
    if not budget:
        return None
    cats = budget.get("categories_s") or {}
    base = budget.get("node_seconds_s") or budget.get("wall_s") or sum(cats.values()) or 1.0
    rows = [{"category": c, "label": LABELS.get(c, c), "seconds": round(cats.get(c, 0.0), 1),
             "pct": round(100 * cats.get(c, 0.0) / base, 1), "colour": COLOURS.get(c, "#999")}
            for c in [*CATEGORIES, *(k for k in cats if k not in CATEGORIES)] if cats.get(c)]
    unit_columns = [c for c in CATEGORIES if any((u or {}).get(c) for u in (budget.get("units") or {}).values())]
    units = [{"unit": name, "runs": per.get("runs", 0), "wall_s": round(per.get("wall_s", 0.0), 1),
              "cells": [round(per.get(c, 0.0), 1) for c in unit_columns]}
             for name, per in sorted((budget.get("units") or {}).items(), key=lambda kv: _unit_order(kv[0]))]
    if report_s is None:
        report_s = budget.get("report_s")
    return TimeTable(round(budget.get("wall_s", 0.0), 1), rows, units, [LABELS[c] for c in unit_columns],
                     budget.get("node_seconds_s"), None if report_s is None else round(report_s, 1),
                     round(sum(cats.values()), 1))


def record_report_s(run_dir: Path, seconds: float) -> None:
    """The report's build time into manifest.json's time_budget (the run's wall time does not
    include it; a rebuild replaces it). A run without a budget is left as it is."""
    manifest = read_manifest(run_dir, require_complete=False)
    if manifest.get("time_budget"):
        manifest["time_budget"]["report_s"] = round(seconds, 3)
        write_manifest(run_dir, manifest)


def _unit_order(name: str) -> tuple[int, str]:
    digits = name.lstrip("u")
    return (int(digits), name) if digits.isdigit() else (1 << 30, name)
