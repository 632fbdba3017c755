"""`congestlab bench anma|load ...`: run dualbench with the arguments passed through,
here or inside a network namespace (`--netns NAME`)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import typer

from congestlab.errors import ToolError
from congestlab.paths import rust_binary
from congestlab.runner import require_root

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)

PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": ["-h"]}


def dualbench_argv(mode: str, args: list[str], netns: str | None = None, binary: Path | None = None) -> list[str]:
    """The command line that runs `dualbench MODE ARGS`, inside `netns` when given."""
    exe = str(binary or rust_binary("dualbench"))
    argv = [exe, mode, *args]
    return ["ip", "netns", "exec", netns, *argv] if netns else argv


def _run(mode: str, args: list[str], netns: str | None) -> None:
    if netns:
        require_root("runs dualbench inside a network namespace (--netns)")
    argv = dualbench_argv(mode, args, netns)
    try:
        rc = subprocess.run(argv).returncode  # dualbench prints its own table and one-line errors
    except FileNotFoundError:
        raise ToolError(argv, None, f"{argv[0]} not found") from None
    raise typer.Exit(rc)


@app.command(context_settings=PASS_THROUGH)
def anma(
    ctx: typer.Context,
    netns: str = typer.Option(None, "--netns", help="run inside this network namespace (root)"),
) -> None:
    """ANMA: `--addresses FILE --path /f --port P --requests N --concurrency C [--timeout 5s]
    [--seed S] [--json FILE]`; every option goes to `dualbench anma` (`dualbench anma --help`)."""
    _run("anma", list(ctx.args), netns)


@app.command(context_settings=PASS_THROUGH)
def load(
    ctx: typer.Context,
    netns: str = typer.Option(None, "--netns", help="run inside this network namespace (root)"),
) -> None:
    """http_load: `--url URL|--urls FILE`, `--rate R|--parallel P`, `--seconds S|--fetches N`
    [--keepalive] [--timeout 10s] [--json FILE]; every option goes to `dualbench load`."""
    _run("load", list(ctx.args), netns)
