"""`congestlab report RUN_DIR`: report.md, report.html and PNG plots from stored files."""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path

import statistics

from congestlab.errors import RunDirError
from congestlab.report.plots import bar_plot
from congestlab.report.tables import (
    console_table,
    detail_table,
    fidelity_table,
    index_published,
    index_summary,
    metric_table,
)
from congestlab.results import read_results
from congestlab.rundir import read_manifest

SUMMARY_METRICS = ["delay_ms", "nrt_throughput_mbps", "captured_throughput_mbps", "goodput_mbps", "retransmissions"]


@dataclass
class Report:
    markdown_path: Path
    html_path: Path
    plots: list[Path]
    console: dict[str, tuple[tuple[str, ...], list[list[str]]]]  # title -> (header, rows)
    warnings: list[str]


def build_report(run_dir: Path) -> Report:
    run_dir = Path(run_dir)
    manifest = read_manifest(run_dir)
    requests = [r for r in read_results(run_dir, "request") if r["ok"] == "True"]
    if not requests:
        raise RunDirError(f"{run_dir}: results/request.csv holds no measured request")
    summary = index_summary(summarize(requests))
    spec = manifest["spec"]
    published = index_published([p for p in spec.get("published", []) if {"server", "level", "family"} <= set(p)])
    levels = _axis_labels(manifest, "level")
    servers = _axis_labels(manifest, "server")
    reps = sorted({p["repetitions"] for p in manifest["points"]})
    plots: list[Path] = []
    sections = [f"# {spec.get('title') or spec['name']}", "",
                f"Source: {spec.get('source', '')}. Run `{run_dir.name}`, {'/'.join(map(str, reps))} repetitions, "
                f"status {manifest['status']}.", ""]
    console = {}
    for server in servers:
        sections.append(f"## {server}")
        for kind in ("throughput", "delay"):
            sections.append(metric_table(server, kind, levels, summary, published))
            png = bar_plot(server, kind, levels, summary, published, run_dir / "plots" / f"{server}-{kind}.png")
            plots.append(png)
            sections.append(f"![{server} {kind}](plots/{png.name})\n")
        sections.append(detail_table(server, levels, summary))
        console[f"{server}: delay (ms) and NRT throughput (Mbit/s), ours vs study"] = (
            ("Level", "delay v4", "study", "delay v6", "study", "thr v4", "study", "thr v6", "study"),
            console_table(server, levels, summary, published))
    warnings = manifest.get("fidelity", {}).get("warnings", [])
    sections += ["## Fidelity", "", fidelity_table(manifest, _fidelity_per_point(run_dir, manifest))]
    sections += _environment_lines(manifest)
    if warnings:
        sections += ["### Warnings", ""] + [f"- {w}" for w in warnings] + [""]
    analysis = manifest.get("analysis", {})
    sections.append(f"- analysis {analysis.get('analysis_s')} s; rows {analysis.get('rows')}\n")
    problems = analysis.get("problems", [])
    if problems:
        sections += ["### Requests not measured", ""] + [f"- {p}" for p in problems] + [""]
    markdown = "\n".join(sections)
    md_path = run_dir / "report.md"
    md_path.write_text(markdown)
    html_path = run_dir / "report.html"
    html_path.write_text(_html_page(spec.get("title") or spec["name"], markdown))
    return Report(md_path, html_path, plots, console, warnings)


def _fidelity_per_point(run_dir: Path, manifest: dict) -> dict[tuple[str, str], dict]:
    """Background requested/achieved, bottleneck drops and CPU per (server, level), mean over repetitions."""
    import json

    background: dict[tuple[str, int], list[dict]] = {}
    for row in read_results(run_dir, "background"):
        background.setdefault((row["point_id"], int(row["repetition"])), []).append(row)
    out: dict[tuple[str, str], dict] = {}
    for point in manifest["points"]:
        reps = sorted(run_dir.glob(f"points/{point['id']}/r*/rep.json"))
        if not reps:
            continue
        acc = {"requested_bps": 0.0, "achieved_bps": 0.0, "drops": 0.0, "cpu_busy_pct": 0.0}
        for rep_json in reps:
            info = json.loads(rep_json.read_text())
            rows = background.get((point["id"], info["repetition"]), [])
            acc["requested_bps"] += sum(float(r["requested_bps"]) for r in rows) / len(reps)
            acc["achieved_bps"] += sum(float(r["achieved_bps"]) for r in rows) / len(reps)
            acc["drops"] += sum(info.get("bottleneck_drops", {}).values()) / len(reps)
            acc["cpu_busy_pct"] += info.get("cpu_busy_pct", 0.0) / len(reps)
        out[(point["axes"].get("server", ""), point["axes"].get("level", ""))] = acc
    return out


def _axis_labels(manifest: dict, axis: str) -> list[str]:
    return list(dict.fromkeys(p["axes"][axis] for p in manifest["points"] if axis in p["axes"]))


def summarize(rows: list[dict]) -> list[dict]:
    """Mean, sample standard deviation and n per server x level x family."""
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for row in rows:
        groups.setdefault((row["server"], row["level"], row["family"]), []).append(row)
    out = []
    for (server, level, family), members in groups.items():
        entry = {"server": server, "level": level, "family": family, "n": len(members)}
        for metric in SUMMARY_METRICS:
            values = [float(r[metric]) for r in members]
            entry[f"{metric}_mean"] = statistics.fmean(values)
            entry[f"{metric}_sd"] = statistics.stdev(values) if len(values) > 1 else 0.0
        out.append(entry)
    return out


def _environment_lines(manifest: dict) -> list[str]:
    env, timing, tb = manifest.get("environment", {}), manifest.get("timing", {}), manifest.get("testbed", {})
    lines = ["", f"- kernel {env.get('kernel')}, {env.get('cpus')} CPUs, congestlab {env.get('git_revision')}",
             f"- testbed up {tb.get('setup_s')} s, down {tb.get('teardown_s')} s; run {timing.get('wall_s')} s wall; "
             f"harness CPU {timing.get('harness_cpu_pct_of_one_core')} % of one core; machine busy "
             f"{timing.get('machine_cpu_busy_pct')} %"]
    for name, instances in manifest.get("servers", {}).items():
        server = instances[0]
        lines.append(f"- {name}: {server.get('version')}, congestion control requested {server.get('cc_requested')}, "
                     f"effective {server.get('cc_effective')}")
    cal = manifest.get("calibration")
    if cal:
        for fam, res in cal["families"].items():
            lines.append(f"- calibration {fam}: one iperf3 flow {res['measured_bps'] / 1e6:.2f} Mbit/s, ideal "
                         f"{res['ideal_bps'] / 1e6:.2f} Mbit/s (ratio {res['ratio']})")
    return lines + [""]


def _html_page(title: str, markdown: str) -> str:
    """A plain page: the Markdown as preformatted text, the plots as images."""
    body = []
    for line in markdown.splitlines():
        if line.startswith("![") and "](" in line:
            src = line.split("](", 1)[1].rstrip(")")
            body.append(f'<img src="{html.escape(src)}" style="max-width:100%">')
        else:
            body.append(html.escape(line))
    return (f"<!doctype html><meta charset=utf-8><title>{html.escape(title)}</title>"
            f"<pre style='font: 13px/1.4 monospace'>" + "\n".join(body) + "</pre>\n")
