"""Each server instance in its own cgroup (v1 `cpuacct`, `pids` and `freezer`, one directory
`congestlab/<run prefix>-<server>-<instance>` in each): every process it starts — workers, a
daemonized child — is in it, so a stop kills them all (frozen first, so none forks away) and
`cpuacct.usage` is the CPU time of the whole server in ns (what CPU per GET reads; the 10 ms
ticks of /proc are too coarse for a 30 ms GET)."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path
from typing import Callable

from congestlab.errors import TestbedError

CGROUP_ROOT = Path("/sys/fs/cgroup")
CONTROLLERS = ("cpuacct", "pids", "freezer")
PARENT = "congestlab"
NAME_RE = re.compile(r"^(cl[0-9a-f]{6})-[a-z0-9._-]+$")
# /proc/stat counts in USER_HZ
_TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")


def cgroups_available() -> bool:
    return all((CGROUP_ROOT / c / "tasks").exists() for c in CONTROLLERS)


class ServerCgroup:
    """One server instance's cgroup in every controller of CONTROLLERS."""

    def __init__(self, name: str):
        if not NAME_RE.match(name):
            raise ValueError(f"cgroup name {name!r} is not <run prefix>-<server>-<instance>")
        self.name = name

    def path(self, controller: str) -> Path:
        return CGROUP_ROOT / controller / PARENT / self.name

    def create(self) -> None:
        if not cgroups_available():
            raise TestbedError(f"cgroup v1 controllers {', '.join(CONTROLLERS)} are not mounted under {CGROUP_ROOT} "
                               "(each server runs in its own cgroup)")
        for controller in CONTROLLERS:
            self.path(controller).mkdir(parents=True, exist_ok=True)

    def wrap(self, argv: list[str]) -> list[str]:
        """`argv` started by a shell that first moves itself into the cgroup, then execs it
        (so the server's first instruction already runs inside)."""
        tasks = [str(self.path(c) / "tasks") for c in CONTROLLERS]
        joins = " && ".join(f'echo $$ > "${i + 1}"' for i in range(len(tasks)))
        return ["sh", "-c", f'{joins} && shift {len(tasks)} && exec "$@"', "congestlab-cgroup", *tasks, *argv]

    def usage_ns(self) -> int | None:
        """The CPU time (user + system) of every task that ran in it, ns; None once removed."""
        try:
            return int((self.path("cpuacct") / "cpuacct.usage").read_text())
        except (OSError, ValueError):
            return None

    def pids(self) -> list[int]:
        try:
            text = (self.path("pids") / "cgroup.procs").read_text()
        except OSError:
            return []
        return [int(p) for p in text.split()]

    def signal_all(self, signum: int, grace_s: float) -> None:
        """`signum` to every task, then wait up to `grace_s` for them to end (a graceful stop
        of a server whose first process is gone)."""
        for pid in self.pids():
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace_s
        while self.pids() and time.monotonic() < deadline:
            time.sleep(0.02)

    def kill_all(self, timeout_s: float = 5.0) -> list[int]:
        """SIGKILL every task in it (frozen while the signals go out, so none forks a new
        one between the listing and the kill); the PIDs killed."""
        freezer = self.path("freezer") / "freezer.state"
        pids = self.pids()
        if not pids:
            return []
        _write(freezer, "FROZEN")
        pids = self.pids()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _write(freezer, "THAWED")  # a frozen task does not act on SIGKILL until thawed
        deadline = time.monotonic() + timeout_s
        while self.pids() and time.monotonic() < deadline:
            time.sleep(0.02)
        left = self.pids()
        if left:
            raise TestbedError(f"cgroup {self.name}: tasks {left} survived SIGKILL for {timeout_s:g} s")
        return pids

    def remove(self) -> None:
        """Kill what is left and remove its directories (an empty cgroup's rmdir)."""
        self.kill_all()
        for controller in CONTROLLERS:
            for path in (self.path(controller), self.path(controller).parent):
                try:
                    path.rmdir()
                except OSError:
                    pass  # gone already; the parent: another run's cgroups are in it


def _write(path: Path, value: str) -> None:
    try:
        path.write_text(value)
    except OSError:
        pass  # gone with its cgroup: nothing to freeze


def run_cgroups() -> dict[str, list[str]]:
    """Run prefix -> names of the server cgroups left under PARENT (for `congestlab clean`)."""
    out: dict[str, list[str]] = {}
    for controller in CONTROLLERS:
        parent = CGROUP_ROOT / controller / PARENT
        if not parent.is_dir():
            continue
        for child in parent.iterdir():
            match = NAME_RE.match(child.name)
            if child.is_dir() and match and child.name not in out.get(match.group(1), []):
                out.setdefault(match.group(1), []).append(child.name)
    return out


def host_softirq_ms() -> float:
    """The host's softirq time so far, all CPUs (/proc/stat, USER_HZ ticks: 10 ms steps).
    Kernel TCP's receive and transmit work runs mostly here, charged to no server's cgroup."""
    with open("/proc/stat") as f:
        fields = f.readline().split()
    return int(fields[7]) * _TICK_MS


class GetCpu:
    """CPU per GET: the server's cgroup CPU time and the host's softirq time from its creation
    (just before the client starts) to `used()` (just after it ended)."""

    def __init__(self, server_cpu_ns: Callable[[], int | None] | None):
        self.read = server_cpu_ns
        self.cpu0 = server_cpu_ns() if server_cpu_ns else None
        self.softirq0 = host_softirq_ms()

    def used(self) -> tuple[int | None, float]:
        cpu1 = self.read() if self.read else None
        cpu = cpu1 - self.cpu0 if cpu1 is not None and self.cpu0 is not None else None
        return cpu, round(host_softirq_ms() - self.softirq0, 3)
