"""The lean ("bare PC") server: leanweb on a TAP device inside a server namespace.

`LeanServer.start()` creates the TAP device in the namespace, attaches it to the given
bridge (testbed/plan.py tap_steps, run by the testbed's Executor), starts `leanweb` there
and waits for its one ready line; `stop()` sends SIGTERM to that PID (SIGKILL after a grace
period) and deletes the TAP device. The kernel of the
namespace never sees the server's IP traffic: leanweb has its own TCP/IP stack.
"""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import subprocess
import time
from pathlib import Path

from congestlab.errors import SpecError, TestbedError, ToolError
from congestlab.paths import rust_binary
from congestlab.spec.lean_knobs import KNOB_FLAGS, knob_args
from congestlab.servers.process import file_tail
from congestlab.testbed.cgroups import ServerCgroup
from congestlab.testbed.executor import Executor
from congestlab.testbed.plan import tap_steps

READY_PREFIX = "leanweb ready "
READY_TIMEOUT_S = 10.0
STOP_GRACE_S = 5.0

def node_mac(addr4: str) -> str:
    """The lean server's MAC on a node: locally administered, made of its IPv4 address, so
    every restart of the server there keeps it, as the seed's bare PC kept its NIC's, and no
    neighbour has to learn a new one: with a new MAC per start, a lost or ignored start
    announcement left the router sending to the old MAC for 8-45 s (docs/leanweb.md,
    "Running it")."""
    packed = ipaddress.IPv4Address(addr4.split("/")[0]).packed
    return ":".join(f"{b:02x}" for b in (0x02, 0x00, *packed))


def _run(argv: list[str]) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        raise ToolError(argv, proc.returncode, proc.stderr)
    return proc.stdout


