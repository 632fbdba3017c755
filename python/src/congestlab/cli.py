"""The congestlab command line: one line and a distinct exit code for every known error."""

from __future__ import annotations

import importlib
import importlib.util
import sys

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


def main() -> None:
    try:
        app(standalone_mode=False)
    except CongestlabError as err:
        print(f"congestlab: {err}", file=sys.stderr)
        sys.exit(err.exit_code)
    except KeyboardInterrupt:
        print("congestlab: interrupted", file=sys.stderr)
        sys.exit(130)
    except Exception as err:  # click usage errors carry their own exit code
        import click

        if isinstance(err, click.exceptions.ClickException):
            err.show()
            sys.exit(err.exit_code)
        if isinstance(err, click.exceptions.Exit):
            sys.exit(err.exit_code)
        if isinstance(err, click.exceptions.Abort):
            sys.exit(130)
        raise
