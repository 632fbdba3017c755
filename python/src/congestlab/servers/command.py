"""Any program as the server under test (`kind = "command"`): its argv, config template and
environment with the instance's placeholders filled in (spec/server_template.py), started in
the foreground in its cgroup like every server (servers/process.py), ready when the spec says
(servers/readiness.py; the HTTP check is the runner's real GET), stopped with the spec's
signal and then by its cgroup."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

from congestlab.errors import ToolError
from congestlab.servers.process import ForegroundServer, bracketed
from congestlab.servers.readiness import listening_families, log_matches
from congestlab.spec.server_template import render
from congestlab.spec.servers import ServerSpec

VERSION_TIMEOUT_S = 10


def placeholder_values(server: ForegroundServer, config_name: str) -> dict[str, str]:
    """Every placeholder's value for one instance (TLS ones only when it speaks TLS)."""
    port = server.listen[0][1]
    addr4 = next(a for a, _ in server.listen if ":" not in a)
    addr6 = next(a for a, _ in server.listen if ":" in a)
    values = {"port": str(port), "addr4": addr4, "addr6": addr6, "listen4": bracketed(addr4, port),
              "listen6": bracketed(addr6, port), "docroot": str(server.docroot), "workdir": str(server.workdir),
              "logdir": str(server.log_dir), "config": str(server.workdir / config_name)}
    if server.tls is not None:
        values |= {"cert": str(server.tls.cert), "key": str(server.tls.key), "ca": str(server.tls.ca)}
    return values


class CommandServer(ForegroundServer):
    """A spec's own server program."""

    kind = "command"

    def __init__(self, spec: ServerSpec, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.spec = spec
        self.config_name = spec.config_name
        self.values = placeholder_values(self, spec.config_name)

    def _fill(self, text: str) -> str:
        try:
            return render(text, self.values)
        except KeyError as missing:
            raise ToolError(self.spec.command or [], None,
                            f"placeholder {{{missing.args[0]}}} has no value (the TLS ones need tls = true)") from None

    def executable(self) -> str:
        exe = self._fill(self.spec.command[0])
        if shutil.which(exe) is None:
            raise ToolError([exe], None)  # not found, or not executable
        return exe

    def render(self) -> str:
        return self._fill(self.spec.config_template or "")

    def command(self, exe: str) -> list[str]:
        return [exe] + [self._fill(arg) for arg in self.spec.command[1:]]

    def environment(self) -> dict[str, str] | None:
        if not self.spec.env:
            return None
        return {**os.environ, **{k: self._fill(v) for k, v in self.spec.env.items()}}

    def wait_started(self, timeout_s: float | None = None, families: tuple[str, ...] = ("v4", "v6")) -> None:
        """Its process runs and, for a `tcp_listen`, `udp_bound` or `log_regex` check, the
        check passes; an `http` check is the runner's real GET that follows."""
        assert self.proc is not None
        ready = self.spec.ready
        timeout_s = ready.timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        log = Path(self._fill(ready.log)) if ready.log else self.stderr_path
        while True:
            if self.exited() is not None:
                raise ToolError(self.argv, self.proc.returncode, f"it exited before it was ready: {self.log_tail()}")
            if ready.kind == "http":
                return
            if ready.kind == "log_regex" and log_matches(log, ready.regex or ""):
                return
            if ready.kind in ("tcp_listen", "udp_bound"):
                protocol = "tcp" if ready.kind == "tcp_listen" else "udp"
                found = listening_families(self.netns, self.values["port"], protocol,
                                           self.values["addr4"], self.values["addr6"])
                if set(families) <= found:
                    return
            if time.monotonic() > deadline:
                raise ToolError(self.argv, -1, f"not ready ({ready.kind}) after {timeout_s:g} s: {self.log_tail()}")
            time.sleep(0.05)

    def version(self) -> str:
        version = self.spec.version
        if version is None:
            return "unknown (no version given in the spec)"
        if isinstance(version, str):
            return version
        argv = [self._fill(a) for a in version]
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=VERSION_TIMEOUT_S,
                                 env=self.environment())
        except (OSError, subprocess.TimeoutExpired) as err:
            raise ToolError(argv, None, f"its version command failed: {err}") from None
        lines = (out.stdout or out.stderr).strip().splitlines()
        return lines[0].strip() if lines else f"unknown ({' '.join(argv)} printed nothing)"

    def stop(self, grace_s: float | None = None, signal_name: str | None = None) -> None:
        """The spec's signal and grace (stop.signal, stop.grace_s), then its cgroup."""
        super().stop(self.spec.stop.grace_s if grace_s is None else grace_s,
                     signal_name or self.spec.stop.signal)
