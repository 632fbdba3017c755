"""The congestlab command line: one line and a distinct exit code for every known error."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

import typer

from congestlab.errors import CongestlabError

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)

# Sub-commands that live with their component: (name, module holding a typer `app`).
SUBAPPS = [
    ("cc", "congestlab.cc.cli", "Congestion controls: list, install and remove (Compound TCP via BPF)."),
    ("bench", "congestlab.bench.cli", "dualbench: ANMA dual-stack benchmark and HTTP stress."),
]
for name, module, help_text in SUBAPPS:
    if importlib.util.find_spec(module.rsplit(".", 1)[0]) is not None:
        app.add_typer(importlib.import_module(module).app, name=name, help=help_text)

# Studies with a runner of their own rather than the spec-driven spine: name -> (module, title).
# The module exposes `reproduce(out: Path | None, quick: bool) -> Path`, returning the run directory.
STUDY_MODULES = {
    "tcp-lab": ("congestlab.tcplab.study", "TCP throughput lab: windows, length, rate, delay, loss, sessions [seed 003]"),
    "anma": ("congestlab.bench.anma_study", "ANMA dual-stack benchmark, patterns A-E [seed 004]"),
}


def _study_module(name: str):
    module = STUDY_MODULES.get(name, ("", ""))[0]
    if module and importlib.util.find_spec(module.rsplit(".", 1)[0]) is not None:
        if importlib.util.find_spec(module) is not None:
            return importlib.import_module(module)
    return None


def _spec_for(spec_path: Path | None, preset: str | None):
    from congestlab.spec import load_preset, load_spec

    return load_preset(preset) if preset else load_spec(spec_path)


def _execute(spec, quick: bool, out: Path | None, dry_run: bool, calibrate: bool) -> None:
    from rich.console import Console

    from congestlab.report import build_report
    from congestlab.rundir import new_run_dir, prepare_out_dir
    from congestlab.runner import Runner, require_root
    from congestlab.testbed import Testbed

    console = Console()
    if dry_run:
        tb = Testbed(spec.topology)
        for step in tb.plan:
            print(f"[{step.phase}] {step}")
        for imp in tb.impairments:
            iface = imp.iface
            print(f"[impairments] {imp.label}: delay {iface.delay_ms:g} ms, jitter {iface.jitter_ms:g} ms, "
                  f"loss {iface.loss:g} (netem if this kernel has it, else linkem; "
                  f"link_emulator = {spec.topology.link_emulator})")
        print(f"# {len(tb.plan)} commands; teardown kills every process in, then deletes: "
              + " ".join(tb.layout.namespaces()))
        return
    require_root()
    reps = spec.quick_repetitions if quick else spec.repetitions
    from congestlab.testbed import new_prefix

    run_dir = prepare_out_dir(out) if out else new_run_dir(Path("runs"), spec.name, new_prefix())
    console.print(f"run directory: {run_dir}")
    Runner(spec, run_dir, reps, calibrate=calibrate, argv=sys.argv).run()
    _print_report(build_report(run_dir), console)


def _print_report(report, console) -> None:
    from rich.table import Table

    for server, rows in report.console.items():
        table = Table(title=f"{server}: delay (ms) and NRT throughput (Mbit/s), ours vs study")
        for col in ("Level", "delay v4", "study", "delay v6", "study", "thr v4", "study", "thr v6", "study"):
            table.add_column(col, justify="right")
        for row in rows:
            table.add_row(*row)
        console.print(table)
    for warning in report.warnings:
        console.print(f"[yellow]warning:[/] {warning}")
    console.print(f"report: {report.markdown_path}  (also {report.html_path.name}, plots/)")


@app.command()
def run(
    spec_path: Path = typer.Argument(..., help="experiment spec (TOML)"),
    quick: bool = typer.Option(False, "--quick", help="use the spec's quick_repetitions"),
    out: Path = typer.Option(None, "--out", help="run directory (new or empty); default runs/NAME-TIME-ID"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print every testbed command and exit"),
    calibrate: bool = typer.Option(False, "--calibrate", help="measure the bottleneck with iperf3 first"),
) -> None:
    """Run an experiment spec on a fresh testbed, then analyze and report it."""
    _execute(_spec_for(spec_path, None), quick, out, dry_run, calibrate)


@app.command()
def reproduce(
    name: str = typer.Argument(..., help="preset name, e.g. ipv6"),
    quick: bool = typer.Option(False, "--quick", help="fewer repetitions (the preset's quick_repetitions)"),
    out: Path = typer.Option(None, "--out", help="run directory (new or empty); default runs/NAME-TIME-ID"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print every testbed command and exit"),
    calibrate: bool = typer.Option(False, "--calibrate", help="measure the bottleneck with iperf3 first"),
) -> None:
    """Reproduce a study from its preset (see `congestlab presets`)."""
    study = _study_module(name)
    if study is not None and not dry_run:
        study.reproduce(out, quick)
        return
    _execute(_spec_for(None, name), quick, out, dry_run, calibrate)


@app.command()
def presets() -> None:
    """List the studies' presets."""
    from congestlab.spec import load_preset, preset_names

    for name in preset_names():
        spec = load_preset(name)
        print(f"{name:10} {spec.title}  [{spec.source}]")
    for name, (_, title) in STUDY_MODULES.items():
        if _study_module(name) is not None:
            print(f"{name:10} {title}")


