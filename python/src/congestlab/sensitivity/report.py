"""sensitivity.md, sensitivity.html and plots/ of a sensitivity run, from its stored run
directories only (no root): per configuration the distance to the published numbers and the
claims' verdicts (report/claims/), then which findings are robust, depend on the
configuration, or never reproduce (distance.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from congestlab.errors import CongestlabError, RunDirError
from congestlab.report.claims import evaluate_claims
from congestlab.report.data import RunData
from congestlab.report.engine import Console, data_uri, verdict_class
from congestlab.report.render import render_template
from congestlab.rundir import read_json_file
from congestlab.sensitivity.distance import (DEPENDS, NEVER, ROBUST, WITHIN_25_PCT, CellDistance, Distance, best,
                                             distance, robustness)
from congestlab.sensitivity.configurations import value_labels
from congestlab.sensitivity.figures import distance_plot, verdict_plot
from congestlab.sensitivity.sweep_run import STATE
from congestlab.spec import load_preset, load_spec
from congestlab.spec.fieldpath import FieldPathError, get_field
from congestlab.spec.models import AxisSpec
from congestlab.study import child_status


@dataclass
class SensitivityReport:
    markdown_path: Path
    html_path: Path
    plots: list[Path]
    warnings: list[str] = field(default_factory=list)
    console: Console = field(default_factory=dict)
    distances: dict[str, Distance] = field(default_factory=dict)
    verdicts: dict[str, dict[str, str]] = field(default_factory=dict)


def published_cells(data: RunData) -> list[CellDistance]:
    """One cell per published value of a declared metric: the seed's number and our mean
    over the repetitions of the same selection."""
    cells = []
    for entry in data.published:
        where = {k: v for k, v in entry.items() if k not in data.report.metrics}
        for metric_name in (k for k in entry if k in data.report.metrics and entry[k] is not None):
            stats = data.stats(data.report.metrics[metric_name], where)
            label = " ".join(f"{k}={v}" for k, v in where.items())
            cells.append(CellDistance(label, metric_name, float(entry[metric_name]), stats.mean))
    return cells


def _as_written(state: dict) -> str | None:
    """The configuration whose every field has the preset's own value (today's preset)."""
    name = state["preset"]
    try:
        base = (load_spec(Path(name)) if name.endswith(".toml") else load_preset(name)).model_dump(mode="json")
    except CongestlabError:
        return None
    for config in state["configurations"]:
        try:
            if all(get_field(base, path) == value for path, value in config["settings"].items()):
                return config["id"]
        except FieldPathError:
            continue
    return None


def _fmt_log(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f} (×{math.exp(value):.2f})"


def build_sensitivity_report(parent: Path) -> SensitivityReport:
    parent = Path(parent)
    state_path = parent / STATE
    if not state_path.exists():
        raise RunDirError(f"{parent}: no {STATE} (not a sensitivity run directory)")
    state = read_json_file(state_path)
    runs = state.get("runs") or {}
    configs = state["configurations"]
    axes = [a["name"] for a in state["axes"]]
    distances: dict[str, Distance] = {}
    verdicts: dict[str, dict[str, str]] = {}
    claims_meta: dict[str, dict] = {}
    check_verdicts: dict[str, dict[tuple[str, str], str]] = {}
    rows, warnings = [], []
    for config in configs:
        cid = config["id"]
        run = runs.get(cid) or {}
        run_dir = parent / (run.get("dir") or f"configs/{cid}")
        row = {"id": cid, "labels": [config["labels"][a] for a in axes], "status": run.get("status", "not run"),
               "wall_s": run.get("wall_s"), "load": run.get("load_avg_1m"), "href": f"{run_dir.relative_to(parent)}/report.html",
               "md_href": f"{run_dir.relative_to(parent)}/report.md", "error": run.get("error", ""), "not_ok": "",
               "fidelity_warnings": "–"}
        if row["status"] == "not run":  # the sweep records a configuration once it ends
            row["status"] = child_status(run_dir) or "not run"
            if row["status"] != "complete":
                rows.append(row)
                continue
        try:
            data = RunData(run_dir)
        except RunDirError as err:
            row["status"] = "incomplete" if row["status"] == "complete" else row["status"]
            warnings.append(f"{cid}: {err}")
            rows.append(row)
            continue
        row["status"] = "complete"
        row["not_ok"] = _requests_not_ok(data)
        # e.g. the background short of its rate on a loaded machine: the configuration's own report lists them
        row["fidelity_warnings"] = len(data.manifest["fidelity"]["warnings"])
        distances[cid] = distance(published_cells(data))
        findings = evaluate_claims(data)
        verdicts[cid] = {f.claim.id: f.verdict for f in findings}
        # a claim holds only when every check does: its single checks say which parts are robust
        check_verdicts[cid] = {(f.claim.id, c.label): c.verdict for f in findings for c in f.checks}
        for f in findings:
            claims_meta.setdefault(f.claim.id, {"id": f.claim.id, "title": f.claim.title, "property": f.claim.property})
        rows.append(row)
    as_written, nearest = _as_written(state), best(distances)
    for row in rows:
        d = distances.get(row["id"])
        row |= {"median": _fmt_log(d.median if d else None), "worst": _fmt_log(d.worst if d else None),
                "median_value": d.median if d else None,
                "measured": f"{d.measured}/{len(d.cells)}" if d else "–",
                "within": f"{d.within()}/{d.measured}" if d else "–",
                "furthest": [_cell_context(c) for c in d.furthest()] if d else [],
                "marks": ", ".join(m for m, on in (("the preset as written", row["id"] == as_written),
                                                    ("nearest", row["id"] == nearest)) if on)}
    rows.sort(key=lambda r: (r["median_value"] is None, r["median_value"] or 0))
    robust = robustness(verdicts)
    measured_ids = [r["id"] for r in rows if r["id"] in verdicts]
    matrix = [{"claim": claims_meta[r.claim], "category": r.category,
               "verdicts": [{"verdict": r.verdicts[c], "css": verdict_class(r.verdicts[c])} for c in measured_ids],
               "holds_in": len(r.holds_in)} for r in robust]
    per_check = robustness(check_verdicts)
    for line in matrix:
        mine = [r for r in per_check if r.claim[0] == line["claim"]["id"]]
        line["checks"] = {name: [r.claim[1] for r in mine if r.category == name] for name in (ROBUST, DEPENDS, NEVER)}
    cells = _cell_matrix(distances, measured_ids)
    plots_dir = parent / "plots"
    plots = []
    figures = []
    if distances:
        for fig in (distance_plot(rows, plots_dir), verdict_plot(matrix, measured_ids, plots_dir)):
            if fig is None:
                continue
            figures.append({"title": fig["title"], "svg_uri": data_uri(fig["svg"], "image/svg+xml"),
                            "png_href": str(fig["png"].relative_to(parent)),
                            "svg_href": str(fig["svg"].relative_to(parent))})
            plots += [fig["png"], fig["svg"]]
    wall = sum(r.get("wall_s") or 0 for r in runs.values())
    context = {
        "title": f"Sensitivity of {state['preset']} to the lab's unknowns",
        "preset": state["preset"], "quick": state["quick"], "started": state.get("started_utc", ""),
        "wall_min": round(wall / 60, 1),
        "axes": [{"name": a["name"], "fields": a["fields"], "labels": value_labels(AxisSpec.model_validate(a))}
                 for a in state["axes"]], "axis_names": axes, "rows": rows,
        "as_written": as_written, "nearest": nearest, "limit": f"{WITHIN_25_PCT:.3f}",
        "matrix": matrix, "config_ids": measured_ids, "cells": cells, "figures": figures, "warnings": warnings,
        "groups": [{"name": name, "claims": [m for m in matrix if m["category"] == name]}
                   for name in (ROBUST, DEPENDS, NEVER)],
    }
    md_path, html_path = parent / "sensitivity.md", parent / "sensitivity.html"
    md_path.write_text(render_template("sensitivity.md.j2", context))
    html_path.write_text(render_template("sensitivity.html.j2", context))
    console: Console = {"distance to the published numbers, per configuration": (
        ("configuration", "median |ln ratio|", "worst", "cells within 25 %", "status", ""),
        [[r["id"], r["median"], r["worst"], r["within"], r["status"], r["marks"]] for r in rows])}
    if matrix:
        console["findings across configurations"] = (
            ("claim", "category", "holds in"),
            [[m["claim"]["id"], m["category"], f"{m['holds_in']}/{len(measured_ids)}"] for m in matrix])
    return SensitivityReport(md_path, html_path, plots, warnings, console, distances, verdicts)


def _requests_not_ok(data: RunData) -> str:
    """Measured requests that failed (timeout, reset): a cell's mean is over the others, so
    a configuration that loses its slowest GETs looks faster than it was."""
    if "request" not in data.kinds_present():
        return "–"
    rows = data.rows("request")
    return f"{sum(r.get('ok') in ('False', '0', 'false') for r in rows)}/{len(rows)}"


def _cell_context(c: CellDistance) -> dict:
    return {"cell": c.cell, "metric": c.metric, "published": f"{c.published:g}",
            "ours": "–" if c.ours is None else f"{c.ours:.3g}",
            "ratio": "–" if c.ratio is None else f"{c.ratio:.2f}"}


def _cell_matrix(distances: dict[str, Distance], config_ids: list[str]) -> list[dict]:
    """Every published cell: ours / published in each configuration (the cells that resist
    every configuration show here)."""
    order: dict[tuple[str, str], dict] = {}
    for cid in config_ids:
        for c in distances[cid].cells:
            line = order.setdefault((c.metric, c.cell), {"metric": c.metric, "cell": c.cell,
                                                         "published": f"{c.published:g}", "ratios": {}})
            line["ratios"][cid] = c.ratio
    out = []
    for line in order.values():
        ratios = [line["ratios"].get(cid) for cid in config_ids]
        near = [r for r in ratios if r is not None]
        line["texts"] = ["–" if r is None else f"{r:.2f}" for r in ratios]
        line["flags"] = [r is not None and abs(math.log(r)) <= WITHIN_25_PCT for r in ratios]
        line["best"] = "–" if not near else f"{min(near, key=lambda r: abs(math.log(r))):.2f}"
        out.append(line)
    return out
