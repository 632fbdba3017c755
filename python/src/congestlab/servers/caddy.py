"""Caddy 2 (Debian) with a Caddyfile generated per run: no admin endpoint, no automatic HTTPS
(no certificate is obtained, no HTTP->HTTPS redirect: a TLS port uses the run's certificate),
its data, config and storage under the instance's workdir (XDG_* and HOME point there), in
the foreground (`caddy run`) with a pid file; listens on the given v4 and v6 addresses only."""

from __future__ import annotations

import os

from congestlab.servers.process import ForegroundServer, tool_version

BINARY = "caddy"
FALLBACK = "/usr/bin/caddy"
# ALPN / listener protocols: with h3 Caddy 2.6 opens a QUIC UDP listener on the same port
# number and address; `protocols` without h3 leaves UDP closed
_TLS_PROTOCOLS = {"1.1": "h1", "2": "h2", "3": "h3"}
# its QUIC stack's own settings (Debian's caddy is built with quic-go 0.29.0), recorded per
# instance that serves HTTP/3 (docs/http3.md, "Confounds"): read from quic-go's source, not
# measured; Caddy sets none of them
QUIC_CONFOUNDS = {"stack": "quic-go 0.29.0 (user space, in Caddy's process)", "quic_cc": "cubic (quic-go's only)",
                  "pacing": "always (quic-go paces)", "initial_window": "32 packets (quic-go's default)",
                  "max_udp_payload_bytes": "1252 (v4) / 1232 (v6) at first (quic-go's default)",
                  "flow_control_window": "quic-go's defaults, auto-tuned", "udp_gso": "none in quic-go 0.29",
                  "qlog": False}
# h2c adds HTTP/2 by prior knowledge (and by Upgrade) to HTTP/1.1; Caddy refuses h2 or h2c
# without h1 (spec/servers.py BUILTIN_SERVES)
_PLAIN_PROTOCOLS = {"1.1": "h1", "2": "h2c"}


def caddy_version() -> str:
    return tool_version(BINARY, FALLBACK, ["version"], r"v?(\d+\.\d+\.\d+\S*)")


class CaddyServer(ForegroundServer):
    """Caddy in a network namespace (or the current one when `netns` is None)."""

    kind = "caddy"
    binary = BINARY
    fallback_path = FALLBACK
    config_name = "Caddyfile"
    pid_name = "caddy.pid"

    def render(self) -> str:
        names = _TLS_PROTOCOLS if self.tls is not None else _PLAIN_PROTOCOLS
        protocols = " ".join(names[v] for v in ("1.1", "2", "3") if v in self.http)
        ports = sorted({p for _, p in self.listen})
        if len(ports) != 1:
            raise ValueError(f"a Caddy server listens on one port, not {ports}")
        scheme = "https" if self.tls is not None else "http"
        binds = " ".join(a for a, _ in self.listen)
        tls = f"\ttls {self.tls.cert} {self.tls.key}\n" if self.tls is not None else ""
        # the access log is JSON: request.remote_port ties each line to its connection in the pcap
        return f"""{{
\tadmin off
\tauto_https off
\tstorage file_system {self.workdir / "storage"}
\tservers {{
\t\tprotocols {protocols}
\t\ttimeouts {{
\t\t\tidle 5s
\t\t}}
\t}}
}}

{scheme}://:{ports[0]} {{
\tbind {binds}
{tls}\troot * {self.docroot}
\tfile_server
\tlog {{
\t\toutput file {self.log_dir / "caddy-access.log"} {{
\t\t\troll_disabled
\t\t}}
\t\tformat json
\t}}
}}
"""

    def environment(self) -> dict[str, str]:
        # Caddy keeps its autosave, locks and certificates under XDG_CONFIG_HOME,
        # XDG_DATA_HOME and HOME: all of them in the instance's workdir, nothing in ours
        home = self.workdir / "home"
        return {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / "config"),
                "XDG_DATA_HOME": str(home / "data")}

    def command(self, exe: str) -> list[str]:
        return [exe, "run", "--config", str(self.config_path), "--adapter", "caddyfile",
                "--pidfile", str(self.workdir / self.pid_name)]

    def version(self) -> str:
        return "Caddy/" + caddy_version()

    def confounds(self) -> dict | None:
        return QUIC_CONFOUNDS if "3" in self.http else None
