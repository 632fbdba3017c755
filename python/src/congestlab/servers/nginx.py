"""nginx (Debian) with a configuration generated per run, like servers/apache.py: its own
prefix, pid file, temp paths and logs under the run directory; listens on the given v4
and v6 addresses only; runs in the foreground (`daemon off`) so its PID is ours to stop.
Over TLS (the run's certificate) it serves HTTP/1.1 and, with `http2` on the listen, h2 by
ALPN; a plain `listen ... http2` is h2c by prior knowledge only (nginx 1.22 cannot serve
HTTP/1.1 and h2c on one port)."""

from __future__ import annotations

from pathlib import Path

from congestlab.servers.process import ForegroundServer, bracketed, tool_version
from congestlab.servers.tls import RunCertificates

BINARY = "nginx"


def nginx_version() -> str:
    return tool_version(BINARY, "/usr/sbin/nginx", ["-v"], r"nginx/(\S+)")


def render_config(workdir: Path, docroot: Path, log_dir: Path, listen: list[tuple[str, int]],
                  tls: RunCertificates | None = None, http: tuple[str, ...] = ("1.1",)) -> str:
    temp = workdir / "temp"
    # plain HTTP/1.1 renders `listen ADDR:PORT;` alone, as before TLS and HTTP/2 existed
    flags = ("" if tls is None else " ssl") + (" http2" if "2" in http else "")
    listens = "\n".join(f"        listen {bracketed(a, p)}{flags};" for a, p in listen)
    if tls is not None:
        # nginx 1.22 leaves TLS 1.3 out of its default protocols (1.23.4 added it)
        listens += (f"\n        ssl_certificate {tls.cert};\n        ssl_certificate_key {tls.key};"
                    "\n        ssl_protocols TLSv1.2 TLSv1.3;")
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
        return render_config(self.workdir, self.docroot, self.log_dir, self.listen, self.tls, self.http)

    def command(self, exe: str) -> list[str]:
        return [exe, "-p", str(self.workdir), "-c", str(self.config_path)]

    def version(self) -> str:
        return "nginx/" + nginx_version()
