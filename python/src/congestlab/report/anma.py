"""The ANMA study's report (seed 004) from a run directory alone (no root): the slides'
table shape ("Result (connection data)" and "Result (time data)") per server, from
results/anma.csv, and a plot of per-pattern continuation time per family. Ported as it
was from the pre-spine study (which read one dualbench JSON per pattern);
with several repetitions a cell is their mean."""

from __future__ import annotations

import statistics
from pathlib import Path

from congestlab.errors import RunDirError
from congestlab.report.build import Report, _html_page
from congestlab.results import read_results
from congestlab.rundir import read_manifest

# (name, v6 entries, v4 entries): the slides' five ratios (spec/presets/anma.toml's pattern axis)
PATTERNS = [("A", 1, 1), ("B", 4, 1), ("C", 1, 4), ("D", 1, 0), ("E", 0, 1)]

# The slides' results (FreeBSD 4.7, PIII 800 MHz): sent v6/v4, NORMAL v6/v4, RESET v6/v4,
# avg establishment µs v6/v4, avg continuation ms v6/v4 (None: no requests of that family).
SLIDES = {
    "A": ((5000, 5000), (4536, 4537), (464, 463), (12.4, 1.3), (2.7113, 1.9317)),
    "B": ((8001, 1999), (7276, 1822), (725, 177), (14.4, 1.5), (2.7146, 1.9640)),
    "C": ((2001, 7999), (1815, 7522), (186, 747), (8.7, 0.9), (2.7339, 1.9154)),
    "D": ((10000, 0), (9064, 0), (936, 0), (10.0, None), (2.7176, None)),
    "E": ((0, 10000), (0, 8993), (0, 1007), (None, 1.3), (None, 1.8871)),
}

HEADER = ("Pattern", "v6:v4", "sent v6", "sent v4", "NORMAL v6", "NORMAL v4", "RESET v6", "RESET v4", "TIMEOUT v6",
          "TIMEOUT v4", "refused v6", "refused v4", "other v6", "other v4", "est. µs v6", "est. µs v4", "cont. ms v6",
          "cont. ms v4")
CONSOLE_HEADER = ("Pat", "v6:v4", "sent v6", "sent v4", "NORM v6", "NORM v4", "RST v6", "RST v4", "TO v6", "TO v4",
                  "ref v6", "ref v4", "oth v6", "oth v4", "est µs v6", "est µs v4", "cont ms v6", "cont ms v4")
COUNTS = ("requests", "normal", "reset", "timeout", "refused", "other")


def _mean(rows: list[dict], column: str) -> float | None:
    values = [float(r[column]) for r in rows if r.get(column, "") != ""]
    return statistics.fmean(values) if values else None


def _count(value: float | None) -> str:
    if value is None:
        return "–"
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"


def _time(value: float | None, digits: int) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _cells(rows: list[dict]) -> dict:
    """Mean over repetitions of one family's counts and times (µs for establishment)."""
    cells = {c: _mean(rows, c) for c in COUNTS}
    connect = _mean(rows, "connect_mean_ms")
    cells["connect_us"] = None if connect is None else connect * 1e3
    for col in ("continuation_mean_ms", "continuation_p50_ms", "continuation_p90_ms"):
        cells[col] = _mean(rows, col)
    return cells


def table_row(pattern: str, ratio: str, v6: dict, v4: dict) -> list[str]:
    return [pattern, ratio, *(_count(fam[c]) for c in COUNTS for fam in (v6, v4)),
            _time(v6["connect_us"], 1), _time(v4["connect_us"], 1),
            _time(v6["continuation_mean_ms"], 4), _time(v4["continuation_mean_ms"], 4)]


def slides_rows() -> list[list[str]]:
    rows = []
    for name, n6, n4 in PATTERNS:
        sent, normal, reset, est, cont = SLIDES[name]
        fmt = lambda v, d: "–" if v is None else f"{v:.{d}f}"  # noqa: E731
        rows.append([name, f"{n6}:{n4}", *map(str, sent), *map(str, normal), *map(str, reset), "–", "–", "–", "–",
                     "–", "–", fmt(est[0], 1), fmt(est[1], 1), fmt(cont[0], 4), fmt(cont[1], 4)])
    return rows


def markdown_table(rows: list[list[str]]) -> str:
    head = "| " + " | ".join(HEADER) + " |"
    sep = "|" + "---|" * len(HEADER)
    return "\n".join([head, sep] + ["| " + " | ".join(r) + " |" for r in rows])


def _workload_value(manifest: dict, point: dict, workload: str, field: str):
    """A field of the anma workload as the point ran it (its settings over the spec)."""
    key = f"workloads.{workload}.{field}"
    if key in point["settings"]:
        return point["settings"][key]
    for w in manifest["spec"]["workloads"]:
        if w["name"] == workload:
            return w.get(field)
    return None


