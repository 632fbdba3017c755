"""Apache httpd (Debian 2.4) with a configuration generated per run.

Own ServerRoot, PidFile, runtime dir and logs under the run directory; Listen on the
given v4 and v6 addresses only; runs in the foreground so its PID is ours to stop.
"""

from __future__ import annotations

from pathlib import Path

from congestlab.servers.process import ForegroundServer, bracketed, tool_version
from congestlab.servers.tls import RunCertificates

MODULES_DIR = Path("/usr/lib/apache2/modules")
BINARY = "apache2"


def apache_version() -> str:
    return tool_version(BINARY, "/usr/sbin/apache2", ["-v"], r"Apache/(\S+)")


def render_config(workdir: Path, docroot: Path, log_dir: Path, listen: list[tuple[str, int]],
                  tls: RunCertificates | None = None, http: tuple[str, ...] = ("1.1",)) -> str:
    """Plain HTTP/1.1 renders what it did before TLS and HTTP/2 existed; `tls` adds mod_ssl
    on every Listen, "2" in `http` mod_http2 (`h2` by ALPN over TLS, `h2c` by prior knowledge
    on a plain port, beside HTTP/1.1)."""
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
        *[f"Listen {bracketed(a, p)}" for a, p in listen],
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
    if "2" in http:
        lines += [f"LoadModule http2_module {MODULES_DIR}/mod_http2.so",
                  f"Protocols {'h2' if tls is not None else 'h2c'} http/1.1",
                  "H2Direct on"]  # h2c by prior knowledge (the client sends HTTP/2's preface)
    if tls is not None:
        lines += [f"LoadModule ssl_module {MODULES_DIR}/mod_ssl.so",
                  f"LoadModule socache_shmcb_module {MODULES_DIR}/mod_socache_shmcb.so",
                  f'SSLSessionCache "shmcb:{workdir}/run/ssl_scache(512000)"',
                  "SSLProtocol -all +TLSv1.2 +TLSv1.3",
                  f'SSLCertificateFile "{tls.cert}"', f'SSLCertificateKeyFile "{tls.key}"', "SSLEngine on"]
    return "\n".join(lines) + "\n"


class ApacheServer(ForegroundServer):
    """Apache in a network namespace (or the current one when `netns` is None)."""

    kind = "apache"
    binary = BINARY
    fallback_path = "/usr/sbin/apache2"
    config_name = "httpd.conf"
    pid_name = "httpd.pid"

    def render(self) -> str:
        (self.workdir / "run").mkdir(parents=True, exist_ok=True)
        return render_config(self.workdir, self.docroot, self.log_dir, self.listen, self.tls, self.http)

    def command(self, exe: str) -> list[str]:
        return [exe, "-f", str(self.config_path), "-DFOREGROUND"]

    def version(self) -> str:
        return "Apache/" + apache_version()
