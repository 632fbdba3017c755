"""report.md + plots/ of a tcp-lab run (spec/presets/tcp-lab.toml), from its run directory
alone: manifest.json (points, fidelity checks, the spec's `published` numbers) and
results/iperf.csv. The former tcplab/report.py, ported as it was onto the run directory of
the one runner; the report engine (issue 10) replaces it.

One plot per figure shaped like the study's Figures 2-13 (throughput against the varied
parameter), a table of the numbers, and what the study states beside ours.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path

from congestlab.errors import RunDirError
from congestlab.report.build import Report, _html_page
from congestlab.results import read_results
from congestlab.rundir import read_manifest

MEASURED_WORKLOAD = "iperf"  # the sessions of Figures 2-13 (the check_* experiments use others)
BDP_DELAY_MS = 80.0  # the BDP figure's one-way delay (the preset's bdp experiment sets it)
LOG_X = {"window_receiver", "window_sender", "length_receiver", "length_sender"}
MULTI = ("parallel", "udp1", "udp2")
# experiment -> (the study's figure, x label, x scale for display, what the study says)
FIGURES: dict[str, tuple[int, str, float, str]] = {
    "window_receiver": (2, "receiver window (bytes)", 1, "rises with the receiver's window to 94 Mbit/s at 10 KB, "
                        "then flat"),
    "window_sender": (3, "sender window (bytes)", 1, "rises (more slowly) to 94 Mbit/s at 10 KB, then flat"),
    "length_receiver": (4, "receiver length (bytes)", 1, "rises with the length, 94 Mbit/s from 64 KB on"),
    "length_sender": (5, "sender length (bytes)", 1, "like Figure 4: 94 Mbit/s from 64 KB on"),
    "rate": (6, "tbf rate (Mbit/s)", 1e-6, "a little below the rate up to 100 Mbit/s, 94 Mbit/s above"),
    "delay": (7, "one-way delay (ms)", 1, "94 Mbit/s without delay, falling linearly with delay"),
    "loss_30s": (8, "loss probability", 1, "94 Mbit/s without loss, falling exponentially with loss"),
    "loss_60s": (9, "loss probability", 1, "as Figure 8: duration does not change it"),
    "bdp": (10, "receiver window (bytes)", 1, "rises with the window up to 200 KB (window below the BDP)"),
    "parallel": (11, "TCP sessions", 1, "total stays 94 Mbit/s, each session r/n"),
    "udp1": (12, "TCP sessions", 1, "UDP 1 Mbit/s, total 94 Mbit/s, TCP sessions share the rest equally"),
    "udp2": (13, "TCP sessions", 1, "each UDP 1 Mbit/s, TCP sessions share 94 - 2 = 92 Mbit/s"),
}


@dataclass
class PointSummary:
    label: str  # the axis label (results' x column)
    x: float  # for plotting, in the figure's display unit
    tcp_mbps: list[float] = field(default_factory=list)
    udp_mbps: list[float] = field(default_factory=list)
    tcp_bytes: list[int] = field(default_factory=list)
    tcp_seconds: list[float] = field(default_factory=list)

    @property
    def tcp_total(self) -> float:
        """All TCP bytes over the longest session's interval: summing per-session rates would
        overstate it, as the sessions' intervals differ by up to a few hundred ms."""
        if self.tcp_bytes and max(self.tcp_seconds, default=0) > 0:
            return sum(self.tcp_bytes) * 8 / max(self.tcp_seconds) / 1e6
        return sum(self.tcp_mbps)

    @property
    def total(self) -> float:
        return self.tcp_total + sum(self.udp_mbps)

    @property
    def tcp_mean(self) -> float:
        return statistics.fmean(self.tcp_mbps) if self.tcp_mbps else 0.0

    @property
    def udp_mean(self) -> float | None:
        return statistics.fmean(self.udp_mbps) if self.udp_mbps else None


