"""nginx (Debian) with a configuration generated per run, like servers/apache.py: its own
prefix, pid file, temp paths and logs under the run directory; listens on the given v4
and v6 addresses only; runs in the foreground (`daemon off`) so its PID is ours to stop."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from congestlab.errors import ToolError
from congestlab.servers.process import ForegroundServer

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


class NginxServer(ForegroundServer):
    """nginx in a network namespace (or the current one when `netns` is None)."""

    kind = "nginx"
    binary = BINARY
    fallback_path = "/usr/sbin/nginx"
    config_name = "nginx.conf"
    pid_name = "nginx.pid"

    def render(self) -> str:
        (self.workdir / "temp").mkdir(parents=True, exist_ok=True)
        return render_config(self.workdir, self.docroot, self.log_dir, self.listen)

    def command(self, exe: str) -> list[str]:
        return [exe, "-p", str(self.workdir), "-c", str(self.config_path)]

    def version(self) -> str:
        return "nginx/" + nginx_version()