class LeanServer:
    """One leanweb process on a TAP device bridged onto the server LAN of `netns`."""

    def __init__(
        self,
        netns: str,
        tap: str,
        bridge: str,
        addr4_cidr: str,
        addr6_cidr: str,
        gateway4: str | None,
        gateway6: str | None,
        root_dir: Path,
        log_path: Path,
        knobs: dict[str, str | float | int | bool] | None = None,
        executor: Executor | None = None,
        mac: str | None = None,
        cgroup: ServerCgroup | None = None,
    ):
        """`executor`: the testbed's, which runs the TAP device's commands (default: one of
        its own, for a server outside a Testbed, e.g. the benchmarks). `mac`: leanweb's MAC
        (default: a random one per start, or the `mac` knob). `cgroup`: the instance's own."""
        if not 0 < len(tap) <= 15:
            raise SpecError("lean.tap", f"interface name {tap!r} must be 1..15 characters")
        for name in (knobs or {}):
            if name not in KNOB_FLAGS:
                raise SpecError(f"lean.knobs.{name}", f"unknown knob; known: {', '.join(sorted(KNOB_FLAGS))}")
        if mac is not None and "mac" in (knobs or {}):
            raise SpecError("lean.knobs.mac", "given twice (as a knob and by the caller)")
        self.netns = netns
        self.tap = tap
        self.bridge = bridge
        self.addr4_cidr = addr4_cidr
        self.addr6_cidr = addr6_cidr
        self.gateway4 = gateway4
        self.gateway6 = gateway6
        self.root_dir = Path(root_dir)
        self.log_path = Path(log_path)
        self.knobs = dict(knobs or {})
        self.mac = mac
        self.executor = executor or Executor()
        self.cgroup = cgroup
        self.final_cpu_ns: int | None = None  # its cgroup's CPU time when it stopped
        self.ready_line: str | None = None
        self._proc: subprocess.Popen[str] | None = None
        self._tap_created = False
        self._binary: Path | None = None

    @property
    def binary(self) -> Path:
        if self._binary is None:
            self._binary = rust_binary("leanweb")
        return self._binary

    @property
    def argv(self) -> list[str]:
        """The leanweb command line (without the `ip netns exec` prefix)."""
        argv = [str(self.binary), "--tap", self.tap, "--addr4", self.addr4_cidr, "--addr6", self.addr6_cidr,
                "--root", str(self.root_dir), "--log", str(self.log_path)]
        if self.gateway4:
            argv += ["--gateway4", self.gateway4]
        if self.gateway6:
            argv += ["--gateway6", self.gateway6]
        if self.mac:
            argv += ["--mac", self.mac]
        return argv + knob_args(self.knobs)

    @property
    def pids(self) -> list[int]:
        return [self._proc.pid] if self._proc is not None and self._proc.poll() is None else []

    def version(self) -> str:
        return _run([str(self.binary), "--version"]).strip()

    def start(self) -> None:
        self._tap_created = True  # (if adding it fails half-way, stop() removes what was made)
        try:
            self.executor.run(tap_steps(self.netns, self.tap, self.bridge, "add"))
            argv = ["ip", "netns", "exec", self.netns] + self.argv
            if self.cgroup is not None:  # its CPU time, user-space TCP included (testbed/cgroups.py)
                self.cgroup.create()  # joined before `ip netns exec`, whose private /sys hides it
                argv = self.cgroup.wrap(argv)
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            # stdout and stderr go to a file, never a pipe nobody drains once it is ready
            with self.console_path.open("w") as console:
                self._proc = subprocess.Popen(argv, stdout=console, stderr=subprocess.STDOUT, text=True)
            self.ready_line = self._wait_ready(argv)
        except BaseException:
            self.stop()
            raise

    def cpu_ns(self) -> int | None:
        return self.cgroup.usage_ns() if self.cgroup is not None else None

    def wait_started(self, families: tuple[str, ...] = ("v4", "v6")) -> None:
        """Nothing left to wait for: start() returns once leanweb printed its ready line."""

    def exited(self) -> int | None:
        return self._proc.poll() if self._proc is not None else None

    def log_tail(self, lines: int = 5) -> str:
        return file_tail(self.console_path, lines)

    @property
    def console_path(self) -> Path:
        """leanweb's stdout and stderr (the ready line, warnings, errors)."""
        return self.log_path.with_suffix(".console.log")

    def _wait_ready(self, argv: list[str]) -> str:
        assert self._proc is not None
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            exited = self._proc.poll() is not None
            for line in self.console_path.read_text(errors="replace").splitlines():
                if line.startswith(READY_PREFIX):
                    return line.strip()
            if exited:
                break
            time.sleep(0.05)
        rc = self._proc.poll()
        output = self.console_path.read_text(errors="replace").strip()
        raise ToolError(argv, rc if rc is not None else -1, output or "no ready line in time")

    def effective_settings(self) -> dict:
        """The `start` event leanweb logs: the cc, recovery and RTO settings it really runs with."""
        try:
            with self.log_path.open() as log:
                event = json.loads(log.readline())
        except (OSError, ValueError) as err:
            raise ToolError(self.argv, None, f"no start event in {self.log_path}: {err}") from None
        if event.get("event") != "start":
            raise ToolError(self.argv, None, f"first event of {self.log_path} is not 'start'")
        return {k: v for k, v in event.items() if k not in ("event", "t_us", "unix_us")}

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        try:
            if proc is not None and proc.poll() is None:
                os.kill(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=STOP_GRACE_S)
                except subprocess.TimeoutExpired:
                    os.kill(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=STOP_GRACE_S)
        finally:
            if self.cgroup is not None:
                self.final_cpu_ns = self.cgroup.usage_ns()
                self.cgroup.remove()
            if self._tap_created:
                self._tap_created = False
                try:
                    self.executor.run(tap_steps(self.netns, self.tap, self.bridge, "del"))
                except TestbedError:
                    pass  # never made, or gone with its namespace

    def __enter__(self) -> LeanServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
