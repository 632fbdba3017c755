"""`congestlab` commands in processes forked from one that has imported the command line
already (multiprocessing's fork server, which preloads congestlab.cli): each command is a
process of its own running the same `main(argv)` as the `congestlab` script, with argv,
sys.argv and its output file as that script's would be, but without the imports every start
of the script costs (about 2.5 s of CPU: scipy, matplotlib). For the netns tests that start
commands (python/tests/netns/test_crash_resume_netns.py: 23 of them); in one pytest session
they share the fork server.

The fork server is a fresh interpreter started once (not a fork of pytest, which may hold
threads); every command forked from it starts with its signal handlers as Python sets them,
so SIGINT is a KeyboardInterrupt and SIGKILL ends it as it would the script."""

from __future__ import annotations

import atexit
import multiprocessing
import os
import subprocess
import sys
import threading
from pathlib import Path

from congestlab.cli import main

CONGESTLAB = str(Path(sys.executable).parent / "congestlab")
_CONTEXT = multiprocessing.get_context("forkserver")
_CONTEXT.set_forkserver_preload(["congestlab.cli"])


def _command(argv: list[str], env: dict[str, str], out: str, err: str) -> None:
    os.environ.clear()
    os.environ.update(env)
    for fd, path in ((1, out), (2, err)):
        opened = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(opened, fd)
        os.close(opened)
    sys.argv = [CONGESTLAB, *argv]
    try:
        main(argv)  # sys.exit(code) on an error: the process's exit code, as the script's
    finally:  # what the script's interpreter does as it exits, and a forked child's exit does not:
        threading._shutdown()  # its other threads joined, then the atexit functions (e.g. ray.shutdown)
        atexit._run_exitfuncs()


def start(argv: list[str], out: Path, env: dict[str, str] | None = None,
          err: Path | None = None) -> multiprocessing.Process:
    """`congestlab ARGV` started, its stdout into `out`, its stderr into `err` (default: `out`
    too), its environment the caller's now with `env` added (what the fork server's modules
    read as they were imported stays as it was then); `.pid`, `.is_alive()`, `.join()` and
    `.exitcode` (its exit code; -9 when SIGKILLed) as for any process."""
    err = err or out
    for path in (out, err):  # there for a reader at once, as a file the caller opened would be
        path.write_text("")
    environment = dict(os.environ) | dict(env or {})
    proc = _CONTEXT.Process(target=_command, args=(list(argv), environment, str(out), str(err)), daemon=False)
    proc.start()
    return proc


def run(argv: list[str], out: Path, timeout_s: float, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`congestlab ARGV` to its end, as subprocess.run(capture_output=True, text=True) answers:
    stdout kept in `out`, stderr in `out` + ".err". TimeoutError after `timeout_s` (killed)."""
    err = out.with_name(out.name + ".err")
    proc = start(argv, out, env, err)
    proc.join(timeout_s)
    if proc.is_alive():
        proc.kill()
        proc.join()
        raise TimeoutError(f"congestlab {' '.join(argv)} did not end in {timeout_s} s: " + err.read_text()[-2000:])
    return subprocess.CompletedProcess([CONGESTLAB, *argv], proc.exitcode, out.read_text(), err.read_text())