def summarize(rows: list[dict]) -> dict[str, list[PointSummary]]:
    """results/iperf.csv rows of the measured workload -> {experiment: [PointSummary by x]}
    (repetitions of a point pooled, as the old study ran one)."""
    by_exp: dict[str, dict[str, PointSummary]] = {}
    for row in rows:
        if row["workload"] != MEASURED_WORKLOAD:
            continue
        exp = row["experiment"]
        scale = FIGURES.get(exp, (0, "", 1, ""))[2]
        points = by_exp.setdefault(exp, {})
        summary = points.setdefault(row["x"], PointSummary(row["x"], float(row["x"]) * scale))
        mbps = float(row["throughput_mbps"])
        if row["protocol"] == "tcp":
            summary.tcp_mbps.append(mbps)
            if row.get("bytes") and mbps > 0:
                # each session's exact duration from iperf's own rate (its printed interval has 0.1 s steps)
                summary.tcp_bytes.append(int(row["bytes"]))
                summary.tcp_seconds.append(int(row["bytes"]) * 8 / (mbps * 1e6))
        else:
            summary.udp_mbps.append(mbps)
    return {exp: sorted(pts.values(), key=lambda p: p.x) for exp, pts in by_exp.items()}


def expectations(published: list[dict]) -> dict[tuple[str, str], dict[str, float]]:
    """The spec's published numbers by (experiment, x label)."""
    out = {}
    for entry in published:
        if "experiment" in entry and "x" in entry:
            out[(entry["experiment"], str(entry["x"]))] = {k: float(v) for k, v in entry.items()
                                                           if k not in ("experiment", "x") and v is not None}
    return out


def window_limit_mbps(window_bytes: float, rtt_ms: float) -> float:
    """Throughput a window allows per RTT (the BDP figure's model line)."""
    return window_bytes * 8 / (rtt_ms / 1000) / 1e6


def _fmt(v: float | None, digits: int = 2) -> str:
    return "" if v is None else f"{v:.{digits}f}"


