"""lighttpd (Debian 1.4) with a configuration generated per run, in the foreground
(`lighttpd -D`) with a pid file: one socket per given address (`server.bind` for the first,
`$SERVER["socket"]` for the others, so exactly those), TLS by mod_openssl (Debian's
lighttpd-mod-openssl) on each socket, HTTP/2 on or off by `server.feature-flags`."""

from __future__ import annotations

from congestlab.servers.process import ForegroundServer, bracketed, tool_version

BINARY = "lighttpd"
FALLBACK = "/usr/sbin/lighttpd"


def lighttpd_version() -> str:
    return tool_version(BINARY, FALLBACK, ["-v"], r"lighttpd/(\S+)")


def _quoted(text: object) -> str:
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"') + '"'


class LighttpdServer(ForegroundServer):
    """lighttpd in a network namespace (or the current one when `netns` is None)."""

    kind = "lighttpd"
    binary = BINARY
    fallback_path = FALLBACK
    config_name = "lighttpd.conf"
    pid_name = "lighttpd.pid"

    def render(self) -> str:
        h2 = "enable" if "2" in self.http else "disable"
        modules = ["mod_accesslog"] + (["mod_openssl"] if self.tls is not None else [])
        (first, port), *others = self.listen
        lines = [
            "server.modules = (" + ", ".join(_quoted(m) for m in modules) + ")",
            f"server.document-root = {_quoted(self.docroot)}",
            # a v6 address in brackets (bare, lighttpd resolves it as v4 and fails)
            f"server.bind = {_quoted(f'[{first}]' if ':' in first else first)}",
            f"server.port = {port}",
            f"server.pid-file = {_quoted(self.workdir / self.pid_name)}",
            f"server.errorlog = {_quoted(self.log_dir / 'lighttpd-error.log')}",
            # h2proto: HTTP/2 by ALPN over TLS and h2c (prior knowledge, Upgrade) on a plain port
            f'server.feature-flags = ("server.h2proto" => "{h2}", "server.h2c" => "{h2}")',
            "server.max-keep-alive-idle = 5",
            'include_shell "/usr/share/lighttpd/create-mime.conf.pl"',
            # %{remote}p is the client's port: it ties each log line to its connection in the pcap
            f"accesslog.filename = {_quoted(self.log_dir / 'lighttpd-access.log')}",
            'accesslog.format = "%h %{remote}p \\"%r\\" %>s %b %D"',
        ]
        if self.tls is not None:
            lines += ['ssl.engine = "enable"', f"ssl.pemfile = {_quoted(self.tls.cert)}",
                      f"ssl.privkey = {_quoted(self.tls.key)}"]
        engine = ' ssl.engine = "enable" ' if self.tls is not None else " "
        lines += [f"$SERVER[\"socket\"] == {_quoted(bracketed(a, p))} {{{engine}}}" for a, p in others]
        return "\n".join(lines) + "\n"

    def command(self, exe: str) -> list[str]:
        return [exe, "-D", "-f", str(self.config_path)]

    def version(self) -> str:
        return "lighttpd/" + lighttpd_version()
