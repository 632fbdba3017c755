"""`build_report(run_dir)`: report.md, report.html and plots/ of a run
directory, from its stored files only (no root): the declared tables and plots, the claims'
verdicts (findings first), fidelity, settings, tool versions and links to every point's files.
"""

from __future__ import annotations

import base64
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from congestlab.analysis.drift import drift_summary
from congestlab.errors import SpecError
from congestlab.report.cell_testbed import RepInfo, add_testbed_columns
from congestlab.report.cells import TableView, build_table
from congestlab.report.claims import (DESCRIPTIVE, FAILS, HOLDS, INCONCLUSIVE, NOT_MEASURED, ClaimResult,
                                      evaluate_claims)
from congestlab.report.claims.study_errors import study_line
from congestlab.report.coverage import coverage
from congestlab.report.data import RunData
from congestlab.report.figures import Figure, Source, render_plot
from congestlab.report.panel_index import panel_context, table_cells
from congestlab.report.render import render_template
from congestlab.report.sequential_view import apply_sequential, reread_text, sequential_text
from congestlab.report.time_table import record_report_s, time_table
from congestlab.spec.report import check_references

VERDICT_ORDER = [FAILS, INCONCLUSIVE, HOLDS, DESCRIPTIVE, NOT_MEASURED]


# the CLI's summary: title -> (header, rows), as report/terminal.py print_report prints it
Console = dict[str, tuple[tuple[str, ...], list[list[str]]]]


@dataclass
class Report:
    markdown_path: Path
    html_path: Path
    plots: list[Path]
    warnings: list[str]
    console: Console = field(default_factory=dict)
    findings: list[ClaimResult] = field(default_factory=list)

    @property
    def failed_properties(self) -> list[ClaimResult]:
        return [f for f in self.findings if f.property_failed]


@dataclass
class Section:
    title: str
    tables: list[TableView] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    panels: dict[str, list[dict]] = field(default_factory=dict)  # table id -> its cells' panels


def build_report(run_dir: Path, panels: bool = False) -> Report:
    """`panels`: also draw every cell's panels (report/panel_index.py; they cost more than
    the rest of the report, docs/reports.md)."""
    started = time.monotonic()
    run_dir = Path(run_dir)
    data = RunData(run_dir)
    # the study's declared axes, not only the run's: a --quick that leaves experiments out
    # (e.g. the rto preset's E3 and E4) still declares their tables, which read "not measured"
    declared = [a.get("name") for e in data.spec.get("experiments") or [] for a in e.get("axes") or []]
    try:
        check_references(data.report, list(dict.fromkeys([*data.axes, *filter(None, declared)])), data.published)
    except ValueError as err:
        raise SpecError("report", str(err)) from None
    warnings: list[str] = list(data.manifest["fidelity"]["warnings"])
    measured = coverage(data)
    if measured.warning():
        warnings.append(measured.warning())
    sections: dict[str, Section] = {}
    reps = RepInfo(run_dir)
    cell_panels = panel_context(data, run_dir, reps, draw=panels)
    for table_spec in data.report.tables:
        view = add_testbed_columns(data, build_table(data, table_spec), reps)
        section = sections.setdefault(table_spec.section or "Tables", Section(table_spec.section or "Tables"))
        section.tables.append(view)
        section.panels[table_spec.id] = table_cells(view, cell_panels)
    plots_dir = run_dir / "plots"
    plots: list[Path] = []
    for plot in data.report.plots:
        figure = render_plot(plot, [Source("", data)], plots_dir)
        section = sections.setdefault(plot.section or "Figures", Section(plot.section or "Figures"))
        if figure is None:
            continue
        section.figures.append(figure)
        plots += [figure.png, figure.svg]
    findings = run_findings(data)
    context = page_context(data, list(sections.values()), findings, warnings, run_dir)
    context["run"] |= {"planned": measured.planned, "measured": measured.measured}
    context["not_measured"], context["unplanned"] = measured.not_measured, measured.unplanned
    context["time_table"] = time_table(data.manifest, time.monotonic() - started)
    context["panels"] = [{k: v for k, v in p.items() if k != "rows"} for p in cell_panels]
    context["panels_drawn"] = sum(p["png_href"] is not None for p in cell_panels)
    md_path, html_path = run_dir / "report.md", run_dir / "report.html"
    md_path.write_text(render_template("report.md.j2", context))
    html_path.write_text(render_template("report.html.j2", context))
    record_report_s(run_dir, time.monotonic() - started)
    return Report(md_path, html_path, plots, warnings, console_tables(findings, data), findings)


def run_findings(data: RunData) -> list[ClaimResult]:
    """The claims' verdicts as the report shows them: a run --until-decisive's own sequential
    verdicts where it has them (report/sequential_view.py), else evaluated here."""
    findings = evaluate_claims(data)
    apply_sequential(findings, data.manifest)
    return findings


