"""`congestlab ARGV` in the test's own process (the click command built once: cli/__init__.py
main), for tests that give the CLI many inputs: a subprocess costs the imports each time."""

from __future__ import annotations

import contextlib
import io

from congestlab.cli import main


def call_cli(*argv: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `congestlab ARGV`."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main([str(a) for a in argv])
            code = 0
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
    return code, out.getvalue(), err.getvalue()