@app.command()
def analyze(run_dir: Path = typer.Argument(..., help="a run directory")) -> None:
    """Recompute metrics.csv and summary.csv from a run directory's pcaps."""
    from congestlab.analysis.run_analysis import METRIC_FIELDS, analyze_run, summarize, summary_fields, write_csv
    from congestlab.rundir import read_manifest

    manifest = read_manifest(run_dir)
    result = analyze_run(run_dir)
    write_csv(run_dir / "metrics.csv", result.rows, METRIC_FIELDS)
    levels = [lv["name"] for lv in manifest["spec"]["levels"]]
    write_csv(run_dir / "summary.csv", summarize(result.rows, levels), summary_fields())
    print(f"{len(result.rows)} requests measured; {len(result.problems)} problems")
    for problem in result.problems:
        print(f"  {problem}")


@app.command()
def report(
    run_dir: Path = typer.Argument(..., help="a complete run directory"),
    check: bool = typer.Option(False, "--check", help="exit 1 when a claim marked as a property of the tool fails"),
) -> None:
    """Write report.md, report.html and plots/ from a run directory (no root needed)."""
    from rich.console import Console

    from congestlab.report import format_version

    if format_version(run_dir) != 1:  # the one engine (format_version 2); it names any other problem
        from congestlab.report.engine import build_report as build, print_summary

        built = build(run_dir)
        print_summary(built.console, built.warnings, [built.markdown_path, built.html_path], Console())
        if check and built.failed_properties:
            for f in built.failed_properties:
                print(f"congestlab: property {f.claim.id} does not hold: {f.claim.title}", file=sys.stderr)
            raise typer.Exit(1)
        return
    from congestlab.report import build_report
    from congestlab.rundir import read_manifest

    manifest = read_manifest(run_dir)
    study = manifest.get("study") or manifest.get("kind")
    if study == "anma":
        from congestlab.bench.anma_report import write_report

        print(f"report: {write_report(run_dir, manifest)[0]}")
    elif study == "tcp-lab":
        from congestlab.tcplab.report import build_report as build_tcplab_report

        print(f"report: {build_tcplab_report(run_dir)}")
    else:
        _print_report(build_report(run_dir), Console())


@app.command()
def compare(
    run_dirs: list[Path] = typer.Argument(..., help="two or more run directories; the first is the baseline"),
    out: Path = typer.Option(None, "--out", help="directory for compare.md/.html and plots; default compare-TIME"),
) -> None:
    """The same cells of several runs side by side, with differences and overlaid plots."""
    from rich.console import Console

    from congestlab.report.compare import compare_runs
    from congestlab.report.engine import print_summary

    done = compare_runs(run_dirs, out)
    print_summary(done.console, [], [done.markdown_path, done.html_path], Console())


@app.command()
def clean(
    all_runs: bool = typer.Option(False, "--all", help="also remove namespaces of runs still in progress"),
) -> None:
    """Remove namespaces (and their processes) left behind by crashed runs."""
    from congestlab.runner import require_root
    from congestlab.testbed.namespaces import clean_leftovers

    require_root()
    removed = clean_leftovers(include_running=all_runs)
    print(f"removed {len(removed)} namespaces" + (": " + " ".join(removed) if removed else ""))


@app.command()
def doctor() -> None:
    """What is present or missing on this machine, and the command that fixes each."""
    from congestlab.doctor import diagnose

    missing = 0
    for item in diagnose():
        mark = "ok  " if item.ok else ("MISS" if item.required else "----")
        missing += item.required and not item.ok
        print(f"[{mark}] {item.name:14} {item.detail}" + ("" if item.ok else f"  -> {item.fix}"))
    raise typer.Exit(1 if missing else 0)


def main() -> None:
    try:
        app()
    except CongestlabError as err:
        print(f"congestlab: {err}", file=sys.stderr)
        sys.exit(err.exit_code)
    except KeyboardInterrupt:
        print("congestlab: interrupted", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    main()