def console_tables(findings: list[ClaimResult], data: RunData) -> Console:
    rows = [[f.claim.id, f.verdict + (f" ({f.coverage})" if f.verdict not in (NOT_MEASURED, DESCRIPTIVE) else "")
             + (f", needs {f.rounds_needed} reps" if f.rounds_needed else "")
             + (f", round {f.sequential['round']}" if f.sequential else ""),
             ("[property] " if f.claim.property else "") + f.claim.title] for f in findings]
    title = f"{data.report.title or data.spec.get('title') or data.spec.get('name')}: the seed's claims"
    return {title: (("claim", "verdict (checks tested)", "statement"), rows)} if rows else {}


def data_uri(path: Path, mime: str) -> str:
    return f"data:{mime};base64," + base64.b64encode(path.read_bytes()).decode()


def verdict_class(verdict: str) -> str:
    return {HOLDS: "holds", FAILS: "fails", INCONCLUSIVE: "inconclusive", NOT_MEASURED: "unmeasured",
            DESCRIPTIVE: "descriptive"}[verdict]


def claim_rule(f: ClaimResult) -> str:
    """How the claim's verdict follows from its checks, with its numbers."""
    d = f.decision
    if d is None:
        return ""
    text = (f"holds when every declared check was tested and holds (intersection–union, each at {d.alpha:g} per "
            f"side), does not hold when one does after Holm over the {len(d.cells)} tested; smallest adjusted "
            f"p(does not hold) "
            f"{d.p_fails:.3g}; n={d.n}, censored {d.censored}, invalid {d.invalid}")
    if f.verdict == INCONCLUSIVE and not f.sequential:
        need = f.rounds_needed
        text += ("; a power estimate (80 %) says " + (f"{need} repetitions decide it" if need is not None else
                 "nothing up to 200 repetitions, or no estimate for some check"))
    if f.gaps:
        text += "; cannot hold, declared but not measured: " + ", ".join(f.gaps)
    descriptive = sum(c.verdict == DESCRIPTIVE for c in f.checks)
    if descriptive:
        text += f"; {descriptive} check{'s' if descriptive != 1 else ''} descriptive (no test at this n)"
    return text


def finding_context(f: ClaimResult, limit: int = 3) -> dict:
    ranked = sorted(f.checks, key=lambda c: VERDICT_ORDER.index(c.verdict))
    counts = {v: sum(c.verdict == v for c in f.checks) for v in VERDICT_ORDER}
    return {
        "rule": claim_rule(f), "points": len(f.points),
        "rounds_needed": f.rounds_needed if not f.sequential else f.sequential.get("rounds_needed"),
        "sequential": sequential_text(f), "reread": reread_text(f),
        "id": f.claim.id, "title": f.claim.title, "property": f.claim.property, "seed": f.claim.seed,
        "seed_numbers": f.claim.seed_numbers, "verdict": f.verdict, "css": verdict_class(f.verdict),
        "coverage": f.coverage, "counts": {k: v for k, v in counts.items() if v},
        "why_descriptive": "; ".join(dict.fromkeys(c.detail.removeprefix("descriptive, not tested: ")
                                                   for c in f.checks if c.verdict == DESCRIPTIVE)),
        "shown": [{"label": c.label, "ours": c.ours, "verdict": c.verdict} for c in ranked[:limit]],
        "more": max(0, len(ranked) - limit),
        "checks": [{"label": c.label, "verdict": c.verdict, "css": verdict_class(c.verdict), "ours": c.ours,
                    "seed": c.seed, "detail": c.detail + (f"; needs {c.rounds_needed} repetitions (power 80 %)"
                                                          if c.rounds_needed else "")} for c in f.checks],
    }


def _point_files(run_dir: Path, data: RunData) -> list[dict]:
    out = []
    root = run_dir / "points"
    for point in data.points:
        pdir = root / point.get("id", "")
        reps = []
        if pdir.is_dir():
            for rdir in sorted(p for p in pdir.iterdir() if p.is_dir()):
                files = sorted(f for f in rdir.rglob("*") if f.is_file())
                reps.append({"name": rdir.name, "files": [{"name": str(f.relative_to(rdir)),
                                                           "href": os.path.relpath(f, run_dir)} for f in files]})
        out.append({"id": point.get("id"), "axes": point.get("axes", {}), "reps": reps})
    return out


def _value(v) -> str:

    return json.dumps(v, ensure_ascii=False) if isinstance(v, (dict, list)) else str(v)


def _servers(servers: dict) -> dict[str, str]:
    """server -> one line per instance: version, node, effective congestion control, knobs."""
    out = {}
    for name, instances in servers.items():
        lines = []
        for inst in instances if isinstance(instances, list) else [instances]:
            if not isinstance(inst, dict):
                continue
            knobs = ", ".join(f"{k}={v}" for k, v in (inst.get("knobs") or {}).items())
            lines.append(f"{inst.get('instance', '')} {inst.get('version', '?')} on {inst.get('node', '?')}"
                         + (f", cc {inst.get('cc_effective')}" if inst.get("cc_effective") else "")
                         + (f", {knobs}" if knobs else ""))
        out[name] = "; ".join(lines)
    return out


