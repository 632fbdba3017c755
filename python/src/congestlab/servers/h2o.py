"""h2o 2.2 (Debian) with a configuration generated per run (YAML), in the foreground (`h2o -c`, its default "worker" mode) with a pid file;
listens on the given v4 and v6 addresses only. Over TLS it always offers h2 and http/1.1
by ALPN (no setting turns h2 off); on a plain port it always accepts h2c by prior knowledge
(spec/servers.py BUILTIN_SERVES)."""

from __future__ import annotations

import json

from congestlab.servers.process import ForegroundServer, tool_version

BINARY = "h2o"
FALLBACK = "/usr/bin/h2o"
# %{remote}p is the client's port: it ties each log line to its connection in the pcap
ACCESS_FORMAT = '%h %{remote}p "%r" %s %b %{duration}x'


def h2o_version() -> str:
    return tool_version(BINARY, FALLBACK, ["-v"], r"h2o version (\S+)")


class H2oServer(ForegroundServer):
    """h2o in a network namespace (or the current one when `netns` is None)."""

    kind = "h2o"
    binary = BINARY
    fallback_path = FALLBACK
    config_name = "h2o.conf"
    pid_name = "h2o.pid"

    def render(self) -> str:
        q = json.dumps  # a JSON string or mapping is a YAML flow scalar or mapping
        lines = [
            f"pid-file: {q(str(self.workdir / self.pid_name))}",
            f"error-log: {q(str(self.log_dir / 'h2o-error.log'))}",
            # started as root h2o would switch to nobody before writing its pid file (in our workdir)
            "user: root",
            # one event loop, as nginx's one worker
            "num-threads: 1",
            "http1-request-timeout: 5",
            "http2-idle-timeout: 5",
            # HTTP/1.1's Upgrade to h2c: off unless the port serves HTTP/2
            f"http1-upgrade-to-http2: {'ON' if '2' in self.http else 'OFF'}",
        ]
        # h2o takes one address per `listen` and the key repeated (not a list)
        for addr, port in self.listen:
            entry: dict = {"host": addr, "port": port}
            if self.tls is not None:
                # no OCSP stapling: the run's CA has no responder (h2o would run its fetcher, a
                # perl child, again and again)
                entry["ssl"] = {"certificate-file": str(self.tls.cert), "key-file": str(self.tls.key),
                                "ocsp-update-interval": 0}
            lines.append(f"listen: {q(entry)}")
        lines += [
            "access-log:",
            f"  path: {q(str(self.log_dir / 'h2o-access.log'))}",
            f"  format: {q(ACCESS_FORMAT)}",
            "hosts:",
            "  default:",
            "    paths:",
            "      /:",
            f"        file.dir: {q(str(self.docroot))}",
        ]
        return "\n".join(lines) + "\n"

    def command(self, exe: str) -> list[str]:
        return [exe, "-c", str(self.config_path)]

    def version(self) -> str:
        return "h2o/" + h2o_version()
