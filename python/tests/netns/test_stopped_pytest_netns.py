"""A stopped test leaves nothing: pytest runs stopped_flow_netns.py (Compound TCP registered,
a 5-namespace dumbbell, an iperf3 flow) in a subprocess and is stopped once the flow runs.

- SIGTERM to pytest's PID, and SIGTERM to the process group of a `make` that runs pytest (as
  `make test` does; make forwards it to its child as well): the session stops as on Ctrl-C
  and every finalizer runs (python/tests/conftest.py), so nothing is left at all.
- SIGKILL to pytest: no teardown; `congestlab clean` then removes everything, the BPF
  struct_ops too, by the owner note the test registered it with (cc_helpers.py).

Left means: namespaces with the test's prefix, any process that ran under that pytest, the
owner record and BPF note in /run/congestlab, the registered struct_ops."""

from __future__ import annotations

import os
import secrets
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from spine_helpers import namespaces_with

from congestlab.cc import ownership, registry
from congestlab.paths import REPO_ROOT
from congestlab.testbed import new_prefix
from congestlab.testbed.namespaces import OWNERS_DIR, delete_namespace, forget_owner, namespace_pids, process_alive

pytestmark = [pytest.mark.netns, pytest.mark.skipif(os.geteuid() != 0, reason="needs root")]

INNER = Path(__file__).with_name("stopped_flow_netns.py")
CONGESTLAB = str(Path(sys.executable).parent / "congestlab")
START_TIMEOUT_S = 120  # pytest's start, the object's build, the testbed, iperf3 (under load)
STOP_TIMEOUT_S = 60


def _proc_stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    comm = text[text.index("(") + 1:text.rindex(")")]
    return [str(pid), comm] + text[text.rindex(")") + 2:].split()


def descendants(root: int) -> dict[int, tuple[str, str]]:
    """pid -> (command, start time) of every process below `root`."""
    children: dict[int, list[list[str]]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _proc_stat(int(entry.name))) is not None:
            children.setdefault(int(stat[3]), []).append(stat)
    found, todo = {}, [root]
    while todo:
        for stat in children.get(todo.pop(), []):
            found[int(stat[0])] = (stat[1], stat[21])
            todo.append(int(stat[0]))
    return found


def iperf3_running(prefix: str) -> bool:
    """An iperf3 in the sender's and in the receiver's namespace."""
    return all(any((_proc_stat(pid) or ["", ""])[1] == "iperf3" for pid in namespace_pids(f"{prefix}-{node}"))
               for node in ("s1", "c"))


class Stopped:
    """pytest on the inner test, directly or under make, with its own prefix and kernel name."""

    def __init__(self, tmp_path: Path, under_make: bool):
        self.prefix = new_prefix()
        self.kernel_name = f"st{secrets.token_hex(3)}"
        self.under_make = under_make
        env = dict(os.environ, STOPPED_TEST_PREFIX=self.prefix, STOPPED_TEST_CC=self.kernel_name)
        argv = [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", str(INNER)]
        if under_make:
            makefile = tmp_path / "Makefile"  # the shell settings of the project's Makefile
            makefile.write_text(f"SHELL := /bin/bash\n.SHELLFLAGS := -eu -o pipefail -c\ntest:\n\t{shlex.join(argv)}\n")
            argv = ["make", "--no-print-directory", "-f", str(makefile)]
        self.log = tmp_path / "inner.log"
        with self.log.open("w") as out:
            # its own session: the process group the make case signals, apart from ours
            self.top = subprocess.Popen(argv, cwd=REPO_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        self.processes: dict[int, tuple[str, str]] = {}

    def wait_for_flow(self) -> int:
        """Waits until iperf3 runs; returns pytest's PID (make's child in the make case)."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while not iperf3_running(self.prefix):
            assert self.top.poll() is None, f"pytest ended before the flow: {self.log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"no flow after {START_TIMEOUT_S} s: {self.log.read_text()[-3000:]}"
            time.sleep(0.1)
        self.processes = descendants(self.top.pid)
        assert registry.is_struct_ops(self.kernel_name) and (OWNERS_DIR / self.prefix).exists()
        if not self.under_make:
            return self.top.pid
        (pytest_pid,) = [pid for pid, (comm, _) in self.processes.items() if comm.startswith("python")]
        return pytest_pid  # make's child: its recipe's shell execs the one command

    def wait_until_gone(self, pid: int) -> float:
        start = time.monotonic()
        started = self.processes.get(pid, ("", ""))[1]
        self.top.wait(STOP_TIMEOUT_S)
        while process_alive(pid, started) and time.monotonic() - start < STOP_TIMEOUT_S:
            time.sleep(0.05)
        assert not process_alive(pid, started), f"pytest {pid} still runs {STOP_TIMEOUT_S} s after the signal"
        return time.monotonic() - start

    def left(self) -> list[str]:
        """What is left of the stopped test, one line each."""
        out = [f"namespace {ns}" for ns in namespaces_with(self.prefix)]
        out += [f"process {pid} {comm}" for pid, (comm, started) in self.processes.items()
                if process_alive(pid, started)]
        out += [f"owner record {p}" for p in (OWNERS_DIR / self.prefix, ownership.NOTES_DIR / f"{self.prefix}.json")
                if p.exists()]
        if registry.is_struct_ops(self.kernel_name) and not registry.pending_free(self.kernel_name):
            out.append(f"struct_ops {self.kernel_name}")
        return out

    def remove_leftovers(self) -> None:
        """Whatever a failed check left, removed by name and PID (never by pattern)."""
        if self.top.poll() is None:
            os.killpg(self.top.pid, signal.SIGKILL)
            self.top.wait()
        for pid, (_, started) in self.processes.items():
            if process_alive(pid, started):
                os.kill(pid, signal.SIGKILL)
        for ns in namespaces_with(self.prefix):
            delete_namespace(ns)
        registry.remove(self.kernel_name)
        forget_owner(self.prefix)
        ownership.forget(self.prefix)


@pytest.mark.parametrize("how", ["SIGTERM to pytest", "SIGTERM to make's process group"])
def test_a_stopped_pytest_tears_everything_down(tmp_path, how):
    stopped = Stopped(tmp_path, under_make="make" in how)
    try:
        pytest_pid = stopped.wait_for_flow()
        if "make" in how:
            os.killpg(stopped.top.pid, signal.SIGTERM)
        else:
            os.kill(pytest_pid, signal.SIGTERM)
        took_s = stopped.wait_until_gone(pytest_pid)
        log = stopped.log.read_text()
        print(f"\n{how}: {len(stopped.processes)} processes under it, gone {took_s:.1f} s after the signal")
        assert "SIGTERM: stopping; tearing down" in log, log[-3000:]
        assert stopped.left() == []
    finally:
        stopped.remove_leftovers()


def test_clean_removes_what_a_sigkilled_pytest_left(tmp_path):
    stopped = Stopped(tmp_path, under_make=False)
    try:
        os.kill(stopped.wait_for_flow(), signal.SIGKILL)
        stopped.top.wait(STOP_TIMEOUT_S)
        left = stopped.left()
        assert f"struct_ops {stopped.kernel_name}" in left and f"namespace {stopped.prefix}-s1" in left, left
        cleaned = subprocess.run([CONGESTLAB, "clean"], capture_output=True, text=True, timeout=120)
        assert cleaned.returncode == 0, cleaned.stderr
        assert f"{stopped.kernel_name} (map id" in cleaned.stdout, cleaned.stdout
        assert stopped.left() == []
    finally:
        stopped.remove_leftovers()