def _testbed(m: dict) -> dict[str, str]:
    tb = m.get("testbed") or {}
    out = {k: str(tb[k]) for k in ("prefix", "setup_s", "teardown_s") if k in tb}
    if tb.get("namespaces"):
        out["namespaces"] = str(len(tb["namespaces"]))
    if tb.get("link_emulation"):
        out["link emulation"] = _value(tb["link_emulation"])[:400]
    per_host = (m.get("congestion_control") or {}).get("per_host")
    if per_host:
        out["congestion control"] = ", ".join(f"{h} {cc}" for h, cc in per_host.items())
    return out


def _settings(spec: dict) -> list[tuple[str, str]]:
    """The spec's main settings as (what, value) lines (the whole spec is in manifest.json)."""
    lines = []
    for server in spec.get("servers") or []:
        extra = ", ".join(f"{k}={v}" for k, v in (server.get("knobs") or {}).items())
        lines.append((f"server {server.get('name')}", f"{server.get('kind')} on {server.get('node')}"
                      + ("" if server.get("kind") == "lean" else f", cc {server.get('cc')}")
                      + (f", {extra}" if extra else "")))
    for w in spec.get("workloads") or []:
        params = ", ".join(f"{k}={_value(v)}" for k, v in w.items() if k not in ("name", "kind") and v not in (None, [], {}))
        lines.append((f"workload {w.get('name')}", f"{w.get('kind')}: {params}"))
    for exp in spec.get("experiments") or []:
        for axis in exp.get("axes") or []:
            labels = axis.get("labels") or axis.get("levels") or axis.get("values")
            lines.append((f"axis {exp.get('name')}.{axis.get('name')}", ", ".join(map(str, labels or []))))
    for key in ("repetitions", "order", "seed", "warmup_s", "gap_s"):
        if key in spec:
            lines.append((key, str(spec[key])))
    if spec.get("quick"):
        lines.append(("quick", ", ".join(f"{k}={_value(v)}" for k, v in spec["quick"].items() if v not in (None, [], {}))))
    for level in spec.get("levels") or []:
        lines.append((f"level {level.get('name')}", ", ".join(f"{k} = {_value(v)}" for k, v in (level.get("set") or {}).items())
                      or "the spec as written"))
    return lines


def page_context(data: RunData, sections: list[Section], findings: list[ClaimResult], warnings: list[str],
                 run_dir: Path) -> dict:
    m, spec = data.manifest, data.spec
    reps = sorted({p.get("repetitions") for p in data.points if p.get("repetitions") is not None})
    fidelity = m.get("fidelity") or {}
    for section in sections:
        for fig in section.figures:
            fig.svg_uri = data_uri(fig.svg, "image/svg+xml")
            fig.png_href = os.path.relpath(fig.png, run_dir)
            fig.svg_href = os.path.relpath(fig.svg, run_dir)
    counts = {v: sum(f.verdict == v for f in findings) for v in VERDICT_ORDER}
    return {
        "title": data.report.title or spec.get("title") or spec.get("name") or m.get("study"),
        "source": spec.get("source", ""),
        "intro": data.report.intro,
        "run": {"name": run_dir.name, "study": m.get("study"), "preset": m.get("preset"), "quick": m.get("quick"),
                "status": m.get("status"), "points": len(data.points),
                "repetitions": "–".join(map(str, [reps[0], reps[-1]] if len(reps) > 1 else reps)) or "?",
                "wall_s": (m.get("timing") or {}).get("wall_s"), "axes": data.axes,
                "git_revision": (m.get("environment") or {}).get("git_revision"), "error": m.get("error")},
        "findings": [finding_context(f) for f in findings if f.verdict != DESCRIPTIVE],
        "descriptive_findings": [finding_context(f) for f in findings if f.verdict == DESCRIPTIVE],
        "all_findings": [finding_context(f) for f in findings],
        "verdict_counts": {k: v for k, v in counts.items() if v},
        "study_line": study_line(findings),
        "sequential": any(f.sequential for f in findings),
        "warnings": warnings,
        "sections": [s for s in sections if s.tables or s.figures],
        "empty_plots": [p.id for p in data.report.plots
                        if not any(f.id == p.id for s in sections for f in s.figures)],
        "fidelity_checks": fidelity["checks"],
        "settings": _settings(spec),
        "environment": m.get("environment") or {},
        "tools": m.get("tools") or {},
        "servers": _servers(m.get("servers") or {}),
        "testbed": _testbed(m),
        "timing": m.get("timing") or {},
        "time_table": time_table(m),
        "problems": (m.get("analysis") or {}).get("problems") or [],
        "drift": drift_summary((m.get("analysis") or {}).get("drift") or []),
        "results": [f"results/{k}.csv" for k in data.kinds_present()],
        "points": _point_files(run_dir, data),
        "claims_declared": bool(data.report.claims),
    }

