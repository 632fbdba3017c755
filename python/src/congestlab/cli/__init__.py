"""The congestlab command line: one line and a distinct exit code for every known error.
Sub-apps: `congestlab cc` (cli/cc.py) and `congestlab bench` (cli/bench.py)."""

from __future__ import annotations

import functools
import json
import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import typer
from rich.console import Console

from congestlab import study as studies
from congestlab.analysis.rto_replay import SAMPLINGS, WEIGHTS, format_tables, replay_run
from congestlab.analysis.run_analysis import analyze_run
from congestlab.cc.ownership import clean_dead_registrations
from congestlab.cli import bench as bench_cli
from congestlab.cli import cc as cc_cli
from congestlab.cli import suite as suite_cli
from congestlab.cluster.node import clean_work_dirs, work_parent  # (no Ray import there)
from congestlab.cluster.submit_order import previous_times  # (no Ray import there)
from congestlab.decisive.driver import default_max_repetitions, is_until_decisive, run_until_decisive, summary_lines
from congestlab.decisive.procedure import FIRST_LOOK
from congestlab.doctor import diagnose
from congestlab.errors import CongestlabError, SpecError, TraceError
from congestlab.paths import REPO_ROOT
from congestlab.planner.unit_times import run_times
from congestlab.report import build_report
from congestlab.report.data import RunData
from congestlab.report.terminal import print_report
from congestlab.results import write_results
from congestlab.stats.outcomes import INVALID
from congestlab import __version__
from congestlab.rundir import git_revision, read_manifest, write_manifest
from congestlab.runner import require_root
from congestlab.sensitivity.configurations import load_axes_file, parse_axis_option
from congestlab.sensitivity.distance import by_metric as per_metric
from congestlab.sensitivity.distance import distance as run_distance
from congestlab.sensitivity.sweep_run import dry_run as print_plan
from congestlab.sensitivity.sweep_run import plan, run_sensitivity
from congestlab.simulate.command import run_simulate
from congestlab.spec import load_preset, preset_names
from congestlab.spec.models import StudySpec
from congestlab.spec.reference import render
from congestlab.testbed.namespaces import OWNERS_DIR, clean_dead_runs

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)

app.add_typer(cc_cli.app, name="cc", help="Congestion controls: list, install and remove (Compound TCP via BPF).")
app.add_typer(bench_cli.app, name="bench", help="dualbench: ANMA dual-stack benchmark and HTTP stress.")


def _print_version(value: bool) -> None:
    if value:
        print(f"congestlab {__version__} (git {git_revision()})")
        raise typer.Exit(0)


@app.callback()
def _options(version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                          help="print the version and git revision, then exit")) -> None:
    pass


def _execute(spec: StudySpec, quick: bool, out: Path | None, dry_run: bool, calibrate: bool,
             preset: str | None, resume: Path | None, cluster: str | None, decisive: "_Decisive",
             order_from: Path | None = None) -> None:
    if (decisive.max_repetitions is not None or decisive.budget_min is not None) and not decisive.on:
        raise SpecError("--max-repetitions/--budget-min", "go with --until-decisive")
    if order_from is not None and cluster is None:
        raise SpecError("--order-from", "orders a cluster run's tasks; go with --cluster")
    previous = None
    if order_from is not None:  # a finished run's unit times (planner/unit_times.py), read before anything runs
        previous = (str(order_from), previous_times([(t.name, t.seconds) for t in run_times(order_from).tasks]))
    if dry_run:
        studies.dry_run(spec, quick)
        if decisive.on:
            n = decisive.max_repetitions or default_max_repetitions(spec, quick)
            print(f"# --until-decisive: every point runs rounds 1..{min(FIRST_LOOK, n)}, then a round at a time "
                  f"only for the points feeding an undecided claim, up to {n} rounds"
                  + (f" or {decisive.budget_min:g} min" if decisive.budget_min is not None else ""))
        return
    console = Console()
    if resume is not None and not decisive.on and is_until_decisive(resume):
        decisive = _Decisive(True, None, None)  # an --until-decisive run goes on as one
    if decisive.on:
        if cluster is not None:
            raise SpecError("--until-decisive", "runs on this machine's testbed; drop --cluster")
        run_dir = run_until_decisive(spec, quick, out, calibrate, preset, resume, decisive.max_repetitions,
                                     decisive.budget_min, console)
    else:
        run_dir = studies.run_study(spec, quick, out, calibrate, preset=preset, resume=resume, cluster=cluster,
                                    console=console, order_from=previous)
    print_report(build_report(run_dir), console)
    if decisive.on:  # after the report: its verdicts are over every repetition at the default level
        for line in summary_lines(run_dir):
            console.print(line, highlight=False)