def sweep_table(key: str, points: list[PointSummary], x_label: str, expect: dict) -> list[str]:
    multi = key in MULTI
    if multi:
        head = [x_label, "TCP total", "TCP per session (mean)", "min–max", "UDP per session", "total",
                "study: total", "study: TCP per session", "study: UDP per session"]
    else:
        head = [x_label, "throughput (Mbit/s)", "study"]
    if key == "bdp":
        head.append(f"window/RTT limit at {BDP_DELAY_MS:g} ms")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for p in points:
        exp = expect.get((key, p.label), {})
        if multi:
            cells = [f"{p.x:g}", _fmt(p.tcp_total), _fmt(p.tcp_mean),
                     f"{min(p.tcp_mbps):.2f}–{max(p.tcp_mbps):.2f}" if p.tcp_mbps else "",
                     _fmt(p.udp_mean, 3), _fmt(p.total), _fmt(exp.get("total_mbps")),
                     _fmt(exp.get("tcp_per_session_mbps")), _fmt(exp.get("udp_per_session_mbps"))]
        else:
            cells = [f"{p.x:g}", _fmt(p.total), _fmt(exp.get("total_mbps"))]
        if key == "bdp":
            cells.append(_fmt(window_limit_mbps(p.x, BDP_DELAY_MS)))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def plot_sweep(key: str, figure: int, title: str, x_label: str, points: list[PointSummary], expect: dict,
               path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [p.x for p in points]
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    if key in MULTI:
        ax.plot(xs, [p.total for p in points], "o-", label="total (ours)")
        ax.plot(xs, [p.tcp_mean for p in points], "s-", label="each TCP session (mean, ours)")
        for p in points:
            ax.scatter([p.x] * len(p.tcp_mbps), p.tcp_mbps, s=10, color="grey", zorder=3)
        if any(p.udp_mbps for p in points):
            ax.plot(xs, [p.udp_mean for p in points], "^-", label="each UDP session (ours)")
        stated = [(p.x, expect.get((key, p.label), {}).get("tcp_per_session_mbps")) for p in points]
        stated = [(x, v) for x, v in stated if v is not None]
        if stated:
            ax.plot(*zip(*stated), "k--", lw=1, label="study: TCP share (94 - UDP)/n")
        ax.axhline(94.0, color="k", ls=":", lw=1, label="study: total 94 Mbit/s")
    else:
        ax.plot(xs, [p.total for p in points], "o-", label="ours (server-side iperf 2)")
        stated = [(p.x, expect.get((key, p.label), {}).get("total_mbps")) for p in points]
        stated = [(x, v) for x, v in stated if v is not None]
        if stated:
            ax.plot(*zip(*stated), "kx", ms=8, label="study states 94 Mbit/s")
        if key == "bdp":
            ax.plot(xs, [min(window_limit_mbps(x, BDP_DELAY_MS), 100) for x in xs], "k--", lw=1,
                    label=f"window / RTT ({BDP_DELAY_MS:g} ms)")
        if key == "rate":
            ax.plot(xs, [min(x, 100) for x in xs], "k:", lw=1, label="configured rate (capped by cable)")
    if key in LOG_X:
        ax.set_xscale("log")
    ax.set_xlabel(x_label)
    ax.set_ylabel("throughput (Mbit/s)")
    ax.set_title(f"Fig. {figure}: {title}", fontsize=10)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _duration_s(manifest: dict, experiment: str) -> float | None:
    for point in manifest["points"]:
        if point["experiment"] == experiment:
            value = point["settings"].get(f"workloads.{MEASURED_WORKLOAD}.duration_s")
            if value is not None:
                return float(value)
    for w in manifest["spec"]["workloads"]:
        if w["name"] == MEASURED_WORKLOAD:
            return float(w["duration_s"])
    return None


def build_report(run_dir: Path) -> Report:
    run_dir = Path(run_dir)
    manifest = read_manifest(run_dir, require_complete=False)
    if manifest.get("study") != "tcp-lab":
        raise RunDirError(f"{run_dir}: study {manifest.get('study')!r} is not tcp-lab")
    spec = manifest["spec"]
    results = summarize(read_results(run_dir, "iperf"))
    expect = expectations(spec.get("published", []))
    plots_dir = run_dir / "plots"
    plots_dir.mkdir(exist_ok=True)
    emulation = manifest.get("testbed", {}).get("link_emulation", {})
    timing = manifest.get("timing", {})
    md = [f"# {spec.get('title') or spec['name']}", ""]
    md.append(f"Source: {spec.get('source', '')}. Run status **{manifest.get('status')}**"
              + (f" ({manifest['error']})" if manifest.get("error") else "")
              + f"; quick: {manifest.get('quick')}; emulator for delay/loss: **{emulation.get('emulator', '?')}**"
              + f" (netem available: {emulation.get('netem_available')}); "
              + f"wall time {timing.get('wall_s', '?')} s; iperf: {manifest.get('tools', {}).get('iperf', '?')}.")
    md += ["", "Throughput is what the iperf 2 server (host b) reported, as in the study. The line: a — r — b, "
           "100 Mbit/s HTB + FIFO (1000 packets) both ways on r's link to b (the study's Fast Ethernet cable); "
           "tbf, delay and loss on a→b as in the study. Congestion control cubic.", ""]
    checks = manifest.get("fidelity", {}).get("checks", [])
    if checks:
        md += ["## Fidelity checks", "", "| check | ok | value | expected | detail |", "|---|---|---|---|---|"]
        for c in checks:
            md.append(f"| {c['name']} | {'yes' if c['ok'] else '**NO**'} | {c['value']} | {c['expected']} "
                      f"| {c['message']} |")
        md.append("")
    plots: list[Path] = []
    console_rows: list[list[str]] = []
    titles = {e["name"]: e.get("title", e["name"]) for e in spec["experiments"]}
    ran = list(dict.fromkeys(p["experiment"] for p in manifest["points"]))
    for key in ran:
        if key not in FIGURES:
            continue
        figure, x_label, _, says = FIGURES[key]
        points = results.get(key)
        duration = _duration_s(manifest, key)
        md += [f"## Figure {figure}: {titles.get(key, key)}", "",
               f"{duration:g} s per point. The study: {says}." if duration else f"The study: {says}.", ""]
        if not points:
            md += ["(no results: the run stopped before this figure)", ""]
            continue
        png = plots_dir / f"fig{figure:02d}_{key}.png"
        plot_sweep(key, figure, titles.get(key, key), x_label, points, expect, png)
        plots.append(png)
        md += [f"![Figure {figure}](plots/{png.name})", ""]
        md += sweep_table(key, points, x_label, expect) + [""]
        for p in points:
            console_rows.append([f"{figure}", key, f"{p.x:g}", _fmt(p.total),
                                 _fmt(expect.get((key, p.label), {}).get("total_mbps"))])
    warnings = manifest.get("fidelity", {}).get("warnings", [])
    if warnings:
        md += ["## Warnings", ""] + [f"- {w}" for w in warnings] + [""]
    md_path = run_dir / "report.md"
    markdown = "\n".join(md) + "\n"
    md_path.write_text(markdown)
    html_path = run_dir / "report.html"
    html_path.write_text(_html_page(spec.get("title") or spec["name"], markdown))
    console = {"tcp-lab: total throughput at the server (Mbit/s), ours vs study":
               (("Fig.", "experiment", "x", "ours", "study"), console_rows)}
    return Report(md_path, html_path, plots, console, warnings)
