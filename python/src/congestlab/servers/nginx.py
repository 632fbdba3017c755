"""nginx (Debian) with a configuration generated per run, like servers/apache.py: its own
prefix, pid file, temp paths and logs under the run directory; listens on the given v4
and v6 addresses only; runs in the foreground (`daemon off`) so its PID is ours to stop."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

from congestlab.errors import ToolError

BINARY = "nginx"


def nginx_version() -> str:
    exe = shutil.which(BINARY) or "/usr/sbin/nginx"
    try:
        out = subprocess.run([exe, "-v"], capture_output=True, text=True, timeout=10)
    except FileNotFoundError:
        raise ToolError([BINARY, "-v"], None) from None
    match = re.search(r"nginx/(\S+)", out.stderr + out.stdout)
    return match.group(1) if match else (out.stderr or out.stdout).strip()


def _listen(addr: str, port: int) -> str:
    return f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"


def render_config(workdir: Path, docroot: Path, log_dir: Path, listen: list[tuple[str, int]]) -> str:
    temp = workdir / "temp"
    listens = "\n".join(f"        listen {_listen(a, p)};" for a, p in listen)
    return f"""daemon off;
worker_processes 1;
pid {workdir}/nginx.pid;
error_log {log_dir}/nginx-error.log warn;
events {{ worker_connections 4096; }}
http {{
    include /etc/nginx/mime.types;
    # $remote_port ties each log line to its connection in the pcap
    log_format measured '$remote_addr $remote_port "$request" $status $body_bytes_sent $request_time';
    access_log {log_dir}/nginx-access.log measured;
    sendfile on;
    keepalive_timeout 5;
    client_body_temp_path {temp}/body;
    proxy_temp_path {temp}/proxy;
    fastcgi_temp_path {temp}/fastcgi;
    uwsgi_temp_path {temp}/uwsgi;
    scgi_temp_path {temp}/scgi;
    server {{
{listens}
        root {docroot};
    }}
}}
"""


class NginxServer:
    """nginx in a network namespace (or the current one when `netns` is None)."""

    kind = "nginx"

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
        return self.workdir / "nginx.conf"

    def start(self) -> subprocess.Popen:
        exe = shutil.which(BINARY) or "/usr/sbin/nginx"
        if not Path(exe).exists():
            raise ToolError([BINARY], None)
        (self.workdir / "temp").mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(render_config(self.workdir, self.docroot, self.log_dir, self.listen))
        self.argv = [exe, "-p", str(self.workdir), "-c", str(self.config_path)]
        prefix = ["ip", "netns", "exec", self.netns] if self.netns else []
        self.stderr_path = self.log_dir / "nginx-stderr.log"
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(prefix + self.argv, stdout=err, stderr=err, start_new_session=True)
        return self.proc

    def wait_started(self, timeout_s: float = 10.0) -> None:
        """nginx writes its pid file once it listens; fail fast if it exits instead."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout_s
        pid_file = self.workdir / "nginx.pid"
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
        self.proc.terminate()  # the master stops its worker
        try:
            self.proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=grace_s)

    def version(self) -> str:
        return "nginx/" + nginx_version()
