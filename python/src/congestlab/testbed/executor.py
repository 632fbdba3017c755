"""Runs a plan: one place where commands are executed, and any failure raises.

Consecutive `ip -n NS ...` (or `tc -n NS ...`) steps for the same namespace run as one
`-batch` invocation: building the study's 15 namespaces takes ~170 commands, and one
fork per command would cost most of the one-second setup budget.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterable
from itertools import groupby

from congestlab.errors import TestbedError, ToolError
from congestlab.testbed.plan import Step


def run_argv(argv: list[str] | tuple[str, ...], *, input_text: str | None = None, timeout_s: float = 30.0,
             check: bool = True) -> subprocess.CompletedProcess:
    try:
        proc = subprocess.run(list(argv), input=input_text, capture_output=True, text=True, timeout=timeout_s)
    except FileNotFoundError:
        raise ToolError(list(argv), None) from None
    except subprocess.TimeoutExpired:
        raise ToolError(list(argv), -1, f"timed out after {timeout_s:g} s") from None
    if check and proc.returncode != 0:
        raise ToolError(list(argv), proc.returncode, proc.stderr or proc.stdout)
    return proc


class Executor:
    def __init__(self, batch: bool = True) -> None:
        self.batch = batch
        self.commands_run = 0
        self.seconds = 0.0

    def run(self, steps: Iterable[Step]) -> None:
        start = time.monotonic()
        for key, group in groupby(steps, key=lambda s: s.batch_key):
            group = list(group)
            if key is None or len(group) == 1 or not self.batch:
                for step in group:
                    self._one(step)
            else:
                self._batch(key, group)
        self.seconds += time.monotonic() - start

    def query(self, argv: list[str]) -> str:
        """The output of a read-only command (e.g. `tc -n NS qdisc show`); not a step of
        the plan, so not counted in commands_run. A failure raises ToolError."""
        return run_argv(argv).stdout

    def _one(self, step: Step) -> None:
        self.commands_run += 1
        try:
            run_argv(step.argv)
        except ToolError as err:
            raise TestbedError(f"{step.phase}: `{step}` failed: {_last_line(err.stderr)}") from None

    def _batch(self, key: tuple[str, str], steps: list[Step]) -> None:
        tool, ns = key
        lines = [" ".join(a for a in s.argv[3:] if a not in ("-4", "-6")) for s in steps]
        self.commands_run += 1
        proc = run_argv([tool, "-n", ns, "-batch", "-"], input_text="\n".join(lines) + "\n", check=False)
        if proc.returncode != 0:
            failed = _failed_line(proc.stderr)
            step = steps[failed - 1] if failed and failed <= len(steps) else steps[0]
            raise TestbedError(f"{step.phase}: `{step}` failed: {_last_line(proc.stderr)}")


def _failed_line(stderr: str) -> int | None:
    for line in stderr.splitlines():
        if line.startswith("Command failed -:"):
            try:
                return int(line.rsplit(":", 1)[1])
            except ValueError:
                return None
    return None


def _last_line(text: str) -> str:
    lines = [ln for ln in (text or "").strip().splitlines() if not ln.startswith("Command failed")]
    return lines[0] if lines else "(no message)"
