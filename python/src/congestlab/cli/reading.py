"""The command line's readers of stored runs (no root needed): `analyze`, `rto-replay`,
`report`, `plot`, `compare`, `sensitivity-report` and `distance`."""

from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path

import typer
from rich.console import Console

from congestlab.analysis.rto_replay import SAMPLINGS, WEIGHTS, format_tables, replay_run
from congestlab.analysis.run_analysis import problem_counts
from congestlab.errors import SpecError, TraceError
from congestlab.report import build_report
from congestlab.report.data import RunData
from congestlab.report.terminal import print_report
from congestlab.results import write_results
from congestlab.rundir import read_manifest, write_manifest
from congestlab.runner.manifest import record_analysis
from congestlab.stored import StoredRun
from congestlab.sensitivity.distance import by_metric as per_metric
from congestlab.sensitivity.distance import distance as run_distance


def analyze(run_dir: Path = typer.Argument(..., help="a run directory")) -> None:
    """Recompute results/*.csv from a run directory's captures and records (no root needed)."""
    manifest = read_manifest(run_dir)
    result = record_analysis(run_dir, manifest)
    write_manifest(run_dir, manifest)
    rows = ", ".join(f"{n} {k}" for k, n in result.summary["rows"].items())
    print(f"results: {rows or 'none'}; {len(result.summary['problems'])} problems; "
          f"{result.summary['analysis_s']} s")
    for problem in result.summary["problems"]:
        print(f"  {problem}")
    counts = problem_counts(result.summary)
    if any(counts.values()):  # results are written; the exit code says they hold problems
        first, second, *rest = counts.items()
        said = [f"{n} {what}" for what, n in (first, second)] + [f"{n} {what}" for what, n in rest if n]
        print(f"congestlab: problems found: {', '.join(said)}", file=sys.stderr)
        raise typer.Exit(TraceError.exit_code)


def rto_replay(
    run_dir: Path = typer.Argument(..., help="a run directory with a lean server"),
    weight: str = typer.Option("", "--weight", help="W1..W9, comma-separated, or 'every'; default: the live one"),
    sampling: str = typer.Option("", "--sampling", help="all, one, some, comma-separated; default: the live one"),
    rto_min_ms: str = typer.Option("250,500,750,1000", "--rto-min-ms",
                                   help="minimum RTOs (thresholds T of Tables 34-35), comma-separated"),
) -> None:
    """Replay the lean server's RTO estimator over its RTT samples (log and capture): Table 6
    and Tables 34-35 (docs/rto-replay.md). Writes results/rto_*.csv."""
    weights = list(WEIGHTS) if weight.strip().lower() == "every" else _names(weight.upper(), WEIGHTS, "--weight")
    samplings = _names(sampling.lower(), SAMPLINGS, "--sampling")
    try:
        thresholds = tuple(int(t) for t in rto_min_ms.split(",") if t.strip())
    except ValueError:
        raise SpecError("--rto-min-ms", f"{rto_min_ms!r} is not a comma-separated list of milliseconds") from None
    if not thresholds or min(thresholds) <= 0:
        raise SpecError("--rto-min-ms", "give at least one minimum RTO > 0 ms")
    run = StoredRun(run_dir)
    result = replay_run(run, weights or None, samplings or None, thresholds)
    print(format_tables(result.rows))
    for kind, rows in result.rows.items():
        write_results(run.path, kind, run.axes, rows)
    print(f"replayed {result.samples_replayed} samples in {result.seconds} s ({result.cpu_s} s CPU) from "
          f"{result.coverage()}; wrote "
          + ", ".join(f"results/{kind}.csv ({len(rows)} rows)" for kind, rows in result.rows.items()))
    for problem in result.problems + result.damaged:
        print(f"  {problem}")
    if result.damaged:  # the rows are written; the exit code says they lack what could not be read
        print(f"congestlab: replayed with problems: {len(result.damaged)} (listed above)", file=sys.stderr)
        raise typer.Exit(TraceError.exit_code)