def collect(run_dir: Path, manifest: dict) -> dict[str, dict[str, dict]]:
    """server -> pattern -> {"ratio", "v6", "v4", "n"}: the rows of results/anma.csv grouped."""
    rows = read_results(run_dir, "anma")
    if not rows:
        raise RunDirError(f"{run_dir}: results/anma.csv holds no anma record")
    points = {p["id"]: p for p in manifest["points"]}
    grouped: dict[tuple[str, str], dict] = {}
    for row in rows:
        point = points[row["point_id"]]
        pattern = point["axes"].get("pattern", "–")
        key = (row["server"], pattern)
        entry = grouped.setdefault(key, {"ratio": "{}:{}".format(
            _workload_value(manifest, point, row["workload"], "v6"),
            _workload_value(manifest, point, row["workload"], "v4")), "rows": {}, "reps": set()})
        entry["rows"].setdefault(row["family"], []).append(row)
        entry["reps"].add((row["point_id"], row["repetition"]))
    order = {name: i for i, (name, _, _) in enumerate(PATTERNS)}
    out: dict[str, dict[str, dict]] = {}
    for (server, pattern), entry in sorted(grouped.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], 99),
                                                                             kv[0][1])):
        out.setdefault(server, {})[pattern] = {
            "ratio": entry["ratio"], "n": len(entry["reps"]),
            "v6": _cells(entry["rows"].get("v6", [])), "v4": _cells(entry["rows"].get("v4", []))}
    return out


def continuation_plot(server: str, results: dict[str, dict], out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"v4": "#3b6ea8", "v6": "#e08a2c"}
    names = list(results)
    fig, ax = plt.subplots(figsize=(7.0, 3.8), dpi=110)
    width = 0.38
    for k, fam in enumerate(("v6", "v4")):
        xs, avg, lo, hi, sx, sy = [], [], [], [], [], []
        for i, name in enumerate(names):
            cells = results[name][fam]
            x = i + (k - 0.5) * width
            if cells["continuation_mean_ms"] is not None:
                xs.append(x)
                avg.append(cells["continuation_mean_ms"])
                lo.append(max(cells["continuation_mean_ms"] - (cells["continuation_p50_ms"] or 0.0), 0.0))
                hi.append(max((cells["continuation_p90_ms"] or 0.0) - cells["continuation_mean_ms"], 0.0))
            slide = SLIDES.get(name, (None,) * 5)[4]
            slide = slide[0 if fam == "v6" else 1] if slide else None
            if slide is not None:
                sx.append(x)
                sy.append(slide)
        ax.bar(xs, avg, width, yerr=[lo, hi], capsize=3, color=colors[fam], label=f"IPv{fam[1]} avg (ours; p50–p90)")
        ax.scatter(sx, sy, marker="D", s=26, color="black", zorder=3, label="slides (FreeBSD, 2003)" if k == 0 else None)
    ax.set_xticks(range(len(names)), [f"{n} ({results[n]['ratio']})" for n in names])
    ax.set_xlabel("Pattern (IPv6:IPv4)")
    ax.set_ylabel("Connection continuation (ms)")
    ax.set_title(f"ANMA, {server}: continuation time per family")
    ax.legend(fontsize=8)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)
    return out


def build_report(run_dir: Path) -> Report:
    """report.md, report.html and plots/ from results/anma.csv and the manifest."""
    run_dir = Path(run_dir)
    manifest = read_manifest(run_dir)
    results = collect(run_dir, manifest)
    point = manifest["points"][0]
    workload = next(w["name"] for w in manifest["spec"]["workloads"] if w["kind"] == "anma")
    value = lambda field: _workload_value(manifest, point, workload, field)  # noqa: E731
    client = value("client")
    reps = sorted({p["repetitions"] for p in manifest["points"]})
    lines = [f"# ANMA dual-stack benchmark (seed 004), run {run_dir.name}", "",
             f"{value('file_kib')} KiB file, {value('requests')} requests, {value('concurrency')} concurrent "
             f"connections, TIMEOUT after {value('timeout_s')} s; client `{client}` → server node over "
             "the routed topology of spec/presets/anma.toml (R1 bottleneck 100 Mbit/s), no background traffic; "
             f"{'/'.join(map(str, reps))} repetition(s) per pattern, each cell their mean; status "
             f"{manifest['status']}.",
             "Establishment = SYN → connected (every completed handshake); continuation = connected → last byte of "
             "the file (NORMAL requests). refused = the server answered the SYN with a RST; "
             "other = any other failure (kinds in points/*/r*/logs/anma-*.json).", ""]
    console = {}
    plots = []
    for server, by_pattern in results.items():
        instances = manifest.get("servers", {}).get(server, [{}])
        lines += [f"## {server} ({instances[0].get('version', '?')})", ""]
        rows = [table_row(name, entry["ratio"], entry["v6"], entry["v4"]) for name, entry in by_pattern.items()]
        lines += [markdown_table(rows), ""]
        plot = continuation_plot(server, by_pattern, run_dir / "plots" / f"continuation-{server}.png")
        plots.append(plot)
        lines += [f"![continuation time, {server}](plots/{plot.name})", ""]
        console[f"ANMA {server}: requests, closed status, establishment and continuation"] = (CONSOLE_HEADER, rows)
    lines += ["## The slides' results (FreeBSD 4.7, Pentium III 800 MHz, 2003)", "",
              markdown_table(slides_rows()), "",
              "The slides' counts for B and C (8,001/1,999, 2,001/7,999) are not exact ratios; dualbench assigns "
              "entries round-robin, so ours are exact (N·k/E).", ""]
    warnings = manifest.get("fidelity", {}).get("warnings", [])
    if warnings:
        lines += ["## Warnings", ""] + [f"- {w}" for w in warnings] + [""]
    markdown = "\n".join(lines)
    md_path = run_dir / "report.md"
    md_path.write_text(markdown)
    html_path = run_dir / "report.html"
    html_path.write_text(_html_page(manifest["spec"].get("title") or manifest["spec"]["name"], markdown))
    return Report(md_path, html_path, plots, console, warnings)
