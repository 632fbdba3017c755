"""A conventional server (Apache, nginx, Caddy, lighttpd, h2o, a spec's command) as a
foreground process with a configuration generated per run: start it in a namespace and in
its own cgroup (testbed/cgroups.py), wait for its pid file, stop it by PID and then every task
left in its cgroup (a worker, a daemonized child)."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

from congestlab.errors import ToolError
from congestlab.testbed.cgroups import ServerCgroup
from congestlab.servers.tls import RunCertificates


def tool_version(binary: str, fallback_path: str, args: list[str], pattern: str) -> str:
    """The first group of `pattern` in what `binary args` prints (stdout, then stderr); the
    output's first line when it does not match."""
    exe = shutil.which(binary) or fallback_path
    try:
        out = subprocess.run([exe, *args], capture_output=True, text=True, timeout=10)
    except FileNotFoundError:
        raise ToolError([binary, *args], None) from None
    text = out.stdout + out.stderr
    match = re.search(pattern, text)
    return match.group(1) if match else (text.strip().splitlines() or [""])[0]


def bracketed(addr: str, port: int) -> str:
    """ADDR:PORT with a v6 address in brackets."""
    return f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"


def file_tail(path: Path | None, lines: int = 5) -> str:
    """The last `lines` lines of a server's console log on one line ("" before it exists)."""
    try:
        text = path.read_text(errors="replace") if path is not None else ""
    except OSError:
        return ""
    return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:])


class ForegroundServer:
    """Subclasses name the binary, the files, and write their configuration."""

    kind = ""
    binary = ""
    fallback_path = ""
    config_name = ""
    pid_name = ""

    def __init__(self, netns: str | None, workdir: Path, docroot: Path, log_dir: Path,
                 listen: list[tuple[str, int]], tls: RunCertificates | None = None,
                 http: tuple[str, ...] = ("1.1",), cgroup: ServerCgroup | None = None):
        """`tls`: the run's certificates when the port speaks TLS; `http`: the versions it
        serves; `cgroup`: the instance's own (None: the process alone, as in unit tests)."""
        self.netns = netns
        self.workdir = Path(workdir)
        self.docroot = Path(docroot)
        self.log_dir = Path(log_dir)
        self.listen = listen
        self.tls = tls
        self.http = tuple(http)
        self.cgroup = cgroup
        self.proc: subprocess.Popen | None = None
        self.argv: list[str] = []
        self.final_cpu_ns: int | None = None  # its cgroup's CPU time when it stopped
        self.stderr_path: Path | None = None  # its stdout and stderr, once started

    @property
    def config_path(self) -> Path:
        return self.workdir / self.config_name

    def render(self) -> str:
        raise NotImplementedError

    def command(self, exe: str) -> list[str]:
        raise NotImplementedError

    def executable(self) -> str:
        exe = shutil.which(self.binary) or self.fallback_path
        if not Path(exe).exists():
            raise ToolError([self.binary], None)
        return exe

    def start(self) -> subprocess.Popen:
        exe = self.executable()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        config = self.render()
        if config:
            self.config_path.write_text(config)
        self.argv = self.command(exe)
        started = (["ip", "netns", "exec", self.netns] if self.netns else []) + self.argv
        self.stderr_path = self.log_dir / f"{self.kind}-stderr.log"
        if self.cgroup is not None:  # joined before `ip netns exec`, whose private /sys hides the cgroups
            self.cgroup.create()
            started = self.cgroup.wrap(started)
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(started, stdout=err, stderr=err, start_new_session=True,
                                         env=self.environment())
        return self.proc

    def environment(self) -> dict[str, str] | None:
        """The server's environment (None: ours)."""
        return None

    def cpu_ns(self) -> int | None:
        """CPU time of every task of the instance so far (its cgroup's cpuacct.usage)."""
        return self.cgroup.usage_ns() if self.cgroup is not None else None

    def log_tail(self, lines: int = 5) -> str:
        """The last lines of its stdout/stderr (a ready check that fails quotes them)."""
        return file_tail(self.stderr_path, lines)

    def exited(self) -> int | None:
        """Its exit status once it has ended, else None: a server that daemonized (its
        first process exited, a child in its cgroup serves) has not."""
        returncode = self.proc.poll() if self.proc is not None else None
        if returncode is not None and self.cgroup is not None and self.cgroup.pids():
            return None
        return returncode

    def wait_started(self, timeout_s: float = 10.0, families: tuple[str, ...] = ("v4", "v6")) -> None:
        """The server writes its pid file once it listens; fail fast if it exits instead
        (`families`: the runner's HTTP ready check that follows covers them)."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout_s
        pid_file = self.workdir / self.pid_name
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ToolError(self.argv, self.proc.returncode, self.stderr_path.read_text(errors="replace"))
            if pid_file.exists():
                return
            time.sleep(0.05)
        raise ToolError(self.argv, -1, f"no pid file after {timeout_s:g} s")

    def stop(self, grace_s: float = 5.0, signal_name: str = "TERM") -> None:
        """`signal_name` to the server's process, SIGKILL after `grace_s`; then every task
        left in its cgroup is killed and the cgroup removed."""
        try:
            if self.proc is not None and self.proc.poll() is None:
                self.proc.send_signal(getattr(signal, f"SIG{signal_name}"))  # its workers end with it
                try:
                    self.proc.wait(timeout=grace_s)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(timeout=grace_s)
            elif self.cgroup is not None and self.cgroup.pids():  # daemonized: ask what runs in its cgroup
                self.cgroup.signal_all(getattr(signal, f"SIG{signal_name}"), grace_s)
        finally:
            if self.cgroup is not None:
                self.final_cpu_ns = self.cgroup.usage_ns()
                self.cgroup.remove()
