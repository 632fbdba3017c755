"""The command line in-process for the hostile-input tests (test_hostile_inputs.py,
test_hostile_outputs.py): its exit code, stdout and stderr, with an alarm against a hang."""

from __future__ import annotations

import contextlib
import io
import signal
from importlib import resources
from pathlib import Path

from congestlab.cli import main

DATA = Path(__file__).parent / "data"
PRESET = (resources.files("congestlab.spec.presets") / "cc-share.toml").read_text()
HANG_S = 60  # a command that reads a FIFO waits for a writer forever; this fails it instead


def run_cli(*argv: str) -> tuple[int, str, str]:
    """`congestlab ARGV` in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()

    def hung(signum, frame):
        raise TimeoutError(f"congestlab {' '.join(argv)} still runs after {HANG_S} s")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(HANG_S)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(list(argv))
                code = 0
            except SystemExit as exit_:
                code = exit_.code if isinstance(exit_.code, int) else 1
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    return code, out.getvalue(), err.getvalue()


def one_line(code: int, err: str, want_code: int, *words: str) -> None:
    lines = err.strip().splitlines()
    assert code == want_code and len(lines) == 1 and lines[0].startswith("congestlab: "), (code, err[-800:])
    for word in words:
        assert word in lines[0], (word, lines[0])
