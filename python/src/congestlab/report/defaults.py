"""The report of a study that declares none (e.g. a user's spec): one table and one bar
plot per main metric of every kind of result it has, over its first two axes."""

from __future__ import annotations

from pathlib import Path

from congestlab.spec.report import ReportSpec
from congestlab.results import read_results, result_path
from congestlab.stats.outcomes import COMPLETE

# kind -> (metric name, declaration); the kinds' main numbers (docs/data-format.md)
MAIN_METRICS = {
    "request": [("delay_ms", {"column": "delay_ms", "label": "Delay (GET to last ACK)", "unit": "ms",
                              "digits": 1, "where": {"outcome": COMPLETE}}),
                ("nrt_throughput_mbps", {"column": "nrt_throughput_mbps", "label": "Throughput (NRT)",
                                         "unit": "Mbit/s", "where": {"outcome": COMPLETE}}),
                # beside delay: what each GET cost its server (docs/data-format.md, "CPU per GET")
                ("server_cpu_ms", {"column": "server_cpu_ms", "label": "Server CPU per GET", "unit": "ms",
                                   "where": {"outcome": COMPLETE}})],
    "load": [("shared_bandwidth_pct", {"column": "shared_bandwidth_pct", "label": "Shared bandwidth", "unit": "%",
                                       "digits": 1})],
    "iperf": [("iperf_total_mbps", {"column": "throughput_mbps", "label": "iperf throughput, all sessions",
                                    "unit": "Mbit/s", "per_repetition": "sum"})],
    "anma": [("anma_normal", {"column": "normal", "label": "NORMAL closes", "digits": 0, "where": {"family": "all"}})],
    "ping": [("ping_rtt_ms", {"column": "rtt_avg_ms", "label": "Ping RTT", "unit": "ms", "digits": 3})],
}

# shown only when the run recorded them
OPTIONAL_METRICS = {"server_cpu_ms"}


def default_report(run_dir: Path, axes: list[str]) -> ReportSpec:
    rows = axes[0] if axes else "experiment"
    columns = axes[1] if len(axes) > 1 else None
    metrics, tables, plots = {}, [], []
    for kind, entries in MAIN_METRICS.items():
        if not result_path(run_dir, kind).exists():
            continue
        recorded = None
        for name, declaration in entries:
            if name in OPTIONAL_METRICS:  # a run from before the column (format 3) has none
                recorded = recorded if recorded is not None else read_results(run_dir, kind)
                if not any(row.get(declaration["column"]) for row in recorded):
                    continue
            metrics[name] = {"kind": kind} | declaration
            cols = columns or ("family" if kind == "request" else None)
            tables.append({"id": name, "title": f"{declaration['label']} by {rows}" + (f" and {cols}" if cols else ""),
                           "metrics": [name], "rows": rows} | ({"columns": cols} if cols else {}))
            plots.append({"id": name, "title": declaration["label"], "type": "bar", "metrics": [name], "x": rows}
                         | ({"series": cols} if cols else {}))
    intro = ("This study declares no [report] (docs/reports.md): the tables and plots below are congestlab's "
             "default, the main numbers of each kind of result over the study's first axes.")
    return ReportSpec.model_validate({"intro": intro, "metrics": metrics, "tables": tables, "plots": plots})
