"""report.md + plots/ of a tcp-lab run, from its run directory alone (manifest.json, results.csv).

One plot per task shaped like the study's Figures 2-13 (throughput against the varied
parameter), a table of the numbers, and what the study states beside ours.
"""

from __future__ import annotations

import csv
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from congestlab.rundir import read_manifest
from congestlab.tcplab.sweeps import (BDP_DELAY_MS, STUDY_MAX_MBPS, Network, Point, study_expectation,
                                      window_limit_mbps)

LOG_X = {"window_receiver", "window_sender", "length_receiver", "length_sender"}


@dataclass
class PointSummary:
    x: float
    tcp_mbps: list[float] = field(default_factory=list)
    udp_mbps: list[float] = field(default_factory=list)
    tcp_sessions: int = 1
    udp_sessions: int = 0
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


def read_results(path: Path) -> dict[str, list[PointSummary]]:
    """results.csv -> {sweep: [PointSummary in point order]}."""
    by_sweep: dict[str, dict[int, PointSummary]] = defaultdict(dict)
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            points = by_sweep[row["sweep"]]
            index = int(row["point"])
            summary = points.setdefault(index, PointSummary(float(row["x"]), tcp_sessions=int(row["tcp_sessions"]),
                                                            udp_sessions=int(row["udp_sessions"])))
            target = summary.tcp_mbps if row["protocol"] == "tcp" else summary.udp_mbps
            target.append(float(row["throughput_mbps"]))
            if row["protocol"] == "tcp" and row.get("bytes") and float(row["throughput_mbps"]) > 0:
                # each session's exact duration from iperf's own rate (its printed interval has 0.1 s steps)
                summary.tcp_bytes.append(int(row["bytes"]))
                summary.tcp_seconds.append(int(row["bytes"]) * 8 / (float(row["throughput_mbps"]) * 1e6))
    return {key: [pts[i] for i in sorted(pts)] for key, pts in by_sweep.items()}


def _expectation(sweep: str, p: PointSummary) -> dict[str, float]:
    return study_expectation(sweep, Point(p.x, network=Network(), tcp_sessions=p.tcp_sessions,
                                          udp_sessions=p.udp_sessions))


def _fmt(v: float | None, digits: int = 2) -> str:
    return "" if v is None else f"{v:.{digits}f}"


def _x(v: float) -> str:
    return f"{v:g}"


def sweep_table(key: str, points: list[PointSummary], x_label: str) -> list[str]:
    multi = key in ("parallel", "udp1", "udp2")
    if multi:
        head = [x_label, "TCP total", "TCP per session (mean)", "min–max", "UDP per session", "total",
                "study: total", "study: TCP per session", "study: UDP per session"]
    else:
        head = [x_label, "throughput (Mbit/s)", "study"]
    if key == "bdp":
        head.append(f"window/RTT limit at {BDP_DELAY_MS:g} ms")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for p in points:
        exp = _expectation(key, p)
        if multi:
            cells = [_x(p.x), _fmt(p.tcp_total), _fmt(p.tcp_mean),
                     f"{min(p.tcp_mbps):.2f}–{max(p.tcp_mbps):.2f}" if p.tcp_mbps else "",
                     _fmt(p.udp_mean, 3), _fmt(p.total), _fmt(exp.get("total")),
                     _fmt(exp.get("tcp_per_session")), _fmt(exp.get("udp_per_session"))]
        else:
            cells = [_x(p.x), _fmt(p.total), _fmt(exp.get("total"))]
        if key == "bdp":
            cells.append(_fmt(window_limit_mbps(p.x, BDP_DELAY_MS)))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def plot_sweep(key: str, figure: int, title: str, x_label: str, points: list[PointSummary], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [p.x for p in points]
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    if key in ("parallel", "udp1", "udp2"):
        ax.plot(xs, [p.total for p in points], "o-", label="total (ours)")
        ax.plot(xs, [p.tcp_mean for p in points], "s-", label="each TCP session (mean, ours)")
        for p in points:
            ax.scatter([p.x] * len(p.tcp_mbps), p.tcp_mbps, s=10, color="grey", zorder=3)
        if any(p.udp_mbps for p in points):
            ax.plot(xs, [p.udp_mean for p in points], "^-", label="each UDP session (ours)")
        ax.plot(xs, [_expectation(key, p)["tcp_per_session"] for p in points], "k--", lw=1,
                label="study: TCP share (94 - UDP)/n")
        ax.axhline(STUDY_MAX_MBPS, color="k", ls=":", lw=1, label="study: total 94 Mbit/s")
    else:
        ax.plot(xs, [p.total for p in points], "o-", label="ours (server-side iperf 2)")
        stated = [(p.x, _expectation(key, p).get("total")) for p in points]
        stated = [(x, v) for x, v in stated if v is not None]
        if stated:
            ax.plot(*zip(*stated), "kx", ms=8, label="study states 94 Mbit/s")
        if key == "bdp":
            ax.plot(xs, [min(window_limit_mbps(x, BDP_DELAY_MS), 100) for x in xs], "k--", lw=1,
                    label=f"window / RTT ({BDP_DELAY_MS:g} ms)")
        if key == "rate":
            ax.plot(xs, [min(x / 1000, 100) for x in xs], "k:", lw=1, label="configured rate (capped by cable)")
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


def build_report(run_dir: Path) -> Path:
    run_dir = Path(run_dir)
    manifest = read_manifest(run_dir, require_complete=False)
    results = read_results(run_dir / "results.csv")
    plots = run_dir / "plots"
    plots.mkdir(exist_ok=True)
    md = ["# tcp-lab: TCP throughput with iperf 2 (seed 003)", ""]
    md.append(f"Run status **{manifest.get('status')}**"
              + (f" ({manifest['error']})" if manifest.get("error") else "")
              + f"; quick: {manifest.get('quick')}; emulator for delay/loss: **{manifest.get('emulator', '?')}**"
              + f" (netem available: {manifest.get('network', {}).get('netem_available')}); "
              + f"wall time {manifest.get('wall_s', '?')} s; iperf: {manifest.get('tools', {}).get('iperf', '?')}.")
    md += ["", "Throughput is what the iperf 2 server (host B) reported, as in the study. The line: A — R — B, "
           "100 Mbit/s HTB + FIFO (1000 packets) on R's egress both ways (the study's Fast Ethernet cable); "
           "tbf, delay and loss on A→B as in the study. Congestion control cubic.", ""]
    checks = manifest.get("fidelity", {}).get("checks", [])
    if checks:
        md += ["## Fidelity checks", "", "| check | ok | value | expected | detail |", "|---|---|---|---|---|"]
        for c in checks:
            md.append(f"| {c['name']} | {'yes' if c['ok'] else '**NO**'} | {c['value']} | {c['expected']} "
                      f"| {c['message']} |")
        md.append("")
    for sweep in manifest.get("sweeps", []):
        key = sweep["key"]
        points = results.get(key)
        md += [f"## Figure {sweep['figure']}: {sweep['title']}", "",
               f"{sweep['duration_s']:g} s per point. The study: {sweep['study_says']}.", ""]
        if not points:
            md += ["(no results: the run stopped before this task)", ""]
            continue
        png = plots / f"fig{sweep['figure']:02d}_{key}.png"
        plot_sweep(key, sweep["figure"], sweep["title"], sweep["x_label"], points, png)
        md += [f"![Figure {sweep['figure']}](plots/{png.name})", ""]
        md += sweep_table(key, points, sweep["x_label"]) + [""]
    path = run_dir / "report.md"
    path.write_text("\n".join(md) + "\n")
    return path