def _names(text: str, known, option: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    for name in names:
        if name not in known:
            raise SpecError(option, f"{name!r} is not one of {', '.join(known)}")
    return names


def report(
    run_dir: Path = typer.Argument(..., help="a complete run directory"),
    check: bool = typer.Option(False, "--check", help="exit 1 when a claim marked as a property of the tool fails"),
    panels: bool = typer.Option(False, "--panels", help="also draw every cell's panels (median and slowest GET; "
                                "docs/reports.md)"),
) -> None:
    """Write report.md, report.html and plots/ from a run directory (no root needed)."""
    built = build_report(run_dir, panels=panels)
    print_report(built, Console())
    failed = built.failed_properties
    for finding in failed:
        print(f"congestlab: property {finding.claim.id} does not hold: {finding.claim.title}", file=sys.stderr)
    if check and failed:
        raise typer.Exit(1)


def plot(
    run_dir: Path = typer.Argument(..., help="a complete, analysed run directory"),
    point: str = typer.Argument(..., help="a point id (manifest.json, or the report's 'Inside the GETs')"),
    rep: int = typer.Option(None, "--rep", help="this repetition; default: the median and the slowest"),
    family: str = typer.Option(None, "--family", help="v4 or v6; default: every family the point measured"),
    server: str = typer.Option(None, "--server", help="the measured server; needed when the point has several"),
    out: Path = typer.Option(None, "--out", help="PNG or SVG file in an existing folder, not a symbolic link; default "
                             "RUN_DIR/plots/panels/<cell>[-r<N>].png"),
) -> None:
    """Draw the panels of a point's measured GETs: time-sequence graph, window, RTT, queue
    (docs/reports.md, "Panels")."""
    from congestlab.report.plot_command import plot_panels  # matplotlib

    print(f"panels: {plot_panels(run_dir, point, rep, family, server, out)}")


def compare(
    run_dirs: list[Path] = typer.Argument(..., help="two or more run directories; the first is the baseline"),
    out: Path = typer.Option(None, "--out", help="directory (new or empty) for compare.md/.html and plots; default "
                             "compare-TIME"),
    force: bool = typer.Option(False, "--force", help="compare runs of different studies or with no cell in common"),
) -> None:
    """The same cells of several runs side by side, with differences and overlaid plots.
    Runs of another study than the first, or with no cell in common, are refused."""
    from congestlab.report.run_comparison import compare_runs  # matplotlib

    print_report(compare_runs(run_dirs, out, force), Console())


def sensitivity_report(parent: Path = typer.Argument(..., help="a sensitivity run's parent directory")) -> None:
    """Rebuild sensitivity.md/.html and plots from a sensitivity run's stored runs (no root)."""
    from congestlab.sensitivity.report import build_sensitivity_report  # matplotlib

    print_report(build_sensitivity_report(parent), Console())


def distance(run_dirs: list[Path] = typer.Argument(..., help="complete run directories of presets with published values"),
             by_metric: bool = typer.Option(False, "--by-metric", help="also one line per metric: ours/published, "
                                            "median and range")) -> None:
    """Each run's distance to the published numbers: median and worst |ln(ours/published)|
    over the published cells, cells within 25 % (docs/fidelity.md)."""
    from congestlab.sensitivity.report import published_cells  # matplotlib

    for run_dir in run_dirs:
        cells = published_cells(RunData(run_dir))
        d = run_distance(cells)
        if d.median is None:
            print(f"{run_dir}: no published cell measured")
            continue
        print(f"{run_dir}: median {d.median:.2f} (x{math.exp(d.median):.2f}), worst {d.worst:.2f} "
              f"(x{math.exp(d.worst):.2f}), {d.within()}/{d.measured} cells within 25 %, "
              f"{len(d.unmeasured)} published cells not measured")
        if by_metric:
            for metric, m in per_metric(cells).items():
                ratios = sorted(c.ratio for c in m.cells if c.ratio is not None)
                if not ratios:
                    print(f"  {metric}: no cell measured ({len(m.unmeasured)} published)")
                    continue
                print(f"  {metric}: ours/published median {statistics.median(ratios):.2f}x ({ratios[0]:.2f}-"
                      f"{ratios[-1]:.2f}x), |ln| median {m.median:.2f}, {m.within()}/{m.measured} cells within 25 %")
