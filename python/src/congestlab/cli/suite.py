"""The command line of suites (docs/suite.md): `congestlab suite FILE`, `congestlab
suite-report PARENT` (and `congestlab reproduce SUITE`, cli/running.py). How a suite runs:
congestlab/execute.py."""

from __future__ import annotations

from pathlib import Path

import typer

from congestlab.execute import execute_suite
from congestlab.planner.remaining import left_s
from congestlab.suite.index import build_index
from congestlab.suite.spec import load_suite


ONLY_HELP = ("a suite: run only this study now (repeatable; the others wait for a later --resume), e.g. "
             "--only rto")


def suite(
    suite_path: Path = typer.Argument(..., help="a suite file (TOML with a [suite] table; docs/suite.md)"),
    quick: bool = typer.Option(False, "--quick", help="every study's --quick subset"),
    out: Path = typer.Option(None, "--out", help="parent directory (new or empty); default runs/suite-NAME-TIME-ID"),
    dry_run_: bool = typer.Option(False, "--dry-run", help="list the studies with their points, run nothing"),
    calibrate: bool = typer.Option(False, "--calibrate", help="measure the bottleneck with iperf3 first, per study"),
    resume: Path = typer.Option(None, "--resume", help="continue this suite run: complete studies are kept"),
    cluster: str = typer.Option(None, "--cluster", help="run each study's units on a Ray cluster (docs/cluster.md)"),
    seed_fit: bool = typer.Option(None, "--seed-fit/--no-seed-fit", help="also each study's seed-fit variant "
                                  "(default: the suite's seed_fit)"),
    only: list[str] = typer.Option(None, "--only", help=ONLY_HELP),
) -> None:
    """Run several studies as one: a sub-run per study and one index report (docs/suite.md)."""
    spec, base = load_suite(path=suite_path)
    execute_suite(spec, base, quick, out, dry_run_, calibrate, resume, cluster, seed_fit, only)


def suite_report(parent: Path = typer.Argument(..., help="a suite run's parent directory")) -> None:
    """Rebuild a suite run's index.md/.html from its stored sub-runs (no root)."""
    index = build_index(parent, rest_s=left_s)
    print(f"suite index: {index.markdown_path}  (also {index.html_path.name}); {index.total_wall_s} s of runs")
