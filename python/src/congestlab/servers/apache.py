"""Apache httpd (Debian 2.4) with a configuration generated per run.

Own ServerRoot, PidFile, runtime dir and logs under the run directory; Listen on the
given v4 and v6 addresses only; runs in the foreground so its PID is ours to stop.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

from congestlab.errors import ToolError

MODULES_DIR = Path("/usr/lib/apache2/modules")
BINARY = "apache2"


def apache_version() -> str:
    exe = shutil.which(BINARY) or "/usr/sbin/apache2"
    try:
        out = subprocess.run([exe, "-v"], capture_output=True, text=True, timeout=10).stdout
    except FileNotFoundError:
        raise ToolError([BINARY, "-v"], None) from None
    match = re.search(r"Apache/(\S+)", out)
    return match.group(1) if match else out.strip()


def _listen(addr: str, port: int) -> str:
    return f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"


def render_config(workdir: Path, docroot: Path, log_dir: Path, listen: list[tuple[str, int]]) -> str:
    lines = [
        f'ServerRoot "{workdir}"',
        f'DefaultRuntimeDir "{workdir}/run"',
        f'PidFile "{workdir}/httpd.pid"',
        f'LoadModule mpm_event_module {MODULES_DIR}/mod_mpm_event.so',
        f'LoadModule authz_core_module {MODULES_DIR}/mod_authz_core.so',
        f'LoadModule mime_module {MODULES_DIR}/mod_mime.so',
        "User www-data",
        "Group www-data",
        "ServerName server.congestlab.test",
        *[f"Listen {_listen(a, p)}" for a, p in listen],
        f'DocumentRoot "{docroot}"',
        f'<Directory "{docroot}">',
        "    Require all granted",
        "</Directory>",
        "TypesConfig /etc/mime.types",
        "KeepAlive On",
        "KeepAliveTimeout 5",
        "EnableSendfile On",
        "Timeout 30",
        f'ErrorLog "{log_dir}/apache-error.log"',
        "LogLevel warn",
        # %{remote}p is the client's port: it ties each log line to its connection in the pcap
        'LogFormat "%a %{remote}p \\"%r\\" %>s %B %D" measured',
        f'CustomLog "{log_dir}/apache-access.log" measured',
    ]
    return "\n".join(lines) + "\n"


class ApacheServer:
    """Apache in a network namespace (or the current one when `netns` is None)."""

    kind = "apache"

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
        return self.workdir / "httpd.conf"

    def start(self) -> subprocess.Popen:
        exe = shutil.which(BINARY) or "/usr/sbin/apache2"
        if not Path(exe).exists():
            raise ToolError([BINARY], None)
        (self.workdir / "run").mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(render_config(self.workdir, self.docroot, self.log_dir, self.listen))
        self.argv = [exe, "-f", str(self.config_path), "-DFOREGROUND"]
        prefix = ["ip", "netns", "exec", self.netns] if self.netns else []
        self.stderr_path = self.log_dir / "apache-stderr.log"
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(prefix + self.argv, stdout=err, stderr=err, start_new_session=True)
        return self.proc

    def wait_started(self, timeout_s: float = 10.0) -> None:
        """Apache writes its PidFile once it listens; fail fast if it exits instead."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout_s
        pid_file = self.workdir / "httpd.pid"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ToolError(self.argv, self.proc.returncode, self.stderr_path.read_text(errors="replace"))
            if pid_file.exists():
                return
            time.sleep(0.05)
        raise ToolError(self.argv, -1, f"no PidFile after {timeout_s:g} s")

    def stop(self, grace_s: float = 5.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()  # graceful stop of the parent ends its children too
        try:
            self.proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=grace_s)

    def version(self) -> str:
        return "Apache/" + apache_version()
