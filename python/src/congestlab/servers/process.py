"""A conventional server (Apache, nginx) as a foreground process with a configuration
generated per run: start it in a namespace, wait for its pid file, stop it by PID."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

from congestlab.errors import ToolError


class ForegroundServer:
    """Subclasses name the binary, the files, and write their configuration."""

    kind = ""
    binary = ""
    fallback_path = ""
    config_name = ""
    pid_name = ""

    def __init__(self, netns: str | None, workdir: Path, docroot: Path, log_dir: Path,
                 listen: list[tuple[str, int]]):
        self.netns = netns
        self.workdir = Path(workdir)
        self.docroot = Path(docroot)
        self.log_dir = Path(log_dir)
        self.listen = listen
        self.proc: subprocess.Popen | None = None
        self.argv: list[str] = []

    @property
    def config_path(self) -> Path:
        return self.workdir / self.config_name

    def render(self) -> str:
        raise NotImplementedError

    def command(self, exe: str) -> list[str]:
        raise NotImplementedError

    def start(self) -> subprocess.Popen:
        exe = shutil.which(self.binary) or self.fallback_path
        if not Path(exe).exists():
            raise ToolError([self.binary], None)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(self.render())
        self.argv = self.command(exe)
        prefix = ["ip", "netns", "exec", self.netns] if self.netns else []
        self.stderr_path = self.log_dir / f"{self.kind}-stderr.log"
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(prefix + self.argv, stdout=err, stderr=err, start_new_session=True)
        return self.proc

    def wait_started(self, timeout_s: float = 10.0) -> None:
        """The server writes its pid file once it listens; fail fast if it exits instead."""
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

    def stop(self, grace_s: float = 5.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()  # a graceful stop of the parent ends its workers too
        try:
            self.proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=grace_s)
