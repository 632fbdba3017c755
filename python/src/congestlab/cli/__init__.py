"""The congestlab command line: one line and a distinct exit code for every known error.
Sub-apps: `congestlab cc` (cli/cc.py) and `congestlab bench` (cli/bench.py)."""

# The commands by group, registered here in the order `congestlab --help` lists them: running a
# study (running.py), suites (suite.py), planning (planning.py), reading a stored run (reading.py)
# and the tools (tools.py). How a run goes on once its options are parsed: congestlab/execute.py.

from __future__ import annotations

import functools
import sys

import typer

from congestlab.cli import matplotlib_home  # noqa: F401 - first: before anything below imports matplotlib
from congestlab.cli import bench as bench_cli
from congestlab.cli import cc as cc_cli
from congestlab.cli import planning, reading, running, tools
from congestlab.cli import suite as suite_cli
from congestlab.cli.os_errors import click_errors, os_error_line, usage_line
from congestlab.errors import CongestlabError, RunDirError, SpecError

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)

app.add_typer(cc_cli.app, name="cc", help="Congestion controls: list, install and remove (Compound TCP via BPF).")
app.add_typer(bench_cli.app, name="bench", help="dualbench: ANMA dual-stack benchmark and HTTP stress.")


@app.callback()
def _options(version: bool = typer.Option(False, "--version", callback=tools.print_version, is_eager=True,
                                          help="print the version and git revision, then exit")) -> None:
    pass


app.command("run")(running.run)
app.command("reproduce")(running.reproduce)
app.command("suite")(suite_cli.suite)
app.command("suite-report")(suite_cli.suite_report)
app.command("plan")(planning.estimate_wall_time)
app.command("simulate")(running.simulate)
app.command("presets")(tools.presets)
app.command("schema")(tools.schema)
app.command("analyze")(reading.analyze)
app.command("rto-replay")(reading.rto_replay)
app.command("report")(reading.report)
app.command("plot")(reading.plot)
app.command("compare")(reading.compare)
app.command("sensitivity")(running.sensitivity)
app.command("sensitivity-report")(reading.sensitivity_report)
app.command("distance")(reading.distance)
app.command("clean")(tools.clean)
app.command("doctor")(tools.doctor)


@functools.cache
def click_command():
    """The click command typer builds from `app` (about 40 ms), built once per process."""
    return typer.main.get_command(app)


def main(argv: list[str] | None = None) -> None:
    """The entry point; `argv` (default: sys.argv[1:]) lets in-process callers (the
    property test, python/tests/unit/test_bad_input_property.py) reuse the built command.
    Every error is one line on stderr and an exit code (README, "Exit codes"): a wrong option
    (click's usage errors, which it would show as a box) exits 2 like a wrong spec value."""
    try:
        code = click_command().main(args=argv, prog_name="congestlab", standalone_mode=False)
    except click_errors.NoArgsIsHelpError as err:
        print(err.ctx.get_help())
        sys.exit(err.exit_code)
    except click_errors.UsageError as err:
        print(f"congestlab: {usage_line(err)}", file=sys.stderr)
        sys.exit(SpecError.exit_code)
    except typer.Abort:
        print("congestlab: interrupted", file=sys.stderr)
        sys.exit(130)
    except CongestlabError as err:
        print(f"congestlab: {err}", file=sys.stderr)
        sys.exit(err.exit_code)
    except KeyboardInterrupt:
        print("congestlab: interrupted", file=sys.stderr)
        sys.exit(130)
    except OSError as err:  # what the machine refused: a permission, a full disk, a read-only mount
        line = os_error_line(err)
        if line is None:
            raise
        print(f"congestlab: {line}", file=sys.stderr)
        sys.exit(RunDirError.exit_code)
    # without standalone mode, click returns a command's typer.Exit code, and what it returned (None)
    if isinstance(code, int) and code:
        sys.exit(code)
