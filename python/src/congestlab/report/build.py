"""`congestlab report RUN_DIR`: report.md, report.html and PNG plots from stored files."""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path

from congestlab.analysis.run_analysis import read_csv
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
from congestlab.rundir import read_manifest


@dataclass
class Report:
    markdown_path: Path
    html_path: Path
    plots: list[Path]
    console: dict[str, list[list[str]]]
    warnings: list[str]


def build_report(run_dir: Path) -> Report:
    run_dir = Path(run_dir)
    manifest = read_manifest(run_dir)
    summary_path = run_dir / "summary.csv"
    if not summary_path.exists():
        raise RunDirError(f"{run_dir}: summary.csv is missing")
    summary = index_summary(read_csv(summary_path))
    spec = manifest["spec"]
    published = index_published(spec.get("published", []))
    levels = [lv["name"] for lv in spec["levels"]]
    servers = [s["name"] for s in spec["servers"]]
    plots: list[Path] = []
    sections = [f"# {spec.get('title') or spec['name']}", "",
                f"Source: {spec.get('source', '')}. Run `{run_dir.name}`, {manifest['repetitions']} repetitions, "
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
        console[server] = console_table(server, levels, summary, published)
    warnings = manifest.get("fidelity", {}).get("warnings", [])
    sections += ["## Fidelity", "", fidelity_table(manifest)]
    sections += _environment_lines(manifest)
    if warnings:
        sections += ["### Warnings", ""] + [f"- {w}" for w in warnings] + [""]
    problems = manifest.get("analysis", {}).get("problems", [])
    if problems:
        sections += ["### Requests not measured", ""] + [f"- {p}" for p in problems] + [""]
    markdown = "\n".join(sections)
    md_path = run_dir / "report.md"
    md_path.write_text(markdown)
    html_path = run_dir / "report.html"
    html_path.write_text(_html_page(spec.get("title") or spec["name"], markdown))
    return Report(md_path, html_path, plots, console, warnings)


def _environment_lines(manifest: dict) -> list[str]:
    env, timing, tb = manifest.get("environment", {}), manifest.get("timing", {}), manifest.get("testbed", {})
    lines = ["", f"- kernel {env.get('kernel')}, {env.get('cpus')} CPUs, congestlab {env.get('git_revision')}",
             f"- testbed up {tb.get('setup_s')} s, down {tb.get('teardown_s')} s; run {timing.get('wall_s')} s wall; "
             f"harness CPU {timing.get('harness_cpu_pct_of_one_core')} % of one core; machine busy "
             f"{timing.get('machine_cpu_busy_pct')} %"]
    for name, server in manifest.get("servers", {}).items():
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