@dataclass(frozen=True)
class _Decisive:
    on: bool
    max_repetitions: int | None
    budget_min: float | None


_UNTIL_HELP = ("add rounds, only to the points feeding undecided claims, until every claim is decided "
               "(group-sequential, docs/statistics.md)")
_MAX_HELP = "--until-decisive: at most this many repetitions per point (default: twice the spec's)"
_BUDGET_HELP = "--until-decisive: start no round that would end after this many minutes of the run"
_ORDER_HELP = ("with --cluster: submit the tasks longest first by this finished run's unit times (default: by "
               "their planned repetitions; docs/cluster-planning.md)")


@app.command()
def run(
    spec_path: Path = typer.Argument(..., help="experiment spec (TOML)"),
    quick: bool = typer.Option(False, "--quick", help="use the spec's quick_repetitions"),
    out: Path = typer.Option(None, "--out", help="run directory (new or empty); default runs/NAME-TIME-ID"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print every testbed command and exit"),
    calibrate: bool = typer.Option(False, "--calibrate", help="measure the bottleneck with iperf3 first"),
    resume: Path = typer.Option(None, "--resume", help="continue this run directory: run only the repetitions "
                                "without results, keep the rest"),
    cluster: str = typer.Option(None, "--cluster", help="run the units of points on a Ray cluster (ADDRESS or "
                                "auto; docs/cluster.md)"),
    until_decisive: bool = typer.Option(False, "--until-decisive", help=_UNTIL_HELP),
    max_repetitions: int = typer.Option(None, "--max-repetitions", min=2, max=1000, help=_MAX_HELP),
    budget_min: float = typer.Option(None, "--budget-min", min=0.1, help=_BUDGET_HELP),
    order_from: Path = typer.Option(None, "--order-from", help=_ORDER_HELP),
) -> None:
    """Run a study spec on a fresh testbed, then analyze and report it."""
    _execute(studies.load_study(spec_path), quick, out, dry_run, calibrate, None, resume, cluster,
             _Decisive(until_decisive, max_repetitions, budget_min), order_from)


@app.command()
def reproduce(
    name: str = typer.Argument(..., help="preset name, e.g. ipv6"),
    quick: bool = typer.Option(False, "--quick", help="fewer repetitions (the preset's quick_repetitions)"),
    out: Path = typer.Option(None, "--out", help="run directory (new or empty); default runs/NAME-TIME-ID"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print every testbed command and exit"),
    calibrate: bool = typer.Option(False, "--calibrate", help="measure the bottleneck with iperf3 first"),
    resume: Path = typer.Option(None, "--resume", help="continue this run directory: run only the repetitions "
                                "without results, keep the rest"),
    cluster: str = typer.Option(None, "--cluster", help="run the units of points on a Ray cluster (ADDRESS or "
                                "auto; docs/cluster.md)"),
    seed_fit: bool = typer.Option(None, "--seed-fit/--no-seed-fit", help="a suite: also each study's seed-fit "
                                  "variant (default: the suite's seed_fit)"),
    until_decisive: bool = typer.Option(False, "--until-decisive", help=_UNTIL_HELP),
    max_repetitions: int = typer.Option(None, "--max-repetitions", min=2, max=1000, help=_MAX_HELP),
    budget_min: float = typer.Option(None, "--budget-min", min=0.1, help=_BUDGET_HELP),
    order_from: Path = typer.Option(None, "--order-from", help=_ORDER_HELP),
    only: list[str] = typer.Option(None, "--only", help=suite_cli.ONLY_HELP),
) -> None:
    """Reproduce a study from its preset, or a suite of studies, e.g. `dissertation`
    (see `congestlab presets`; docs/suite.md)."""
    if suite_cli.is_suite(name):
        if until_decisive or max_repetitions is not None or budget_min is not None:
            raise SpecError("--until-decisive", f"{name!r} is a suite; run its studies with --until-decisive one by one "
                            "(docs/suite.md)")
        if order_from is not None:
            raise SpecError("--order-from", f"{name!r} is a suite; its studies' tasks go longest first by their "
                            "planned repetitions")
        suite_cli.reproduce_suite(name, quick, out, dry_run, calibrate, resume, cluster, seed_fit, only)
        return
    if only:
        raise SpecError("--only", f"{name!r} is a study, not a suite; --only picks studies of a suite")
    if seed_fit is not None:
        raise SpecError("--seed-fit", f"{name!r} is a study, not a suite; its variant is the preset {name}-seed-fit")
    _execute(studies.load_study(preset=name), quick, out, dry_run, calibrate, name, resume, cluster,
             _Decisive(until_decisive, max_repetitions, budget_min), order_from)


app.command("suite")(suite_cli.suite)
app.command("suite-report")(suite_cli.suite_report)
app.command("plan")(suite_cli.plan)


@app.command()
def simulate(
    spec_path: Path = typer.Argument(..., help="study spec (TOML) with one lean server, a get and one bottleneck"),
    compare: bool = typer.Option(False, "--compare", help="also run the spec in netns and report sim ÷ emulation"),
    quick: bool = typer.Option(False, "--quick", help="the spec's quick points and repetitions"),
    repetitions: int = typer.Option(None, "--repetitions", min=1, max=1000, help="instead of the spec's"),
    seed: int = typer.Option(1, "--seed", help="seed of the simulated loss and sequence numbers"),
    out: Path = typer.Option(None, "--out", help="output directory (new or empty); default runs/sim-NAME-TIME"),
) -> None:
    """Run a one-bottleneck lean-server scenario in leantcp's simulator (docs/simulation.md)."""
    run_simulate(studies.load_study(spec_path), quick, compare, out, repetitions, seed)


@app.command()
def presets() -> None:
    """List the studies' presets (each a TOML file; `congestlab schema` describes the format)."""
    for name in preset_names():
        spec = load_preset(name)
        print(f"{name:10} {spec.title}  [{spec.source}]")
    for name in suite_cli.suite_names():
        print(f"{name:10} suite: {suite_cli.load_suite(name=name)[0].title}")


@app.command()
def schema(
    markdown: bool = typer.Option(False, "--markdown", help="the field reference (docs/spec.md) instead"),
) -> None:
    """Print the JSON Schema of a study spec (for editors that validate TOML as you type)."""
    if markdown:
        print(render(REPO_ROOT / "examples" / "lean-weights.toml"), end="")
        return
    print(json.dumps(StudySpec.model_json_schema(), indent=1))


@app.command()
def analyze(run_dir: Path = typer.Argument(..., help="a run directory")) -> None:
    """Recompute results/*.csv from a run directory's captures and records (no root needed)."""
    manifest = read_manifest(run_dir)
    result = analyze_run(run_dir, manifest)
    manifest["analysis"] = result.summary
    write_manifest(run_dir, manifest)
    rows = ", ".join(f"{n} {k}" for k, n in result.summary["rows"].items())
    print(f"results: {rows or 'none'}; {len(result.summary['problems'])} problems; "
          f"{result.summary['analysis_s']} s")
    for problem in result.summary["problems"]:
        print(f"  {problem}")
    invalid = result.summary.get("request_outcomes", {}).get(INVALID, 0)
    unusable = result.summary.get("captures_unusable", [])
    if invalid or unusable:  # results are written; the exit code says they hold problems
        print(f"congestlab: problems found: {invalid} invalid requests, {len(unusable)} unusable captures",
              file=sys.stderr)
        raise typer.Exit(TraceError.exit_code)


@app.command("rto-replay")
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
    manifest = read_manifest(run_dir)
    result = replay_run(run_dir, manifest, weights or None, samplings or None, thresholds)
    print(format_tables(result.rows))
    for kind, rows in result.rows.items():
        write_results(run_dir, kind, manifest["axes"], rows)
    print(f"replayed {result.samples_replayed} samples in {result.seconds} s ({result.cpu_s} s CPU); wrote "
          + ", ".join(f"results/{kind}.csv ({len(rows)} rows)" for kind, rows in result.rows.items()))
    for problem in result.problems:
        print(f"  {problem}")


def _names(text: str, known, option: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    for name in names:
        if name not in known:
            raise SpecError(option, f"{name!r} is not one of {', '.join(known)}")
    return names


@app.command()
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


@app.command()
def plot(
    run_dir: Path = typer.Argument(..., help="a complete, analysed run directory"),
    point: str = typer.Argument(..., help="a point id (manifest.json, or the report's 'Inside the GETs')"),
    rep: int = typer.Option(None, "--rep", help="this repetition; default: the median and the slowest"),
    family: str = typer.Option(None, "--family", help="v4 or v6; default: every family the point measured"),
    server: str = typer.Option(None, "--server", help="the measured server; needed when the point has several"),
    out: Path = typer.Option(None, "--out", help="PNG or SVG file; default RUN_DIR/plots/panels/<cell>[-r<N>].png"),
) -> None:
    """Draw the panels of a point's measured GETs: time-sequence graph, window, RTT, queue
    (docs/reports.md, "Panels")."""
    from congestlab.report.plot_command import plot_panels  # matplotlib

    print(f"panels: {plot_panels(run_dir, point, rep, family, server, out)}")


@app.command()
def compare(
    run_dirs: list[Path] = typer.Argument(..., help="two or more run directories; the first is the baseline"),
    out: Path = typer.Option(None, "--out", help="directory for compare.md/.html and plots; default compare-TIME"),
    force: bool = typer.Option(False, "--force", help="compare runs of different studies or with no cell in common"),
) -> None:
    """The same cells of several runs side by side, with differences and overlaid plots.
    Runs of another study than the first, or with no cell in common, are refused."""
    from congestlab.report.compare import compare_runs  # matplotlib

    print_report(compare_runs(run_dirs, out, force), Console())


@app.command()
def sensitivity(
    preset: str = typer.Argument(..., help="preset name, e.g. ipv6, or a spec file (.toml)"),
    axis: list[str] = typer.Option([], "--axis", help="FIELD=V1,V2,... plausible values of one field (repeatable)"),
    axes: Path = typer.Option(None, "--axes", help="TOML file of [[axes]] (name, fields, values, labels)"),
    quick: bool = typer.Option(False, "--quick", help="each configuration runs the preset's --quick subset"),
    out: Path = typer.Option(None, "--out", help="parent directory; an existing one of the same sweep is continued"),
    dry_run: bool = typer.Option(False, "--dry-run", help="list the configurations and their points, run nothing"),
    calibrate: bool = typer.Option(False, "--calibrate", help="measure the bottleneck with iperf3 first, per run"),
    cluster: str = typer.Option(None, "--cluster", help="run each configuration on a Ray cluster (docs/cluster.md)"),
) -> None:
    """Run a preset under every combination of plausible values; distance to the published
    numbers and robust findings per configuration (docs/fidelity.md)."""
    from congestlab.sensitivity.report import build_sensitivity_report  # matplotlib

    parsed = (load_axes_file(axes) if axes else []) + [parse_axis_option(a) for a in axis]
    p = plan(preset, parsed, quick)
    if dry_run:
        print_plan(p)
        return
    if cluster is None:
        require_root()
    parent = run_sensitivity(p, out, calibrate, cluster)
    print_report(build_sensitivity_report(parent), Console())


@app.command("sensitivity-report")
def sensitivity_report(parent: Path = typer.Argument(..., help="a sensitivity run's parent directory")) -> None:
    """Rebuild sensitivity.md/.html and plots from a sensitivity run's stored runs (no root)."""
    from congestlab.sensitivity.report import build_sensitivity_report  # matplotlib

    print_report(build_sensitivity_report(parent), Console())


@app.command()
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


@app.command()
def clean(
    all_runs: bool = typer.Option(False, "--all", help="also remove namespaces of runs still in progress"),
) -> None:
    """Remove what crashed runs left: namespaces (and their processes), owner records,
    temporary docroots, cluster work directories and BPF struct_ops registrations (Compound
    TCP) whose owning process is gone."""
    require_root()
    removed = clean_dead_runs(include_running=all_runs)
    works = clean_work_dirs()
    bpf = clean_dead_registrations()  # (only dead runs': a live run may share the registration)
    for what, items in (("namespaces", removed.namespaces), (f"owner records in {OWNERS_DIR}", removed.owner_records),
                        ("temporary docroots", removed.temp_dirs),
                        ("BPF sampler processes (owner records' probes)", removed.samplers),
                        (f"cluster work directories under {work_parent()}", [str(w) for w in works]),
                        ("BPF struct_ops congestion controls", bpf.removed)):
        print(f"removed {len(items)} {what}" + (": " + " ".join(items) if items else ""))
    for item in bpf.kept:
        print(f"kept BPF struct_ops {item}")


@app.command()
def doctor() -> None:
    """What is present or missing on this machine, and the command that fixes each."""
    missing = 0
    for item in diagnose():
        mark = "ok  " if item.ok else ("MISS" if item.required else "----")
        missing += item.required and not item.ok
        print(f"[{mark}] {item.name:14} {item.detail}" + ("" if item.ok else f"  -> {item.fix}"))
    raise typer.Exit(1 if missing else 0)


@functools.cache
def click_command():
    """The click command typer builds from `app` (about 40 ms), built once per process."""
    return typer.main.get_command(app)


def main(argv: list[str] | None = None) -> None:
    """The entry point; `argv` (default: sys.argv[1:]) lets in-process callers (the
    property test, python/tests/unit/test_bad_input_property.py) reuse the built command."""
    try:
        click_command()(args=argv, prog_name="congestlab")
    except CongestlabError as err:
        print(f"congestlab: {err}", file=sys.stderr)
        sys.exit(err.exit_code)
    except KeyboardInterrupt:
        print("congestlab: interrupted", file=sys.stderr)
        sys.exit(130)

