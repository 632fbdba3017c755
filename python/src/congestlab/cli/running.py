"""The command line's runs: `run` and `reproduce` a study (or a suite), `simulate` it in
leantcp's simulator, `sensitivity` over plausible values. What each run does once its options
are parsed: congestlab/execute.py."""

from __future__ import annotations

from pathlib import Path

import typer

from congestlab import study as studies
from congestlab.cli.suite import ONLY_HELP
from congestlab.execute import Decisive, execute_reproduce, execute_sensitivity, execute_study
from congestlab.simulate.command import run_simulate

_UNTIL_HELP = ("add rounds, only to the points feeding undecided claims, until every claim is decided "
               "(group-sequential, docs/statistics.md)")
_MAX_HELP = "--until-decisive: at most this many repetitions per point (default: twice the spec's)"
_BUDGET_HELP = "--until-decisive: start no round that would end after this many minutes of the run"
_ORDER_HELP = ("with --cluster: submit the tasks longest first by this finished run's unit times (default: by "
               "their planned repetitions; docs/cluster-planning.md)")


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
    execute_study(studies.load_study(spec_path), quick, out, dry_run, calibrate, None, resume, cluster,
                  Decisive(until_decisive, max_repetitions, budget_min), order_from)


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
    only: list[str] = typer.Option(None, "--only", help=ONLY_HELP),
) -> None:
    """Reproduce a study from its preset, or a suite of studies, e.g. `dissertation`
    (see `congestlab presets`; docs/suite.md)."""
    execute_reproduce(name, quick, out, dry_run, calibrate, resume, cluster, seed_fit,
                      Decisive(until_decisive, max_repetitions, budget_min), order_from, only)


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
    execute_sensitivity(preset, axis, axes, quick, out, dry_run, calibrate, cluster)
